"""A history finds each stake's request record (its bet's `Round.BetPlaced`)
by asking the store for the round's rows that name the account, not by
opening every bet of the round (`ledger.history.bet_records`), on both
stores: it finds what the full read finds, reads only the account's rows,
and falls back to the full read when the narrow one finds nothing."""

from __future__ import annotations

import pytest

from ledger.audit.recall import stream_rows
from ledger.crypto.envelope import open_envelope
from ledger.errors import VerificationError
from ledger.export.records import decode_payload
from ledger.history import bet_records, proof
from ledger.history.bet_records import BetRecords
from ledger.history.check import check_history
from ledger.history.span import Span
from ledger.node import Node
from tests.attacker import Attacker
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
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = Tables(node)
    tables.play(3)
    queries: list[list[str]] = []
    read_naming = BetRecords._read_naming

    def counted(self: BetRecords, rounds: list[str]) -> None:
        queries.append(rounds)
        read_naming(self, rounds)

    monkeypatch.setattr(BetRecords, "_read_naming", counted)
    records = BetRecords(node.app.tables, tables.player, tables.rounds)
    for round_id in tables.rounds:
        every = _bets_by_account(node, round_id)
        mine, theirs = every[tables.player], every[tables.other]
        assert mine and theirs and not set(mine) & set(theirs)
        for bet_id, state in mine.items():
            assert records.find(round_id, bet_id) == state
        # What the narrow read took of the round: this account's bets, no other's.
        assert records._naming_account[round_id] == mine
        # Another account's bet is not among this account's rows: the full read finds it.
        for bet_id, state in theirs.items():
            assert records.find(round_id, bet_id) == state
        assert records.find(round_id, "no such bet") is None
    assert queries == [sorted(tables.rounds)]  # one query for the rounds given
    other = BetRecords(node.app.tables, tables.player)  # none given: a query a round
    first = tables.rounds[0]
    assert other.find(first, next(iter(_bets_by_account(node, first)[tables.player])))
    assert queries[1:] == [[first]]


def test_the_full_read_is_made_when_the_narrow_one_finds_nothing(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables = Tables(node)
    tables.play(1)
    (round_id,) = tables.rounds
    mine = _bets_by_account(node, round_id)[tables.player]

    def nothing(self: BetRecords, rounds: list[str]) -> None:
        self._naming_account.update({r: {} for r in rounds})

    monkeypatch.setattr(BetRecords, "_read_naming", nothing)
    records = BetRecords(node.app.tables, tables.player, [round_id])
    for bet_id, state in mine.items():
        assert records.find(round_id, bet_id) == state


def test_an_account_s_events_are_read_back_a_batch_at_a_time_and_all_checked(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More events than a batch: every version read, in order, each linked."""
    monkeypatch.setattr(proof, "BACK_BATCH", 3)
    tables = Tables(node)
    tables.play(4)
    checked = check_history(tables.proof(Span(last=10)), node.keyring)
    versions = [m.version for m in checked.movements]
    assert versions == list(range(versions[0], 0, -1)) and versions[0] > 3 * 2


@pytest.mark.parametrize("attack", ["edited", "deleted"])
def test_an_account_event_edited_or_deleted_in_the_store_refuses_the_history(
    node: Node, store_url: str, monkeypatch: pytest.MonkeyPatch, attack: str
) -> None:
    """Read back a batch at a time, every event is still checked: an edit (a
    payload byte) or a deletion older than the newest batch is refused,
    naming the version."""
    monkeypatch.setattr(proof, "BACK_BATCH", 3)
    tables = Tables(node)
    tables.play(3)
    attacker = Attacker(store_url)
    try:
        version = 4  # older than the newest batch of three
        if attack == "edited":
            state = bytearray(attacker.row(tables.player, version)[4])
            at = state.rfind(b'"amount":') + len(b'"amount":')
            state[at] = ord("9") if state[at] != ord("9") else ord("8")
            attacker.set_state(tables.player, version, bytes(state))
        else:
            attacker.delete(tables.player, version)
    finally:
        attacker.close()
    said = "payload is not the one its header signs" if attack == "edited" else "is missing"
    with pytest.raises(VerificationError, match=f"version {version}.*{said}"):
        tables.proof(Span(last=10))
