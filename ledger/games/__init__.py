"""Games: the contract every game plugin implements (see `api`)."""
