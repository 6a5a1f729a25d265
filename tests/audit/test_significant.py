"""Significant events (`ledger.audit.significant`) and recorded verification
runs (`verify --record`): each kind found where it happened, in log order,
on both stores; tampered rows stop the query; a forged or lying recorded run
fails `verify`."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from datetime import timedelta
from pathlib import Path
from uuid import UUID

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.audit.record import failed_run, passed_run, record_run
from ledger.audit.significant import SignificantEvent, iter_significant
from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino
from ledger.cli.main import main
from ledger.crypto.envelope import now_micros, open_envelope
from ledger.crypto.keys import Role, read_private_key
from ledger.crypto.signing import InMemorySigner, Signer
from ledger.domain.audit_trail import AUDIT_TRAIL_ID, RECORDED_TOPIC, AuditTrail
from ledger.errors import VerificationError
from ledger.node import Node, open_node
from ledger.revocation import revoke_key
from tests.attacker import Attacker
from tests.casino.test_casino import NewRulesPlugin
from tests.casino_support import HEADS, LIMITS, dealer_device, operator_signer, seen, table_of
from tests.cli.test_cli_bad_input import RIGHT, assert_one_error_line
from tests.coin_game import coin_games
from tests.conftest import PASSPHRASE
from tests.games.test_step_corrections import GAMES as HIGH_CARD
from tests.games.test_step_corrections import played
from tests.installed import installed_games
from tests.reproducible import reproducible_session

OPERATOR = "operator-1"


def auditor_signer(node: Node, name: str = "auditor-1") -> Signer:
    if not any(record.name == name for record in node.keys.keyring()):
        node.keys.create(name, Role.AUDITOR, PASSPHRASE)
    return node.keys.signer(Role.AUDITOR, PASSPHRASE, name)


def coin_round(casino: Casino, n: int, table: str, player: str, *, close: bool = True) -> str:
    round_id = casino.open_round(request_id=f"round-{n}", table_id=table, dealer="D1")
    casino.place_bet(
        request_id=f"bet-{n}", round_id=round_id, account_id=player, bet=HEADS, stake=100
    )
    if close:
        casino.close_betting(request_id=f"close-{n}", round_id=round_id)
    return round_id


def history(node: Node) -> dict[str, str]:
    """A store with one of each significant event; returns the ids involved."""
    casino = Casino(node.app, coin_games("1.0"))
    table = table_of(casino, "coin", LIMITS)
    player = casino.open_account(request_id="alice", owner="alice", currency="EUR")
    casino.deposit(request_id="dep", account_id=player, amount=10_000)
    operator = operator_signer(node, OPERATOR)
    voided = coin_round(casino, 1, table, player)
    casino.void_round(request_id="void", round_id=voided, reason="shoe dropped", operator=operator)
    resumed = coin_round(casino, 2, table, player)
    casino.resume_round(
        request_id="resume", round_id=resumed, reason="power back", operator=operator
    )
    casino.record_outcome(
        request_id="toss",
        round_id=resumed,
        outcome={"face": "heads"},
        source=seen(node, casino, resumed, {"face": "heads"}),
    )
    upgraded = Casino(node.app, coin_games("1.1"))  # same rules, another release
    coin_round(upgraded, 3, table, player, close=False)
    new_rules = Casino(node.app, coin_games("1.0", NewRulesPlugin()))
    coin_round(new_rules, 4, table, player, close=False)
    corrected = played(node, Casino(node.app, HIGH_CARD))[3]
    Casino(node.app, HIGH_CARD).correct_step(
        request_id="fix",
        round_id=corrected,
        step=1,
        drawn=[48],
        reason="the camera shows the king of clubs",
        operator=operator,
    )
    device = node.keys.keyring().with_role(Role.DEALER_DEVICE)[0]
    revoke_key(node.app, node.keys, device.key_id, "device stolen", operator, 2_000_000_000_000_000)
    return {"voided": voided, "resumed": resumed, "corrected": corrected, "device": device.key_id}


def kinds(found: list[SignificantEvent]) -> list[str]:
    return [f.kind for f in found]


def test_each_significant_event_is_found_in_log_order(node: Node) -> None:
    ids = history(node)
    report = verify_store(node.app, node.keys.keyring(), VerifyOptions(level=Level.SIGNATURES))
    auditor = auditor_signer(node)
    record_run(node.app, passed_run(report, "fp", now_micros()), auditor)

    found = list(iter_significant(node.app))
    assert kinds(found) == [
        "key-created",  # the node's key, first event
        "key-created",  # the operator, voiding
        "interrupted-round-voided",
        "round-resumed",
        "key-created",  # the dealer device, reporting the toss
        "plugin-changed",  # coin 1.0 -> 1.1, same rules
        "rules-changed",  # other rules
        "correction",
        "key-revoked",
        "key-created",  # the auditor, signing the run
        "verification",
    ]
    positions = [f.position for f in found]
    assert positions == sorted(positions)
    by_kind = {f.kind: f for f in found}
    assert by_kind["interrupted-round-voided"].stream == ids["voided"]
    assert by_kind["interrupted-round-voided"].details["reason"] == "shoe dropped"
    assert by_kind["round-resumed"].stream == ids["resumed"]
    assert by_kind["correction"].details["step"] == 1
    assert by_kind["correction"].details["right"] == {"cards": [48]}
    assert by_kind["key-revoked"].details["key_id"] == ids["device"]
    assert by_kind["plugin-changed"].details["from"]["version"] == "1.0"
    assert by_kind["plugin-changed"].details["to"]["version"] == "1.1"
    changed = by_kind["rules-changed"].details
    assert changed["from"]["rules_hash"] != changed["to"]["rules_hash"]
    run = by_kind["verification"].details
    assert (run["result"], run["tree_size"], run["root"]) == ("passed", report.events, report.root)
    assert run["auditor_key_id"] == auditor.key_id
    created = [f.details["role"] for f in found if f.kind == "key-created"]
    assert created == ["ledger-node", "operator", "dealer-device", "auditor"]
    for event in found:  # plain JSON, one line each
        assert json.loads(json.dumps(event.to_json()))["kind"] == event.kind
        assert "\n" not in event.summary and event.at.utcoffset() == timedelta(0)

    # --since: only what was signed from then on.
    later = found[-1].at
    assert kinds(list(iter_significant(node.app, since=later))) == ["key-created", "verification"]
    assert list(iter_significant(node.app, since=later + timedelta(days=1))) == []


def test_a_new_ledger_node_key_is_a_rotation(node: Node, store_url: str) -> None:
    casino = Casino(node.app, coin_games())
    casino.open_account(request_id="a", owner="alice", currency="EUR")
    node.keys.create("ledger-node-2", Role.LEDGER_NODE, PASSPHRASE)
    node.keys.use("ledger-node-2")
    node.close()
    again = open_node(store_url, str(node.keys.path), passphrase=PASSPHRASE, anchor_seconds=0)
    try:
        Casino(again.app, coin_games()).open_account(request_id="b", owner="bob", currency="EUR")
        found = list(iter_significant(again.app))
    finally:
        again.close()
    assert kinds(found) == ["key-created", "key-created", "key-rotated"]
    new = again.keyring.get(found[-1].details["to_key_id"])
    assert new is not None and new.name == "ledger-node-2"
    assert found[1].position == found[2].position > 0


@pytest.mark.parametrize("attack", ["payload", "topic"])
def test_a_tampered_significant_event_stops_the_query(
    node: Node, store_url: str, attack: str
) -> None:
    ids = history(node)
    attacker = Attacker(store_url)
    stream = ids["voided"]
    version = next(v for v in range(1, 9) if attacker.row(stream, v)[3].endswith("Round.Voided"))
    row = attacker.row(stream, version)
    if attack == "payload":
        attacker.set_state(stream, version, row[4].replace(b"shoe dropped", b"shoe Dropped"))
    else:  # hide it as another event type
        attacker.set_topic(stream, version, "ledger.domain.round:Round.BettingClosed")
    with pytest.raises(VerificationError, match=rf"stream {stream} version {version}"):
        list(iter_significant(node.app))


def test_a_recorded_run_is_verified_like_any_other_event(node: Node) -> None:
    history(node)
    keyring = node.keys.keyring
    report = verify_store(node.app, keyring(), VerifyOptions(level=Level.SIGNATURES))
    assert report.recorded_runs == 0
    auditor = auditor_signer(node)
    record_run(node.app, passed_run(report, "fp", now_micros()), auditor)
    record_run(node.app, failed_run("settlement", 3, "it broke", "fp", now_micros()), auditor)
    again = verify_store(node.app, keyring(), VerifyOptions(level=Level.INTEGRITY))
    assert again.recorded_runs == 2
    assert "2 recorded verification runs checked" in again.summary()
    trail: AuditTrail = node.app.repository.get(AUDIT_TRAIL_ID)
    assert trail.runs == 2
    assert f"{AuditTrail.__module__}:AuditTrail.VerificationRecorded" == RECORDED_TOPIC


def forger(node: Node, role: Role) -> Signer:
    """A signer holding another role's private key but claiming to be an auditor."""
    name = {Role.OPERATOR: OPERATOR, Role.LEDGER_NODE: "ledger-node"}[role]
    if role is Role.OPERATOR:
        operator_signer(node, OPERATOR)
    key = read_private_key(node.keys.private_key_path(name), PASSPHRASE)
    return InMemorySigner(key, Role.AUDITOR)


