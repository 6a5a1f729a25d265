"""`ledger report`: an auditor's HTML report, aggregated in one pass over the log."""
