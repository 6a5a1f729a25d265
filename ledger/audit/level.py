"""What `ledger verify` checks: its levels (ledger.audit.verify says what each covers).

A module of its own, importing next to nothing: a command's parser names the
levels without importing the verifier.
"""

from __future__ import annotations

from enum import StrEnum

from ledger.errors import ConfigError


class Level(StrEnum):
    INTEGRITY = "integrity"
    SIGNATURES = "signatures"
    SETTLEMENT = "settlement"  # signatures, then the money re-derived from the events

    @classmethod
    def parse(cls, text: str) -> Level:
        try:
            return cls(text)
        except ValueError:
            choices = ", ".join(level.value for level in cls)
            raise ConfigError(f"unknown verify level {text!r}: choose one of {choices}") from None
