"""The account heads map (docs/history.md): the incremental map gives the root the
definition gives, whatever the order of updates; every proof leads to it and
no proof of a value it does not hold does; checkpoints carry its root in a
fifth line, read strictly."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.heads_map import EMPTY, HeadsMap, node, root_from_proof
from ledger.crypto.keys import Role
from ledger.crypto.signing import InMemorySigner
from ledger.errors import VerificationError


def definition(items: dict[bytes, bytes], depth: int = 0) -> bytes:
    """The root straight from docs/history.md's three rules."""
    if not items:
        return EMPTY
    if len(items) == 1:
        return next(iter(items.values()))
    bit = lambda key: int.from_bytes(key, "big") >> (255 - depth) & 1  # noqa: E731
    left = {k: v for k, v in items.items() if not bit(k)}
    right = {k: v for k, v in items.items() if bit(k)}
    return node(definition(left, depth + 1), definition(right, depth + 1))


def key(n: int) -> bytes:
    return hashlib.sha256(n.to_bytes(4, "big")).digest()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.binary(min_size=32, max_size=32)), max_size=80))
def test_updates_in_any_order_give_the_definitions_root(updates: list[tuple[int, bytes]]) -> None:
    incremental, final = HeadsMap(), {}
    for n, leaf in updates:
        incremental.set(key(n), leaf)
        final[key(n)] = leaf
        assert incremental.root() == definition(final)
    assert HeadsMap.of(final).root() == incremental.root()
    for k, leaf in final.items():
        assert root_from_proof(k, leaf, incremental.proof(k)) == incremental.root()
        other = bytes(b ^ 1 for b in leaf)  # any other value of the key
        assert root_from_proof(k, other, incremental.proof(k)) != incremental.root()


def test_a_key_it_does_not_hold_has_no_proof() -> None:
    heads = HeadsMap.of({key(1): b"\x01" * 32})
    with pytest.raises(KeyError):
        heads.proof(key(2))
    assert HeadsMap().root() == EMPTY


def _signer() -> InMemorySigner:
    return InMemorySigner(Ed25519PrivateKey.generate(), Role.CHECKPOINT, "log")


def test_a_checkpoint_carries_the_root_in_its_fifth_line() -> None:
    signed = Checkpoint.sign(
        origin="o",
        size=3,
        root=bytes(32),
        signer=_signer(),
        accounts=b"\x07" * 32,
        now=datetime(2026, 12, 5, tzinfo=UTC),
    )
    assert signed.text.splitlines()[4] == "accounts BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="
    assert Checkpoint.from_note(signed.to_note()) == signed
    for bad in ("accounts AAAA", "account BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", "junk"):
        lines = signed.to_note().split("\n")
        lines[4] = bad
        with pytest.raises(VerificationError, match="malformed checkpoint"):
            Checkpoint.from_note("\n".join(lines))
