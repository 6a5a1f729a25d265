"""Game recall: one round replayed from its signed events, step by step.

Found by index, never by scanning the log: the round's stream is read by its
id (its events in version order), its table's seed events by stream and
type, and each event's log position from the Merkle leaf row naming it.
What is shown is re-derived as it is read, and trusts nothing stored:

- every envelope is checked against its row, its node signature verified
  (a ledger-node key of the keyring, valid at its signing time), and the
  stream's hash chain followed from the genesis; an event that fails is
  reported as such and its content never shown;
- the verified events go through verify's own checks, restricted to this
  round (`ledger.audit.games.settlement`): the money (every movement balances,
  payouts post what the results say, operators' signatures), the sources
  (dealer device reports' signatures, RNG draws recomputed from the round's
  committed seed once it is revealed), the round's life and fault policy,
  and every settlement and correction settled again by the round's own game
  through the games contract (`ledger.games.replay`).

What it does not check is listed with the result (`Recall.not_checked`):
above all, inclusion in a checkpoint (use `ledger verify` or `ledger proof
inclusion`); the log positions come from the Merkle leaf rows and are only
checked against each event's entry hash.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.utils import get_topic

from ledger.audit.games.settlement import SettlementAudit
from ledger.audit.log.checkpoints import valid_checkpoints
from ledger.audit.log.key_times import Coverage, SignedWhen, checkpoint_times
from ledger.audit.log.revocations import earliest, log_revocations, merged
from ledger.audit.significant import plain
from ledger.crypto.envelope import GENESIS_HASH, Envelope, SignerCheck, check_row, open_envelope
from ledger.crypto.keys import Keyring, from_micros
from ledger.domain.asked_by import describe_asked, describe_by
from ledger.domain.game_table import GameTable
from ledger.domain.round import Round
from ledger.domain.stored_names import current_names
from ledger.errors import VerificationError
from ledger.plugins.registry import LoadedGame
from ledger.store.application import LedgerApplication
from ledger.store.merkle_log import MerkleLogTables, stream_of
from ledger.store.recorders import Row
from ledger.store.stream_ids import Kind, parse_id, require_stream

OPENED = get_topic(Round.Opened)
_COMMITTED = get_topic(GameTable.SeedCommitted)
_REVEALED = get_topic(GameTable.SeedRevealed)
# The payload fields eventsourcing adds to every event: shown once, as columns.
_BOOKKEEPING = ("originator_id", "originator_version", "timestamp", "originator_topic")

NOT_CHECKED = [
    "inclusion in a checkpoint (use `ledger verify`, or `ledger proof inclusion ROUND VERSION`)",
    "log positions beyond their Merkle leaf row matching each event's entry hash",
    "key revocations recorded only in the log (checked against this keyring's marks)",
    "the rest of the log: other rounds, wallets' balances, the table's other events",
]


@dataclass(frozen=True)
class KeyUse:
    """A key that signed a fact, as the keyring knows it."""

    key_id: str
    name: str | None
    role: str | None
    signed: str  # what it signed: "envelope", "device report", "operator fact"...

    def to_json(self) -> dict[str, Any]:
        return {"key_id": self.key_id, "name": self.name, "role": self.role, "signed": self.signed}


@dataclass
class RecalledEvent:
    version: int
    kind: str  # the event type's short name: "BetPlaced", "ActionRecorded"...
    position: int | None  # log position (Merkle leaf), None when no leaf matches
    signed_at: datetime | None
    keys: list[KeyUse] = field(default_factory=list)
    facts: dict[str, Any] | None = None  # plain JSON; None when the event did not verify
    problem: str | None = None  # why it is not shown (tampered), or the check it fails
    # Who asked for a command-sourced action or a bet: "by token T (role R)" (the
    # node's statement, sealed under its signature) or "node command"; None when
    # not recorded (other events, and bets placed before Round.BetPlaced v3).
    asked: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "kind": self.kind,
            "position": self.position,
            "signed_at": self.signed_at.isoformat() if self.signed_at else None,
            "keys": [k.to_json() for k in self.keys],
            "facts": self.facts,
            "problem": self.problem,
            "asked": self.asked,
        }


@dataclass
class Recall:
    round_id: str
    currency: str | None
    events: list[RecalledEvent]
    checked: list[str]
    not_checked: list[str]
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "replay": True,
            "note": "re-derived from the round's signed events; not a live view",
            "round": self.round_id,
            "currency": self.currency,
            "verified": self.ok,
            "events": [e.to_json() for e in self.events],
            "checked": self.checked,
            "not_checked": self.not_checked,
            "problems": self.problems,
        }


def _key(tables: MerkleLogTables, stream: str) -> object:
    return UUID(stream).hex if tables.recorder.dialect == "sqlite" else UUID(stream)


def _select(tables: MerkleLogTables, template: str, params: tuple[Any, ...]) -> list[Any]:
    with tables.recorder.read() as cursor:
        cursor.execute(tables.recorder.sql(template), params)
        return list(cursor.fetchall())


def stream_rows(tables: MerkleLogTables, stream: str) -> list[Row]:
    """Every stored event of `stream`, in version order (the stream index)."""
    return [
        tuple(r)
        for r in _select(
            tables,
            "SELECT {id}, originator_id, originator_version, topic, state FROM {events} "
            "WHERE originator_id = %s ORDER BY originator_version",
            (_key(tables, stream),),
        )
    ]


def _leaves_of(tables: MerkleLogTables, rows: list[Row]) -> dict[int, tuple[int, bytes]]:
    """Notification id -> (leaf index, leaf hash) for the rows, in one query (one
    round trip on PostgreSQL, not one per event)."""
    if not rows:
        return {}
    marks = ", ".join(["%s"] * len(rows))
    found = _select(
        tables,
        "SELECT notification_id, leaf_index, leaf_hash FROM {leaves} "
        f"WHERE notification_id IN ({marks})",
        tuple(int(r[0]) for r in rows),
    )
    return {int(n): (int(index), bytes(leaf)) for n, index, leaf in found}


def _position(
    leaves: dict[int, tuple[int, bytes]], notification_id: int, envelope: Envelope
) -> int | None:
    """The event's log position, if its leaf row holds this event's entry hash."""
    leaf = leaves.get(notification_id)
    if leaf is None or leaf[1] != envelope.entry_hash:
        return None
    return leaf[0]


class _Reader:
    """Opens rows, checking each against its signed header, signer and chain."""

    def __init__(self, app: LedgerApplication, keyring: Keyring) -> None:
        self.app = app
        self.keyring = keyring
        self.signer_check = SignerCheck(keyring)

    def key(self, key_id: str, signed: str) -> KeyUse:
        record = self.keyring.get(key_id)
        return KeyUse(
            key_id, record.name if record else None, record.role.value if record else None, signed
        )

    def opened(self, row: Row, expected_prev: bytes | None) -> tuple[Envelope, dict[str, Any]]:
        """The row's envelope and payload, or `VerificationError`."""
        _, originator_id, version, topic, state = row
        stream = stream_of(originator_id)
        envelope = open_envelope(bytes(state), stream=stream, version=version)
        check_row(envelope, stream=stream, version=version, topic=topic)
        self.signer_check.check_signature(envelope, stream=stream, version=version)
        self.signer_check.check_validity(envelope, stream=stream, version=version)
        if expected_prev is not None and envelope.prev_hash != expected_prev:
            raise VerificationError(
                "chain broken: this event does not follow the one before it in the round "
                "(an event is missing, reordered or replaced)"
            )
        payload: dict[str, Any] = self.app.mapper.transcoder.decode(envelope.payload)
        return envelope, payload


