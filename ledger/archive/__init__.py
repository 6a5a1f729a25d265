"""`ledger archive`: finished rounds older than a horizon leave the live store
for a signed, self-verifying archive directory (docs/archive.md).

`due` chooses what leaves, `files` writes and checks an archive directory
(`signatures` verifies its envelopes' signatures in a second process), `run`
takes the steps in the order that loses nothing, `fill` gives archived
events back to `ledger verify --archive`.
"""
