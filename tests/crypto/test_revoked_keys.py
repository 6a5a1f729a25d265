"""Revoked keys sign nothing from their revocation on, for every role (RULES
§1.4, `ledger.crypto.validity`), attacked on both stores: the Python API and
HTTP refuse a fact signed with a revoked key and record nothing; a fact forced
into the log by someone holding the node key and the database fails `verify`,
with and without the auditor's pinned keyring, naming the event and the key;
a fact signed before the revocation, under a checkpoint issued before it,
stays valid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino, attestation
from ledger.cli.main import main
from ledger.crypto.actor import sign_fact
from ledger.crypto.envelope import now_micros
from ledger.crypto.keys import Keyring, Role, read_private_key
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.signing import InMemorySigner
from ledger.devices import DealerDevice
from ledger.domain.key_registry import KEY_REGISTRY_ID, KeyRegistry, revocation_fact
from ledger.errors import InvalidCommandError
from ledger.node import Node, open_node
from ledger.plugins.manager import get_plugin_manager
from ledger.revocation import revoke_key
from tests.casino_support import event_count
from tests.conftest import PASSPHRASE
from tests.http_support import make_api, operator_signature
from tests.verdict import verdict

GAMES = get_plugin_manager().games()
LIMITS: Any = {"min_bet": 10, "max_bet": 5_000, "max_round": 10_000}


def stolen(keys: KeyDirectory, name: str, role: Role) -> InMemorySigner:
    """What whoever holds the key file signs with, revoked or not."""
    return InMemorySigner(read_private_key(keys.private_key_path(name), PASSPHRASE), role, name)


def key(node: Node, name: str, role: Role) -> InMemorySigner:
    if not any(r.name == name for r in node.keys.keyring()):
        node.keys.create(name, role, PASSPHRASE)
    return stolen(node.keys, name, role)


def revoke(node: Node, name: str) -> None:
    """Revoke key `name` (signed by the operator key `revoker`), the log anchored first."""
    node.checkpointer().catch_up()
    revoker = key(node, "revoker", Role.OPERATOR)
    revoke_key(node.app, node.keys, name, "compromised", revoker, now_micros())


def pinned(node: Node, tmp_path: Path) -> Path:
    """The auditor's own copy of the keyring, taken now (before any revocation:
    it knows every key, the one that will sign the revocation included)."""
    key(node, "revoker", Role.OPERATOR)
    path = tmp_path / "pinned-keyring.json"
    path.write_text(node.keys.keyring().to_json())
    return path


def verify_fails(node: Node, capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    node.checkpointer().catch_up()  # an honest checkpoint after it helps nothing
    capsys.readouterr()
    code = main(["--store", node.app.store_url, "--keys", str(node.keys.path), "verify", *extra])
    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert "Traceback" not in err
    lines = verdict(code, out, err).strip().splitlines()
    assert len(lines) == 1, out + err
    return lines[0]


def dice_table(casino: Casino) -> tuple[str, str, str]:
    """A physical Tài Xỉu table, a funded player, and a round with a bet on big."""
    player = casino.open_account(request_id="acc", owner="p", currency="VND")
    casino.deposit(request_id="dep", account_id=player, amount=50_000)
    table = casino.open_table(
        request_id="t", name="TX", game="taixiu", kind="physical", currency="VND", limits=LIMITS
    )
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.place_bet(
        request_id="b", round_id=round_id, account_id=player, bet={"bet": "big"}, stake=1_000
    )
    return table, player, round_id


def position_of(node: Node, stream: str, version: int) -> int:
    row = node.app.tables.row_by_stream(stream, version)
    assert row is not None
    return node.app.tables.position_of(row[0])


# 1. A void signed by a revoked operator key.


def test_a_void_by_a_revoked_operator_key_is_refused_and_fails_verify(
    node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    casino = Casino(node.app, GAMES)
    _, _, round_id = dice_table(casino)
    thief = key(node, "ops", Role.OPERATOR)
    keyring_file = pinned(node, tmp_path)
    revoke(node, "ops")
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match=r"operator key ops may not sign now: .*revoked"):
        casino.void_round(request_id="v", round_id=round_id, reason="x", operator=thief)
    assert event_count(node.app) == before
    # Forced in by someone with the node key and the database (the node's check skipped).
    monkeypatch.setattr(attestation, "check_operator", lambda context, operator: operator)
    casino.void_round(request_id="v", round_id=round_id, reason="x", operator=thief)
    monkeypatch.undo()
    version = casino.round(round_id).version
    where = (
        f"stream {round_id} version {version} (log position {position_of(node, round_id, version)})"
    )
    for extra in ((), ("--keyring", str(keyring_file))):  # the pinned copy knows no revocation
        line = verify_fails(node, capsys, *extra)
        assert (
            where in line
            and "operator key ops: signed at" in line
            and "after its key was revoked" in line
        )


def test_a_void_over_http_with_a_revoked_operator_key_is_refused(
    node: Node, tmp_path: Path
) -> None:
    api = make_api(node, tmp_path)
    player = api.wallet(1_000)
    round_id = api.round(api.table())
    api.ok(
        f"/v1/rounds/{round_id}/bets", {"account_id": player, "bet": {"on": "heads"}, "stake": 100}
    )
    thief = key(node, "ops", Role.OPERATOR)
    revoke(node, "ops")
    before = api.events()
    # Asking which bytes to sign is refused already...
    response = api.post(
        f"/v1/rounds/{round_id}/fact-to-sign",
        {"command": "void", "key_id": thief.key_id, "reason": "x"},
    )
    assert response.status_code == 400, response.text
    assert "operator key ops may not sign now" in response.json()["detail"]
    # ...and a signature made offline over the right fact is refused too.
    response = api.post(
        f"/v1/rounds/{round_id}/void",
        {"reason": "x", "operator": operator_signature(thief, "void", round_id, "x")},
    )
    assert response.status_code == 400, response.text
    assert "operator key ops may not sign now" in response.json()["detail"]
    assert api.events() == before


# 2. A correction signed by a revoked operator key.


def test_a_correction_by_a_revoked_operator_key_is_refused_and_fails_verify(
    node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    casino = Casino(node.app, GAMES)
    _, player, round_id = dice_table(casino)
    device = DealerDevice(key(node, "shaker", Role.DEALER_DEVICE))
    casino.close_betting(request_id="c", round_id=round_id)
    casino.act(
        request_id="throw",
        round_id=round_id,
        actor="dealer",
        action="throw",
        source=device.act(round_id, 1, "dealer", "throw", {}, [4, 5, 6]),
    )
    won = casino.account(player).balance
    thief = key(node, "ops", Role.OPERATOR)
    keyring_file = pinned(node, tmp_path)
    revoke(node, "ops")
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="operator key ops may not sign now"):
        casino.correct_step(
            request_id="fix",
            round_id=round_id,
            step=1,
            drawn=[1, 1, 2],
            reason="misread",
            operator=thief,
        )
    assert event_count(node.app) == before and casino.account(player).balance == won
    monkeypatch.setattr(attestation, "check_operator", lambda context, operator: operator)
    casino.correct_step(
        request_id="fix",
        round_id=round_id,
        step=1,
        drawn=[1, 1, 2],
        reason="misread",
        operator=thief,
    )
    monkeypatch.undo()
    assert casino.account(player).balance < won  # the win became a loss: money moved
    for extra in ((), ("--keyring", str(keyring_file))):
        line = verify_fails(node, capsys, *extra)
        assert f"stream {round_id} version" in line and "operator key ops: signed at" in line


# 3. A physical throw reported with a revoked dealer-device key.


def test_a_throw_by_a_revoked_device_key_is_refused_and_fails_verify(
    node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    casino = Casino(node.app, GAMES)
    _, _, round_id = dice_table(casino)
    casino.close_betting(request_id="c", round_id=round_id)
    device = DealerDevice(key(node, "shaker", Role.DEALER_DEVICE))
    keyring_file = pinned(node, tmp_path)
    revoke(node, "shaker")
    report = device.act(round_id, 1, "dealer", "throw", {}, [4, 5, 6])
    before = event_count(node.app)
    with pytest.raises(
        InvalidCommandError,
        match=r"dealer-device key shaker: signed at .*, after its key was revoked",
    ):
        casino.act(
            request_id="throw", round_id=round_id, actor="dealer", action="throw", source=report
        )
    assert event_count(node.app) == before
    monkeypatch.setattr(attestation, "check_device", lambda context, source, fact: None)
    casino.act(request_id="throw", round_id=round_id, actor="dealer", action="throw", source=report)
    monkeypatch.undo()
    for extra in ((), ("--keyring", str(keyring_file))):
        line = verify_fails(node, capsys, *extra)
        assert f"round {round_id}" in line
        assert "dealer-device key shaker: signed at" in line and "after its key was revoked" in line


# What a key signed before its revocation stays valid.


def test_facts_signed_before_the_revocation_under_a_checkpoint_stay_valid(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    casino = Casino(node.app, GAMES)
    _, _, round_id = dice_table(casino)
    casino.close_betting(request_id="c", round_id=round_id)
    device = DealerDevice(key(node, "shaker", Role.DEALER_DEVICE))
    casino.act(
        request_id="throw",
        round_id=round_id,
        actor="dealer",
        action="throw",
        source=device.act(round_id, 1, "dealer", "throw", {}, [4, 5, 6]),
    )
    _, _, other = dice_table_again(casino)
    ops = key(node, "ops", Role.OPERATOR)
    casino.void_round(request_id="v2", round_id=other, reason="shoe dropped", operator=ops)
    revoke(node, "shaker")  # the log is anchored first: a checkpoint before the revocation
    revoke(node, "ops")
    node.checkpointer().catch_up()
    keyring = node.keys.keyring()
    assert {r.name for r in keyring if r.revoked_at is not None} == {"shaker", "ops"}
    report = verify_store(node.app, keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES))
    assert report.device_reports == 1 and report.settlement is not None
    assert report.settlement.resettled >= 1  # the throw settled, re-derived


def dice_table_again(casino: Casino) -> tuple[str, str, str]:
    table = casino.open_table(
        request_id="t2",
        name="TX2",
        game="taixiu",
        kind="physical",
        currency="VND",
        limits=LIMITS,
    )
    return table, "", casino.open_round(request_id="r2", table_id=table, dealer="D")


def test_a_fact_no_checkpoint_before_the_revocation_covers_fails(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    """Signed before the revocation by its own account, but nothing proves it was:
    a thief back-dates as easily as they sign."""
    casino = Casino(node.app, GAMES)
    _, _, round_id = dice_table(casino)
    ops = key(node, "ops", Role.OPERATOR)
    casino.void_round(request_id="v", round_id=round_id, reason="shoe dropped", operator=ops)
    revoker = key(node, "revoker", Role.OPERATOR)
    revoke_key(node.app, node.keys, "ops", "compromised", revoker, now_micros())  # no anchor
    line = verify_fails(node, capsys)
    assert f"stream {round_id}" in line
    assert "operator key ops: signed by a key revoked at" in line
    assert "no checkpoint issued before the revocation covers it" in line


# Every role judged by the one rule: the node, checkpoints, revocations themselves.


def test_a_node_refuses_to_seal_with_a_key_revoked_in_the_log(node: Node) -> None:
    """Revoked through the log only (another node's keys directory): this node
    reads the key registry and signs nothing more with that key."""
    casino = Casino(node.app, GAMES)
    dice_table(casino)
    node_key = node.keyring.with_role(Role.LEDGER_NODE)[0]
    revoker = key(node, "revoker", Role.OPERATOR)
    at = now_micros()
    signed = sign_fact(revoker, revocation_fact(node_key.key_id, "stolen", at), Role.OPERATOR)
    registry = KeyRegistry()
    registry.revoke(key_id=node_key.key_id, reason="stolen", revoked_at=at, operator=dict(signed))
    node.app.check_node_key = lambda: None  # type: ignore[method-assign]
    node.app.save(registry)
    del node.app.check_node_key  # the instance attribute: the method again
    node.app._signing_cache = None
    before = event_count(node.app)
    with pytest.raises(Exception, match="ledger-node key ledger-node may not sign now"):
        casino.open_account(request_id="late", owner="late", currency="VND")
    assert event_count(node.app) == before
    assert node.app.repository.get(KEY_REGISTRY_ID) is not None


def test_a_reopened_node_reads_what_its_revoked_old_key_signed(node: Node, store_url: str) -> None:
    casino = Casino(node.app, GAMES)
    _, player, _ = dice_table(casino)
    node.checkpointer().catch_up()
    node.keys.create("ledger-node-2", Role.LEDGER_NODE, PASSPHRASE)
    node.keys.use("ledger-node-2")
    node.keys.create("revoker", Role.OPERATOR, PASSPHRASE)
    again = open_node(
        store_url, str(node.keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=0
    )
    try:
        revoke_key(
            again.app,
            again.keys,
            "ledger-node",
            "retired",
            stolen(node.keys, "revoker", Role.OPERATOR),
            now_micros(),
        )
    finally:
        again.close()
    reopened = open_node(
        store_url, str(node.keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=0
    )
    try:
        later = Casino(reopened.app, GAMES)
        assert later.account(player).balance == 49_000  # signed by the revoked old key
        later.deposit(request_id="more", account_id=player, amount=1)  # signed by the new one
        reopened.checkpointer().catch_up()
        verify_store(
            reopened.app,
            reopened.keys.keyring(),
            VerifyOptions(level=Level.SETTLEMENT, games=GAMES),
        )
    finally:
        reopened.close()


def test_a_revocation_signed_by_a_revoked_operator_fails_verify(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    first = key(node, "first", Role.OPERATOR)
    key(node, "second", Role.OPERATOR)
    node.checkpointer().catch_up()
    revoke_key(
        node.app,
        node.keys,
        "first",
        "left",
        stolen(node.keys, "second", Role.OPERATOR),
        now_micros(),
    )
    node.keys.create("device", Role.DEALER_DEVICE, PASSPHRASE)
    # The revoked operator signs a revocation afterwards (its node-side check skipped).
    device_id = next(r.key_id for r in node.keys.keyring() if r.name == "device")
    at = now_micros()
    registry: Any = node.app.repository.get(KEY_REGISTRY_ID)
    assert isinstance(registry, KeyRegistry)
    signed = sign_fact(first, revocation_fact(device_id, "spite", at), Role.OPERATOR)
    registry.revoke(key_id=device_id, reason="spite", revoked_at=at, operator=dict(signed))
    node.app.save(registry)
    line = verify_fails(node, capsys)
    assert "key registry" in line and "the revocation's operator key first" in line
    assert "after its key was revoked" in line and "(log position" in line


def test_the_api_reads_revocations_recorded_through_another_node(node: Node) -> None:
    """The keys directory here knows nothing of the revocation; the log does."""
    casino = Casino(node.app, GAMES)
    _, _, round_id = dice_table(casino)
    thief = key(node, "ops", Role.OPERATOR)
    revoke(node, "ops")
    clean = json.loads(node.keys.keyring_path.read_text())
    for entry in clean["keys"]:
        entry.pop("revoked_at", None)
        entry.pop("revocation_reason", None)
    node.keys.keyring_path.write_text(json.dumps(clean))
    assert all(r.revoked_at is None for r in Keyring.load(node.keys.keyring_path))
    with pytest.raises(InvalidCommandError, match="operator key ops may not sign now"):
        casino.void_round(request_id="v", round_id=round_id, reason="x", operator=thief)