def _actor_keys(reader: _Reader, payload: dict[str, Any]) -> list[KeyUse]:
    found = []
    source = payload.get("source")
    if isinstance(source, dict) and source.get("key_id"):
        found.append(reader.key(str(source["key_id"]), "dealer device report"))
    operator = payload.get("operator")
    if isinstance(operator, dict) and operator.get("key_id"):
        found.append(reader.key(str(operator["key_id"]), "operator fact"))
    return found


# The seed events' own times are not judged here (no actor signs them).
_UNKNOWN = SignedWhen(-1)


_WINDOW = 128  # table events searched first on each side of the round's opening


def _table_version_at(tables: MerkleLogTables, opened_id: int, table: str) -> int | None:
    """The table's version saved with the round's opening (a search hint only:
    whatever it points at is verified before use)."""
    for notification_id in range(opened_id + 1, opened_id + 4):
        row = tables.row_by_id(notification_id)
        if row is not None and stream_of(row[1]) == table:
            return int(row[2])
    return None


def _seed_rows(
    tables: MerkleLogTables, table: str, topic: str, needle: bytes, around: int, before: bool
) -> list[Row]:
    """Rows of `table` of type `topic` naming the seed, searched in growing
    windows from version `around` backwards (`before`) or forwards."""
    found = _select(
        tables,
        "SELECT MAX(originator_version) FROM {events} WHERE originator_id = %s",
        (_key(tables, table),),
    )
    last = int(found[0][0] or 0)
    size, edge = _WINDOW, around
    while (edge > 0) if before else (edge < last):
        low, high = (max(0, edge - size), edge) if before else (edge, edge + size)
        rows = _select(
            tables,
            "SELECT {id}, originator_id, originator_version, topic, state FROM {events} "
            "WHERE originator_id = %s AND topic = %s AND originator_version > %s "
            "AND originator_version <= %s ORDER BY originator_version",
            (_key(tables, table), topic, low, high),
        )
        named = [tuple(r) for r in rows if needle in bytes(r[4])]
        if named:
            return named
        edge, size = (low if before else high), size * 4
    return []


