"""Verifying the log: its keys, checkpoints, recorded runs, envelopes, chains
and Merkle tree (`ledger verify`'s steps 1 to 7), from a store or a bundle."""