@pytest.mark.parametrize("who", ["operator", "ledger-node", "stranger"])
def test_a_run_not_signed_by_an_auditor_key_fails_verify(node: Node, who: str) -> None:
    history(node)
    report = verify_store(node.app, node.keys.keyring(), VerifyOptions(level=Level.SIGNATURES))
    signer = (
        InMemorySigner(Ed25519PrivateKey.generate(), Role.AUDITOR)
        if who == "stranger"
        else forger(node, Role(who))
    )
    record_run(node.app, passed_run(report, "fp", now_micros()), signer)
    said = {"operator": "an operator"}.get(who, f"a {who}")
    expected = "not in the keyring" if who == "stranger" else f"{said} key, not auditor"
    for level in Level:
        with pytest.raises(VerificationError, match=rf"audit trail: .*{expected}"):
            verify_store(
                node.app, node.keys.keyring(), VerifyOptions(level=level, games=installed_games())
            )


@pytest.mark.parametrize("lie", ["root", "size", "edited"])
def test_a_run_that_lies_about_the_log_fails_verify(node: Node, store_url: str, lie: str) -> None:
    history(node)
    auditor = auditor_signer(node)
    report = verify_store(node.app, node.keys.keyring(), VerifyOptions(level=Level.SIGNATURES))
    run = passed_run(report, "fp", now_micros())
    if lie == "root":  # a tree size the log has, with a root it never had
        run = {**run, "tree_size": report.events - 3, "root": "ab" * 32}
    elif lie == "size":  # more events than the log held before it
        run = {**run, "tree_size": report.events + 5}
    record_run(node.app, run, auditor)
    if lie == "edited":  # a genuine run, its result rewritten in the row
        attacker = Attacker(store_url)
        stream = str(AUDIT_TRAIL_ID)
        row = attacker.row(stream, 2)
        attacker.set_state(stream, 2, row[4].replace(b'"passed"', b'"failed"'))
    message = {
        "root": "claims the log's root at size",
        "size": "claims a tree of",
        "edited": "payload bytes do not match",
    }[lie]
    with pytest.raises(VerificationError, match=message):
        verify_store(node.app, node.keys.keyring(), VerifyOptions(level=Level.SIGNATURES))


