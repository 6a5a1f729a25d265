"""The log published to a back-office's message broker (`ledger publish`):
every event in log order, at least once, each message keyed by its log
position (docs/publish.md)."""