def _seed_events(
    reader: _Reader, tables: MerkleLogTables, table: str, seed_id: str, opened_id: int
) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
    """The table's commitment and reveal of `seed_id`, each verified (envelope,
    signature, link to its predecessor), found by stream, type and version
    windows around the round's opening; or a problem.

    Only rows whose bytes name the seed are opened: a row edited so as not to
    name it is simply not found, which leaves the round's seed uncommitted
    (a problem) or unrevealed (its draws listed as not checked), never an OK."""
    found: list[tuple[str, dict[str, Any]]] = []
    needle = seed_id.encode()
    around = _table_version_at(tables, opened_id, table)
    for topic, before in ((_COMMITTED, True), (_REVEALED, False)):
        start = around if around is not None else (1 << 62 if before else 0)
        for row in _seed_rows(tables, table, topic, needle, start, before):
            version = int(row[2])
            previous = tables.row_by_stream(table, version - 1) if version > 1 else None
            try:
                prev_hash = (
                    GENESIS_HASH
                    if previous is None
                    else open_envelope(
                        bytes(previous[4]), stream=table, version=version - 1
                    ).entry_hash
                )
                _, payload = reader.opened(row, prev_hash)
            except VerificationError as exc:
                return [], f"table {table} version {version}: {exc}"
            if payload.get("seed_id") == seed_id:
                found.append((topic, payload))
    return found, None


def recall_round(
    app: LedgerApplication,
    keyring: Keyring,
    games: Mapping[str, LoadedGame],
    round_id: str,
    archived: Callable[[str], list[Row]] | None = None,
) -> Recall:
    """Replay round `round_id` from its signed events (`NotFoundError` if it is none,
    or not a round id at all); `archived`: its rows from an archive directory,
    when the store archived it (`ledger.archive.files.archived_rows`)."""
    tables = app.tables
    first = tables.row_by_stream(str(parse_id(round_id, Kind.ROUND)), 1)
    if archived is not None and first is not None and first[3] is None:
        round_id = str(parse_id(round_id, Kind.ROUND))
        rows = archived(round_id)  # each held to the leaf the store keeps at its place
    else:
        # A round by its first event's signed type or stored column: a relabelled
        # round is still recalled, and shown failing.
        round_id = require_stream(tables, round_id, Kind.ROUND)
        rows = stream_rows(tables, round_id)
    # Revocations recorded in the log count as verify counts them; a revoked
    # key's facts are judged by the checkpoints covering them (read only then).
    keyring = merged(keyring, earliest(log_revocations(tables, app.mapper.transcoder, keyring)))
    coverage = (
        Coverage(checkpoint_times(valid_checkpoints(tables, keyring)))
        if any(record.revoked_at is not None for record in keyring)
        else Coverage([])
    )
    replay = _Replay(app, keyring, games, round_id, coverage, _leaves_of(tables, rows))
    for index, row in enumerate(rows):
        replay.event(index, row)
    replay.reveal()
    _conclude(replay.recall, replay.checks, replay.verified, replay.checking)
    return replay.recall


