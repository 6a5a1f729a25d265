"""`ledger witness`: a C2SP tlog-witness that cosigns other logs' checkpoints."""
