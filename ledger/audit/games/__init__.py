"""Verifying what the events say (`ledger verify --level settlement`, steps
8 to 11): the money, each outcome's source (seeds, devices), each round's
rules and every payout, re-derived by the round's own game."""
