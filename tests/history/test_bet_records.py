"""A history finds each stake's request record (its bet's `Round.BetPlaced`)
by asking the store for the round's rows that name the account, not by
opening every bet of the round (`ledger.history.bet_records`), on both
stores: it finds what the full read finds, reads only the account's rows,
and falls back to the full read when the narrow one finds nothing."""

from __future__ import annotations

import pytest

from ledger.audit.recall import stream_rows
from ledger.crypto.envelope import open_envelope
from ledger.export.records import decode_payload
from ledger.history import bet_records
from ledger.history.bet_records import BetRecords
from ledger.node import Node
from tests.history.test_history import Tables


def _bets_by_account(node: Node, round_id: str) -> dict[str, dict[str, bytes]]:
    """Account -> bet id -> envelope, from every bet of the round (the full read)."""
    found: dict[str, dict[str, bytes]] = {}
    rows = stream_rows(node.app.tables, round_id)
    for bet_id, state in bet_records._bets(rows, round_id).items():
        payload = decode_payload(open_envelope(state, stream=round_id, version="?").payload)
        found.setdefault(str(payload["account_id"]), {})[bet_id] = state
    return found


def test_the_records_found_are_the_full_reads_and_only_the_account_s_rows_are_read(
    node: Node,
) -> None:
    tables = Tables(node)
    tables.play(3)
    for round_id in tables.rounds:
        every = _bets_by_account(node, round_id)
        mine, theirs = every[tables.player], every[tables.other]
        assert mine and theirs and not set(mine) & set(theirs)
        records = BetRecords(node.app.tables, tables.player)
        narrow = records._naming(round_id)
        assert {bytes(row[4]) for row in narrow} >= set(mine.values())
        assert not {bytes(row[4]) for row in narrow} & set(theirs.values())
        assert len(narrow) < len(stream_rows(node.app.tables, round_id))
        for bet_id, state in mine.items():
            assert records.find(round_id, bet_id) == state
        # Another account's bet is not among this account's rows: the full read finds it.
        for bet_id, state in theirs.items():
            assert records.find(round_id, bet_id) == state
        assert records.find(round_id, "no such bet") is None


def test_the_full_read_is_made_when_the_narrow_one_finds_nothing(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = Tables(node)
    tables.play(1)
    (round_id,) = tables.rounds
    mine = _bets_by_account(node, round_id)[tables.player]
    monkeypatch.setattr(BetRecords, "_naming", lambda self, round_id: [])
    records = BetRecords(node.app.tables, tables.player)
    for bet_id, state in mine.items():
        assert records.find(round_id, bet_id) == state
