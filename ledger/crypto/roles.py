"""What a key may sign: its role (a module of its own, importing nothing, so
that a command's parser lists the roles without loading the key code)."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    """What a key may sign."""

    LEDGER_NODE = "ledger-node"
    CHECKPOINT = "checkpoint"
    DEALER_DEVICE = "dealer-device"
    OPERATOR = "operator"
    AUDITOR = "auditor"
    WITNESS = "witness"  # cosigns other logs' checkpoints (C2SP tlog-cosignature)
