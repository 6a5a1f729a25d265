"""`ledger serve`'s sealing processes tell its anchor process what they sealed
(`ledger.store.sealed_rows`): the anchor takes a row byte-identical to one
it was told of as checked, and verifies every other row in full, on both
stores."""

from __future__ import annotations

import hashlib
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.crypto.envelope import SignerCheck
from ledger.crypto.keystore import KeyDirectory
from ledger.node import Node, open_node
from ledger.store.sealed_rows import (
    DATAGRAM_BYTES,
    SealedRowsSender,
    pack,
    unpack,
)
from ledger.store.sealing import SealingMapper
from tests.casino_support import casino_on, event_count
from tests.conftest import PASSPHRASE

TOPIC = "ledger.domain.round:Round.BetPlaced"


def test_rows_cross_in_datagrams_of_bounded_size() -> None:
    rows = [(os.urandom(32), os.urandom(32), str(uuid.uuid4()), n, TOPIC) for n in range(1500)]
    datagrams = pack(rows)
    assert len(datagrams) > 1 and all(len(d) <= DATAGRAM_BYTES for d in datagrams)
    assert [row for datagram in datagrams for row in unpack(datagram)] == rows


def test_a_row_is_taken_only_at_the_place_it_was_sealed_for(
    writer_and_anchor: tuple[Node, Node], tmp_path: Path
) -> None:
    _, anchor = writer_and_anchor
    mapper = anchor.app.mapper
    assert isinstance(mapper, SealingMapper)
    state, entry, stream = os.urandom(200), os.urandom(32), str(uuid.uuid4())
    key = hashlib.sha256(state).digest()
    SealedRowsSender(str(tmp_path / "sealed.sock")).send([(key, entry, stream, 3, TOPIC)])
    deadline = time.monotonic() + 5
    while mapper.sealed_entry_hash(state, stream, 3, TOPIC) is None:
        assert time.monotonic() < deadline, "the row never arrived"
        time.sleep(0.01)
    assert mapper.sealed_entry_hash(state, stream, 3, TOPIC) == entry
    assert mapper.sealed_entry_hash(state, stream, 4, TOPIC) is None  # another version
    assert mapper.sealed_entry_hash(state, str(uuid.uuid4()), 3, TOPIC) is None  # another stream
    assert mapper.sealed_entry_hash(state, stream, 3, "Round.Voided") is None  # another type
    assert mapper.sealed_entry_hash(state + b"x", stream, 3, TOPIC) is None  # other bytes


def test_nobody_listening_costs_the_sender_nothing(tmp_path: Path) -> None:
    sender = SealedRowsSender(str(tmp_path / "nobody.sock"))
    sender.send([(os.urandom(32), os.urandom(32), "s", 1, TOPIC)])  # dropped, not raised


@pytest.fixture
def writer_and_anchor(
    store_url: str, keys: KeyDirectory, tmp_path: Path
) -> Iterator[tuple[Node, Node]]:
    """A writing node (anchoring nothing itself) and an anchor's read-only node
    listening for what the writer seals."""
    writer = open_node(
        store_url, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=0
    )
    anchor = open_node(store_url, str(keys.path), passphrase=PASSPHRASE, writable=False)
    listening = anchor.listen_for_sealed_rows(tmp_path / "sealed.sock")
    try:
        yield writer, anchor
    finally:
        listening.close()
        anchor.close()
        writer.close()


def test_the_anchor_verifies_only_what_it_was_not_told_of(
    writer_and_anchor: tuple[Node, Node], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, anchor = writer_and_anchor
    verified: list[int] = []
    check = SignerCheck.check_signature

    def counted(self: SignerCheck, envelope: Any, *, stream: object, version: int) -> None:
        verified.append(version)
        check(self, envelope, stream=stream, version=version)

    monkeypatch.setattr(SignerCheck, "check_signature", counted)
    casino = casino_on(writer)
    casino.open_account(request_id="untold", owner="o", currency="VND")  # sealed before telling
    untold = event_count(writer.app)
    writer.tell_sealed_rows_to(str(tmp_path / "sealed.sock"))
    for n in range(20):
        casino.open_account(request_id=f"told-{n}", owner="o", currency="VND")
    time.sleep(0.2)  # the datagrams cross
    checkpointer = anchor.checkpointer()
    checkpoint = checkpointer.catch_up()
    assert checkpoint is not None and checkpoint.size == event_count(writer.app)
    assert len(verified) == untold, "the anchor verified rows it was told of, or skipped others"