class _Replay:
    """A round's events, one by one: each opened and checked against the one
    before it, shown, and held to the settlement checks until one fails (what
    follows a failed check is shown, no longer checked)."""

    def __init__(
        self,
        app: LedgerApplication,
        keyring: Keyring,
        games: Mapping[str, LoadedGame],
        round_id: str,
        coverage: Coverage,
        leaves: dict[int, tuple[int, bytes]],
    ) -> None:
        self.tables, self.round_id, self.coverage, self.leaves = (
            app.tables,
            round_id,
            coverage,
            leaves,
        )
        self.reader = _Reader(app, keyring)
        self.checks = SettlementAudit(keyring, games, raise_unknown=False)
        self.recall = Recall(round_id, None, [], [], list(NOT_CHECKED), [])
        self.expected: bytes | None = GENESIS_HASH
        self.reveals: list[tuple[str, str, dict[str, Any]]] = []  # fed last: after use
        self.verified = 0
        self.checking = True

    def event(self, index: int, row: Row) -> None:
        recall = self.recall
        notification_id, _, version, topic, _ = row
        event = RecalledEvent(version, topic.rsplit(".", 1)[-1], None, None)
        recall.events.append(event)
        if version != index + 1:
            event.problem = f"version {index + 1} is missing from the round's stream"
            recall.problems.append(f"version {index + 1}: missing")
            self.expected, self.checking = None, False
        try:
            envelope, payload = self.reader.opened(row, self.expected)
        except VerificationError as exc:
            event.problem = f"NOT SHOWN: {exc}"
            recall.problems.append(f"version {version}: {exc}")
            self.expected, self.checking = _claimed_hash(row), False
            return
        self.verified += 1
        self.expected = envelope.entry_hash
        self._shown(event, notification_id, envelope, payload)
        if topic == OPENED:
            opened = current_names(OPENED, payload)  # its names now, whatever it stored
            recall.currency = str(opened.get("currency"))
            if self.checking and opened.get("seed_id"):
                self._seed(opened, notification_id)
        if self.checking:
            self._check(event, envelope, topic, payload)

    def reveal(self) -> None:
        """The seed's reveal, fed last: a seed is revealed after every draw from it."""
        for table, seed_topic, seed_state in self.reveals if self.checking else []:
            try:
                self.checks.check(table, seed_topic, seed_state, f"table {table}", _UNKNOWN)
            except VerificationError as exc:
                self.recall.problems.append(str(exc))
                self.checking = False

    def _shown(
        self, event: RecalledEvent, notification_id: int, envelope: Envelope, payload: Any
    ) -> None:
        reader, recall = self.reader, self.recall
        event.position = _position(self.leaves, notification_id, envelope)
        event.signed_at = from_micros(envelope.signed_at) if envelope.signed_at else None
        event.keys = [reader.key(envelope.key_id, "envelope"), *_actor_keys(reader, payload)]
        event.facts = {
            k: plain(v) for k, v in payload.items() if k not in _BOOKKEEPING or k == "timestamp"
        }
        source = payload.get("source")
        event.asked = describe_by(source) if isinstance(source, dict) else None
        if "asked_by" in payload:  # a bet recording its request (Round.BetPlaced v3)
            event.asked = describe_asked(payload["asked_by"])
        if recall.currency is None and payload.get("postings"):
            recall.currency = str(payload["postings"][0].get("currency"))

    def _seed(self, opened: dict[str, Any], notification_id: int) -> None:
        """The round's committed seed, from its table's events: committed now, revealed last."""
        table = stream_of(opened["table_id"])
        seed_events, problem = _seed_events(
            self.reader, self.tables, table, str(opened["seed_id"]), notification_id
        )
        if problem:
            self.recall.problems.append(problem)
            self.checking = False
        for seed_topic, seed_state in seed_events:
            if seed_topic == _COMMITTED:
                self.checks.check(table, seed_topic, seed_state, f"table {table}", _UNKNOWN)
            else:
                self.reveals.append((table, seed_topic, seed_state))

    def _check(self, event: RecalledEvent, envelope: Envelope, topic: str, payload: Any) -> None:
        try:
            when = (
                self.coverage.when(event.position, envelope.signed_at)
                if event.position is not None
                else SignedWhen(-1 if envelope.signed_at is None else envelope.signed_at)
            )
            self.checks.check(
                self.round_id,
                topic,
                payload,
                f"version {event.version}",
                when,
                v1=envelope.signed_at is None,
            )
        except VerificationError as exc:
            event.problem = f"CHECK FAILED: {exc}"
            self.recall.problems.append(str(exc))
            self.checking = False


def _claimed_hash(row: Row) -> bytes | None:
    """A failed event's header hash, so the next link can still be judged."""
    try:
        return open_envelope(bytes(row[4]), stream=stream_of(row[1]), version=row[2]).entry_hash
    except VerificationError:
        return None


def _conclude(recall: Recall, checks: SettlementAudit, verified: int, checking: bool) -> None:
    total = len(recall.events)
    recall.checked.append(
        f"{verified} of {total} envelopes: row against signed header, ledger-node signature "
        "and signing time, chain from the round's first event"
    )
    if not checking:
        recall.not_checked.insert(
            0, "the round's money, sources and rules (stopped at the first failure above)"
        )
        return
    sources = checks.sources
    rng, (pending, cards_pending) = sources.rng_dice, sources.pending()
    recall.checked.append(
        f"money: {checks.money.movements} movements balanced; payouts and voids post what their "
        "results say; operator signatures verified"
    )
    recall.checked.append(
        f"sources: {sources.device_reports} dealer device reports verified; {rng} RNG dice draws "
        f"and {sources.cards_checked} RNG card draws recomputed from the round's committed seed"
    )
    if pending or cards_pending:
        recall.not_checked.insert(
            0,
            f"{pending} RNG dice draws and {cards_pending} RNG card draws: the seed is not "
            "revealed yet",
        )
    if checks.cannot is not None:
        recall.not_checked.insert(0, f"the game's rules and payouts: {checks.cannot}")
    else:
        recall.checked.append(
            f"game: the round's steps and fault policy re-derived; {checks.payouts.resettled} "
            f"settlements and corrections settled again ({checks.payouts.bets} bets) by its own "
            "game and rules"
        )
