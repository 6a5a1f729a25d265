"""Significant events (GLI-19's term): what an auditor reviews first.

One streaming pass over the log, in log order, memory flat in its size
(only the keys seen and each game's last rules are kept):

- ``fault``: a faulty draw (dice that did not land fair, a misdeal), as a
  physical table's dealer device reported it (signed);
- ``void``: a round voided by its game's rules (its fault policy, a misdeal);
- ``interrupted-round-voided`` / ``round-resumed``: an operator ended or
  resumed an interrupted round (operator-signed);
- ``correction``: a settled result corrected by an operator;
- ``key-created``: a key signs for the first time in the log (the node's
  envelope, or an actor's own signature); its keyring entry's creation
  (``not_before``) is in the details. A key never used is not in the log;
- ``key-rotated``: the node's envelopes are signed by a new ledger-node key;
- ``key-revoked``: a revocation recorded in the key registry;
- ``rules-changed`` / ``plugin-changed``: a round opened with a rules hash
  (or only a game version / code hash) different from the previous round
  of the same game;
- ``verification``: a recorded `ledger verify --record` run and its result;
- ``self-verification``: a node's own scheduled verification run and its
  result (`ledger.audit.self_verification`), signed by the node's key;
- ``erasure``: a data subject's personal data erased (operator-signed; the
  subject's id and the reason, no personal value; docs/privacy.md);
- ``archive``: finished rounds moved into a verified archive (node-signed;
  the archive, its directory, the count and digest of what left: docs/archive.md);
- ``split-view``: a witness refused a checkpoint of this log because it had
  seen another log (ledger.domain.witness_reports; docs/witnesses.md).

What is checked here: every row against its signed envelope header (type,
stream, version, payload hash: a relabelled or edited row stops the query
with `VerificationError`), and the envelope signature of every event
reported. Not checked: chains, the Merkle tree, checkpoints, actor
signatures (`ledger verify` checks all of them, recorded runs included).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from ledger.crypto.envelope import Envelope, SignerCheck, check_row, open_envelope
from ledger.crypto.keys import Keyring, PublicKeyRecord, Role, from_micros
from ledger.domain.stored_names import current_names, is_fault
from ledger.store.application import LedgerApplication
from ledger.store.merkle_log import stream_of

READ_BATCH = 2000
# An actor's key id inside a payload: decoding every payload to look for one
# would dominate the pass; a payload naming no unseen key id is skipped.
_KEY_ID = re.compile(rb'"key_id": ?"([0-9a-f]{64})"')

_ROUND = "ledger.domain.round:Round."
OPENED = _ROUND + "Opened"
VOIDED = _ROUND + "Voided"
RESUMED = _ROUND + "Resumed"
CORRECTED = _ROUND + "Corrected"
FAULT = _ROUND + "FaultRecorded"
ACTION = _ROUND + "ActionRecorded"
# A settlement-API-2 fault is an action like any other: its payload is decoded
# only when it says so, by its stored name or its source's mark (`is_fault`;
# inside a JSON string a quote is escaped, so text cannot fake it).
_FAULT_ACTION = re.compile(rb'"action": ?"fault"|"fault": ?true')
REVOKED = "ledger.domain.key_registry:KeyRegistry.KeyRevoked"
VERIFIED = "ledger.domain.audit_trail:AuditTrail.VerificationRecorded"
SELF_VERIFIED = "ledger.domain.audit_trail:AuditTrail.SelfVerificationRecorded"
SPLIT_VIEW = "ledger.domain.witness_reports:WitnessReports.SplitViewReported"
ERASED = "ledger.domain.erasures:Erasures.SubjectErased"
ARCHIVED = "ledger.domain.archives:Archives.Sealed"
_SIGNED_AS = {
    "operator": "operator signature",
    "auditor": "auditor signature",
    "source": "dealer device report",
}
_INTERESTING = {
    OPENED,
    VOIDED,
    RESUMED,
    CORRECTED,
    REVOKED,
    VERIFIED,
    SELF_VERIFIED,
    FAULT,
    SPLIT_VIEW,
    ERASED,
    ARCHIVED,
}

KINDS = (
    "fault",
    "void",
    "interrupted-round-voided",
    "round-resumed",
    "correction",
    "key-created",
    "key-rotated",
    "key-revoked",
    "rules-changed",
    "plugin-changed",
    "verification",
    "self-verification",
    "erasure",
    "archive",
    "split-view",
)


@dataclass(frozen=True)
class SignificantEvent:
    position: int  # log position of the event that shows it
    at: datetime  # when it was signed (UTC)
    kind: str  # one of KINDS
    stream: str
    summary: str  # one line for a person
    details: dict[str, Any] = field(default_factory=dict)  # plain JSON

    def to_json(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "at": self.at.isoformat(),
            "kind": self.kind,
            "stream": self.stream,
            "summary": self.summary,
            "details": self.details,
        }


def plain(value: Any) -> Any:
    """A decoded payload value as plain JSON (UUIDs and times as text)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def signed_time(envelope: Envelope, payload: dict[str, Any] | None) -> datetime:
    """When the event was signed (a v1 envelope: its payload's own signed time)."""
    if envelope.signed_at is not None:
        return from_micros(envelope.signed_at)
    stamp = (payload or {}).get("timestamp")  # a v1 envelope: the event's own (signed) time
    return stamp if isinstance(stamp, datetime) else from_micros(0)


