"""The bundle's file names and format constants, shared by writer and reader."""

from __future__ import annotations

from typing import Final

FORMAT: Final = "casino-ledger/export"
MANIFEST: Final = "manifest.json"
EVENTS: Final = "events.jsonl"
CHECKPOINTS: Final = "checkpoints.jsonl"
KEYRING: Final = "keyring.json"
GAMES: Final = "games.jsonl"
PROOFS: Final = "proofs.jsonl"
CONSISTENCY: Final = "consistency.jsonl"
ROUND_OPENED: Final = "Round.Opened"
TLOG_PROOFS: Final = "tlog-proofs"  # a round bundle: one C2SP tlog-proof per event
