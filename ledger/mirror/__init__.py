"""`ledger mirror`: a regulator's verified copy of a node's log."""