def _key_label(record: PublicKeyRecord | None, key_id: str) -> str:
    return f"{record.name} ({record.role.value}, {key_id[:16]})" if record else key_id[:16]


class _Scanner:
    """The state one pass keeps: keys seen, the node key in use, each game's rules."""

    def __init__(self, keyring: Keyring) -> None:
        self.keyring = keyring
        self.signer_check = SignerCheck(keyring)
        self.seen_keys: set[str] = set()
        self.node_key: str | None = None
        self.games: dict[str, tuple[str, str, str]] = {}  # game -> (version, code, rules)

    def keys_of(self, envelope: Envelope, payload: dict[str, Any] | None) -> list[tuple[str, str]]:
        """(key id, how it signed) for the envelope and any actor signature it carries."""
        found = [(envelope.key_id, "envelope")]
        if payload is not None:
            for name in ("operator", "auditor", "source"):
                signed = payload.get(name)
                if (
                    isinstance(signed, dict)
                    and isinstance(signed.get("key_id"), str)
                    and "signature" in signed
                ):
                    found.append((signed["key_id"], _SIGNED_AS[name]))
        return found

    def key_events(
        self,
        position: int,
        at: datetime,
        stream: str,
        envelope: Envelope,
        payload: dict[str, Any] | None,
    ) -> Iterator[SignificantEvent]:
        for key_id, how in self.keys_of(envelope, payload):
            if key_id in self.seen_keys:
                continue
            self.seen_keys.add(key_id)
            record = self.keyring.get(key_id)
            details: dict[str, Any] = {
                "key_id": key_id,
                "signed_as": how,
                "name": record.name if record else None,
                "role": record.role.value if record else None,
                "not_before": record.not_before.isoformat() if record else None,
            }
            yield SignificantEvent(
                position,
                at,
                "key-created",
                stream,
                f"key {_key_label(record, key_id)} signs for the first time ({how})"
                + (f"; created {record.not_before.isoformat()}" if record else "; not in keyring"),
                details,
            )
        if self.node_key is not None and envelope.key_id != self.node_key:
            old, new = self.keyring.get(self.node_key), self.keyring.get(envelope.key_id)
            is_new_node_key = new is None or new.role is Role.LEDGER_NODE
            if is_new_node_key:
                yield SignificantEvent(
                    position,
                    at,
                    "key-rotated",
                    stream,
                    f"ledger-node key {_key_label(old, self.node_key)} -> "
                    f"{_key_label(new, envelope.key_id)}",
                    {"from_key_id": self.node_key, "to_key_id": envelope.key_id},
                )
        self.node_key = envelope.key_id

    def round_events(
        self, position: int, at: datetime, stream: str, topic: str, state: dict[str, Any]
    ) -> Iterator[SignificantEvent]:
        if topic == OPENED:
            yield from self._opened(position, at, stream, state)
        elif topic == FAULT or (topic == ACTION and _action_is_fault(state)):
            reason = (
                state.get("reason") if topic == FAULT else (state.get("args") or {}).get("reason")
            )
            source = state.get("source") or {}
            yield SignificantEvent(
                position,
                at,
                "fault",
                stream,
                f"round {stream}: fault reported by its dealer device: {reason!r}",
                {
                    "round": stream,
                    "reason": reason,
                    "step": state.get("step"),
                    "device_key_id": source.get("key_id"),
                },
            )
        elif topic == VOIDED:
            operator = state.get("operator")
            kind = "interrupted-round-voided" if operator else "void"
            returned = sum(int(r.get("returned", 0)) for r in state.get("returns", []))
            who = "an operator" if operator else "its game's rules"
            yield SignificantEvent(
                position,
                at,
                kind,
                stream,
                f"round {stream} voided by {who}: {state.get('reason')!r}; "
                f"{len(state.get('returns', []))} stakes returned ({returned} minor units)",
                {
                    "round": stream,
                    "reason": state.get("reason"),
                    "operator_key_id": operator.get("key_id") if operator else None,
                    "returns": plain(state.get("returns", [])),
                },
            )
        elif topic == RESUMED:
            operator = state.get("operator") or {}
            yield SignificantEvent(
                position,
                at,
                "round-resumed",
                stream,
                f"round {stream} resumed by an operator: {state.get('reason')!r}",
                {
                    "round": stream,
                    "reason": state.get("reason"),
                    "operator_key_id": operator.get("key_id"),
                },
            )
        elif topic == CORRECTED:
            operator = state.get("operator") or {}
            step = state.get("step")
            yield SignificantEvent(
                position,
                at,
                "correction",
                stream,
                f"round {stream} corrected"
                + (f" at action {step}" if step is not None else "")
                + f": {plain(state.get('wrong_outcome'))} -> {plain(state.get('right_outcome'))}"
                f" ({state.get('reason')!r})",
                {
                    "round": stream,
                    "step": step,
                    "reason": state.get("reason"),
                    "wrong": plain(state.get("wrong_outcome")),
                    "right": plain(state.get("right_outcome")),
                    "operator_key_id": operator.get("key_id"),
                    "reversed": plain(state.get("reversed_results", [])),
                    "results": plain(state.get("results", [])),
                },
            )

    def _opened(
        self, position: int, at: datetime, stream: str, state: dict[str, Any]
    ) -> Iterator[SignificantEvent]:
        state = current_names(OPENED, state)  # stored under older names before v3
        game = str(state.get("game"))
        now = (
            str(state.get("game_version")),
            str(state.get("code_hash") or ""),
            str(state.get("rules_hash")),
        )
        before = self.games.get(game)
        self.games[game] = now
        if before is None or before == now:
            return
        kind = "rules-changed" if before[2] != now[2] else "plugin-changed"
        what = "rules hash" if kind == "rules-changed" else "game version / code"
        yield SignificantEvent(
            position,
            at,
            kind,
            stream,
            f"game {game}: round {stream} opened with a different {what} than the "
            f"previous round ({before[0]} rules {before[2][:12]} -> {now[0]} rules {now[2][:12]})",
            {
                "game": game,
                "round": stream,
                "from": {"version": before[0], "code_hash": before[1], "rules_hash": before[2]},
                "to": {"version": now[0], "code_hash": now[1], "rules_hash": now[2]},
            },
        )

    def other_events(
        self, position: int, at: datetime, stream: str, topic: str, state: dict[str, Any]
    ) -> Iterator[SignificantEvent]:
        if topic == REVOKED:
            key_id = str(state.get("key_id"))
            record = self.keyring.get(key_id)
            revoked_at = state.get("revoked_at")
            when = from_micros(revoked_at).isoformat() if type(revoked_at) is int else None
            yield SignificantEvent(
                position,
                at,
                "key-revoked",
                stream,
                f"key {_key_label(record, key_id)} revoked from {when}: {state.get('reason')!r}",
                {
                    "key_id": key_id,
                    "revoked_at": when,
                    "reason": state.get("reason"),
                    "operator_key_id": (state.get("operator") or {}).get("key_id"),
                },
            )
        elif topic in (VERIFIED, SELF_VERIFIED):
            yield _run_event(position, at, stream, topic, state)
        elif topic == ERASED:
            yield SignificantEvent(
                position,
                at,
                "erasure",
                stream,
                f"data subject {state.get('subject')} erased: {state.get('reason')!r}",
                {
                    "subject": state.get("subject"),
                    "reason": state.get("reason"),
                    "operator_key_id": (state.get("operator") or {}).get("key_id"),
                },
            )
        elif topic == ARCHIVED:
            yield SignificantEvent(
                position,
                at,
                "archive",
                stream,
                f"{state.get('events')} events of {state.get('rounds')} finished rounds older "
                f"than {state.get('horizon')} archived in {state.get('directory')}",
                {k: state.get(k) for k in ("archive", "directory", "horizon", "events", "digest")},
            )
        elif topic == SPLIT_VIEW:
            note = str(state.get("checkpoint", ""))
            size = note.split("\n")[1] if note.count("\n") > 1 else "?"
            yield SignificantEvent(
                position,
                at,
                "split-view",
                stream,
                f"witness {state.get('witness')} refused the checkpoint of size {size} "
                f"({state.get('status')}): {state.get('reason')!r}; it had cosigned size "
                f"{state.get('witness_size')}",
                plain(
                    {
                        name: state.get(name)
                        for name in ("witness", "url", "status", "reason", "checkpoint")
                    }
                    | {"witness_size": state.get("witness_size")}
                ),
            )


