"""How much one mirror pass handles (ledger.mirror.copy): the defaults of
`ledger mirror --batch` and `--recheck`, importable without the mirror itself."""

from __future__ import annotations

BATCH = 10_000  # events checked and written in one transaction, at most
RECHECK = 1_000  # events of the history already held re-read from the source each pass
