"""A signed, event-sourced audit ledger for casino table games."""

from __future__ import annotations

__version__ = "0.1.0"