def _run_event(
    position: int, at: datetime, stream: str, topic: str, state: dict[str, Any]
) -> SignificantEvent:
    """A recorded verification run: an auditor's, or the node's own scheduled one."""
    run = plain(state.get("run") or {})
    if topic == SELF_VERIFIED:
        kind, what, who = "self-verification", "self-verification by the node", {}
    else:
        auditor = state.get("auditor") or {}
        kind, what, who = "verification", "verification", {"auditor_key_id": auditor.get("key_id")}
    return SignificantEvent(
        position,
        at,
        kind,
        stream,
        f"{what} at level {run.get('level')}: {run.get('result')} over "
        f"{run.get('tree_size')} events (root {str(run.get('root'))[:16]})"
        + (f": {run.get('message')}" if run.get("message") else ""),
        {**run, **who},
    )


def iter_significant(
    app: LedgerApplication, *, since: datetime | None = None
) -> Iterator[SignificantEvent]:
    """Every significant event in log order (those signed at or after `since`).

    Raises `VerificationError` at the first row that does not match its signed
    header, or a reported event whose envelope signature does not verify."""
    return scan_significant(app, since=since)


def log_envelopes(
    app: LedgerApplication, progress: Callable[[int], None] | None = None
) -> Iterator[tuple[int, str, int, str, Envelope]]:
    """(log position, stream, version, type, envelope) of every event in log
    order, each row checked against its envelope's header; `progress(n)` after
    each batch of n rows read."""
    position, after = 0, 0
    while rows := app.tables.rows_after(after, READ_BATCH):
        for _, originator_id, version, topic, state in rows:
            if topic is None:  # an archived event's place (ledger.store.archived): not here
                position += 1
                continue
            stream = stream_of(originator_id)
            envelope = open_envelope(bytes(state), stream=stream, version=version)
            check_row(envelope, stream=stream, version=version, topic=topic)
            yield position, stream, version, topic, envelope
            position += 1
        after = rows[-1][0]
        if progress:
            progress(len(rows))


def _action_is_fault(state: dict[str, Any]) -> bool:
    return is_fault(str(state.get("action")), state.get("source") or {})


def scan_significant(
    app: LedgerApplication,
    *,
    since: datetime | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[SignificantEvent]:
    """`iter_significant`, calling `progress(n)` after each batch of n events read."""
    scanner = _Scanner(app.current_keyring())
    transcoder = app.mapper.transcoder
    for position, stream, version, topic, envelope in log_envelopes(app, progress):
        interesting = topic in _INTERESTING or (
            topic == ACTION and _FAULT_ACTION.search(envelope.payload) is not None
        )
        new_key = envelope.key_id != scanner.node_key or any(
            k.decode() not in scanner.seen_keys for k in _KEY_ID.findall(envelope.payload)
        )
        if interesting or new_key:
            payload: dict[str, Any] = transcoder.decode(envelope.payload)
            at = signed_time(envelope, payload)
            found = [*scanner.key_events(position, at, stream, envelope, payload)]
            found += scanner.round_events(position, at, stream, topic, payload)
            found += scanner.other_events(position, at, stream, topic, payload)
            if found:
                scanner.signer_check.check_signature(envelope, stream=stream, version=version)
            yield from (e for e in found if since is None or e.at >= since)
