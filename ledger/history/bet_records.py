"""Finding a stake's request record, its bet's `Round.BetPlaced`, in the round's
stream: a lookup only (`requests.asked_by_of` checks whatever it finds: the
signature, the stream, the type, the bet id and the account).

A studio's round holds hundreds of bets. Reading and opening every one of
them to find one player's (what the lookup did first) cost a history of ten
such rounds about 150 ms, most of it decoding other players' bets. So the
database is asked, in one query for the span's rounds, for their rows whose
bytes hold the account's id as a payload names it; only those are opened. Where none of
them is the bet (an id written some other way), every bet of the round is
read, as before: the narrow query can only make the lookup faster, never
find less.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ledger.audit.recall import stream_rows
from ledger.crypto.envelope import open_envelope
from ledger.export.records import decode_payload, type_name
from ledger.history.requests import BET
from ledger.store.merkle_log import MerkleLogTables
from ledger.store.recorders import Row

_NAMING = {
    "sqlite": "instr(state, %s) > 0",
    "postgresql": "position(%s::bytea in state) > 0",
}


class BetRecords:
    """The bet records of one account, read from a store: the rows naming the
    account read once for all the `rounds` given (one query), once a round for
    any other, a round's full read made once at most."""

    def __init__(self, tables: MerkleLogTables, account: str, rounds: Iterable[str] = ()) -> None:
        self.tables = tables
        self._needle = b'"account_id":' + json.dumps(account, ensure_ascii=False).encode()
        self._rounds = sorted(set(rounds))
        self._naming_account: dict[str, dict[str, bytes]] = {}
        self._every: dict[str, dict[str, bytes]] = {}

    def find(self, round_id: str, bet_id: str) -> bytes | None:
        """The stored envelope of `round_id`'s bet `bet_id`, if the store holds it."""
        if self._rounds:
            self._read_naming(self._rounds)
            self._rounds = []
        if round_id not in self._naming_account:
            self._read_naming([round_id])
        found = self._naming_account[round_id].get(bet_id)
        if found is not None:
            return found
        if round_id not in self._every:
            self._every[round_id] = _bets(stream_rows(self.tables, round_id), round_id)
        return self._every[round_id].get(bet_id)

    def _read_naming(self, rounds: list[str]) -> None:
        """Each round's bets among its rows whose bytes hold `"account_id":"<account>"`."""
        recorder = self.tables.recorder
        keys = {self.tables.stream_key(round_id): round_id for round_id in rounds}
        marks = ", ".join(["%s"] * len(keys))
        statement = recorder.sql(
            "SELECT {id}, originator_id, originator_version, topic, state FROM {events} "
            f"WHERE originator_id IN ({marks}) AND {_NAMING[recorder.dialect]} "
            "ORDER BY originator_id, originator_version"
        )
        with recorder.read() as cursor:
            cursor.execute(statement, (*keys, self._needle))
            rows = [tuple(row) for row in cursor.fetchall()]
        by_round: dict[str, list[Row]] = {round_id: [] for round_id in rounds}
        for row in rows:
            by_round[keys[row[1]]].append(row)
        for round_id, found in by_round.items():
            self._naming_account[round_id] = _bets(found, round_id)


def _bets(rows: Iterable[Row], round_id: str) -> dict[str, bytes]:
    """Bet id -> its Round.BetPlaced envelope, of these stored events of the round."""
    found: dict[str, bytes] = {}
    for row in rows:
        if row[4] is None or type_name(str(row[3])) != BET:
            continue
        state = bytes(row[4])
        envelope = open_envelope(state, stream=round_id, version=row[2])
        try:
            found[str(decode_payload(envelope.payload)["bet_id"])] = state
        except (ValueError, KeyError):
            continue  # not one the round's bets are read from: no record
    return found