def test_a_run_by_a_revoked_auditor_key_fails_verify(node: Node) -> None:
    history(node)
    auditor = auditor_signer(node)
    operator = operator_signer(node, OPERATOR)
    revoke_key(node.app, node.keys, auditor.key_id, "left", operator, now_micros())
    report = verify_store(node.app, node.keys.keyring(), VerifyOptions(level=Level.SIGNATURES))
    record_run(node.app, passed_run(report, "fp", now_micros()), auditor)
    with pytest.raises(
        VerificationError, match=r"auditor key auditor-1: signed at .*, after its key was revoked"
    ):
        verify_store(node.app, node.keys.keyring(), VerifyOptions(level=Level.SIGNATURES))


def test_the_device_key_reported_is_the_one_that_signed(node: Node) -> None:
    history(node)
    device = dealer_device(node)
    created = [f for f in iter_significant(node.app) if f.kind == "key-created"]
    assert device.signer.key_id in {f.details["key_id"] for f in created}


@pytest.fixture
def workdir(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keys (an auditor's among them) and a small simulated store, both backends."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LEDGER_PASSPHRASE", RIGHT)
    monkeypatch.delenv("LEDGER_KEYS", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setenv("LEDGER_STORE", store_url)
    with reproducible_session(2) as seeds:
        assert main(["simulate", "--rounds", "2", "--players", "2", "--tables", "1", *seeds]) == 0
    assert main(["keys", "create", "auditor-1", "--role", "auditor"]) == 0
    return tmp_path


def test_cli_verify_record_then_events(
    workdir: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    assert main(["verify", "--record"]) == 0
    out = capsys.readouterr().out
    assert "recorded in the log: verification passed over" in out
    assert main(["verify"]) == 0
    assert "1 recorded verification run checked" in capsys.readouterr().out
    assert main(["events", "--significant", "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    runs = [line for line in lines if line["kind"] == "verification"]
    assert len(runs) == 1 and runs[0]["details"]["result"] == "passed"
    assert runs[0]["details"]["level"] == "settlement"
    assert runs[0]["details"]["root"] == runs[0]["details"]["checkpoint"]["root"]
    assert main(["events", "--significant"]) == 0
    text = capsys.readouterr().out
    assert "verification at level settlement: passed" in text
    assert "not checked: chains" in text.splitlines()[-1]

    # A tampered store: the failed run is recorded too, and verify still fails.
    attacker = Attacker(store_url)
    _, stream, version, _, state = attacker.sql(
        f"SELECT {attacker.id}, originator_id, originator_version, topic, state "
        f"FROM {attacker.events} ORDER BY {attacker.id} LIMIT 1 OFFSET 10"
    )[0]
    attacker.set_state(str(UUID(str(stream))), version, bytes(state)[:-1] + b" ")
    assert main(["verify", "--record"]) == 1
    captured = capsys.readouterr()
    assert "recorded in the log: verification failed" in captured.out
    assert "log position 10" in captured.err
    assert main(["events", "--significant"]) == 1
    assert "payload bytes do not match" in assert_one_error_line(capsys.readouterr().err)


def test_cli_events_lists_every_event_and_significant_only_those(
    workdir: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37: `events` began with the same lines as `events --significant`
    (the flag was optional). `events` is the log, every event as its signed
    header names it; `--significant` the auditor's short list."""
    attacker = Attacker(store_url)
    try:
        rows = attacker.sql(
            f"SELECT originator_id, originator_version, topic FROM {attacker.events} "
            f"ORDER BY {attacker.id}"
        )
    finally:
        attacker.close()
    expected = [
        (str(UUID(str(stream))), version, topic.partition(":")[2])
        for stream, version, topic in rows
    ]
    capsys.readouterr()
    assert main(["events", "--json"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["position"] for e in listed] == list(range(len(rows)))
    assert [(e["stream"], e["version"], e["type"]) for e in listed] == expected
    assert main(["events"]) == 0
    every = capsys.readouterr().out.splitlines()
    assert len(every) == len(rows) + 1
    assert every[-1].startswith(f"{len(rows)} events; checked: every row against its signed")
    first_stream, first_version, first_type = expected[0]
    assert every[0].split()[2:] == [first_type, first_stream, f"v{first_version}"]
    assert main(["events", "--significant"]) == 0
    significant = capsys.readouterr().out.splitlines()
    assert significant[-1].endswith("(use `ledger verify`)")
    assert 1 < len(significant) < len(every)
    assert all(line.split()[2] == "key-created" for line in significant[:-1])
    assert main(["events", "--since", "2999-01-01"]) == 0
    assert capsys.readouterr().out.startswith("0 events; ")


def test_cli_events_shows_only_what_is_signed(
    workdir: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A row relabelled in the database, then (put back) one whose envelope
    signature is forged: each stops the listing with one line naming it (exit
    1), as nothing shown is taken from a column alone, nor from an unsigned
    header."""
    attacker = Attacker(store_url)
    try:
        stream, version, topic = attacker.sql(
            f"SELECT originator_id, originator_version, topic FROM {attacker.events} "
            f"ORDER BY {attacker.id} LIMIT 1 OFFSET 5"
        )[0]
        stream = str(UUID(str(stream)))
        state = attacker.row(stream, version)[4]
        envelope = open_envelope(state, stream=stream, version=version)
        at = len(state) - len(envelope.payload) - len(envelope.signature)
        forged = state[:at] + bytes([state[at] ^ 1]) + state[at + 1 :]
        for attack, problem in (
            (
                lambda: attacker.set_topic(stream, version, "ledger.domain.round:Round.Voided"),
                "signed type",
            ),
            (lambda: attacker.set_state(stream, version, forged), "signature is invalid"),
        ):
            attack()
            capsys.readouterr()
            assert main(["events"]) == 1
            line = assert_one_error_line(capsys.readouterr().err)
            assert stream in line and problem in line, line
            attacker.set_topic(stream, version, topic)
    finally:
        attacker.close()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["events", "--significant", "--since", "yesterday"], "not an ISO 8601"),
        (["events", "--since", "2026-13-40"], "not an ISO 8601"),  # (`events` alone lists them)
        (["verify", "--record", "--auditor-key", "nobody"], "nobody"),
    ],
)
def test_cli_bad_input_is_one_line(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    capsys.readouterr()
    with contextlib.suppress(SystemExit):
        assert main(argv) == 2
    assert message in assert_one_error_line(capsys.readouterr().err)
