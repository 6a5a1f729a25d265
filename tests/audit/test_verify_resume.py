"""`verify --save-state DIR` / `--resume DIR`: verification that grows with what is new.

On both stores: a resumed run re-derives exactly what a full run does (the
same counts, the same root) across a round open at the state's end and a
correction of a round that ended before it; an edit or a removal
before the state's end is still caught (the rows are re-hashed against the
state's digests); what is wrong after it is found as in a full run; a state
that is not this log's, or is damaged, or of another level, is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger.audit.findings import Findings, Step
from ledger.audit.verify import Level, Sinks, VerificationReport, VerifyOptions, verify_store
from ledger.audit.verify_state import STATE_FILE, VerifyState
from ledger.casino import Casino
from ledger.cli.main import main
from ledger.crypto.envelope import now_micros, open_envelope, seal
from ledger.crypto.keys import Role
from ledger.domain.round import Round
from ledger.errors import FindingKind
from ledger.node import Node
from tests.attacker import Attacker
from tests.audit.test_findings import LIMITS, GenerousPlugin, _version_of, finish, open_with_bets
from tests.casino_support import operator_signer
from tests.coin_game import COIN_GAMES, coin_games
from tests.conftest import PASSPHRASE

Players = list[str]


def _players(casino: Casino) -> Players:
    players = []
    for name in ("alice", "bob"):
        account = casino.open_account(request_id=f"a-{name}", owner=name, currency="EUR")
        casino.deposit(request_id=f"d-{name}", account_id=account, amount=50_000)
        players.append(account)
    return players


class Table:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.casino = Casino(node.app, COIN_GAMES)
        self.players = _players(self.casino)
        self.table = self.casino.open_table(
            request_id="t",
            name="T1",
            game="coin",
            kind="physical",
            currency="EUR",
            limits=LIMITS,  # type: ignore[arg-type]
        )
        self.rounds: list[str] = []

    def play(self, n: int, casino: Casino | None = None) -> str:
        round_id = open_with_bets(casino or self.casino, self.table, self.players, n)
        finish(self.node, casino or self.casino, round_id, n)
        self.rounds.append(round_id)
        return round_id


def _verify(node: Node, findings: Findings | None = None, **options: Any) -> VerificationReport:
    return verify_store(
        node.app,
        node.keys.keyring(),
        VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES, **options),
        Sinks(findings=findings),
    )


def _saved(node: Node, directory: Path) -> VerifyState:
    report = _verify(node, save_state=True)
    assert report.state is not None and report.state.size == report.events
    report.state.save(directory, report.rounds)
    return VerifyState.load(directory)


@pytest.mark.parametrize("chunks", [{}, {"workers": 2, "chunk_leaves": 8}])
def test_a_resumed_run_re_derives_what_a_full_run_does(
    node: Node, tmp_path: Path, chunks: dict[str, int]
) -> None:
    table = Table(node)
    for n in range(1, 4):
        table.play(n)
    across = open_with_bets(table.casino, table.table, table.players, 4)  # open at the state's end
    node.checkpointer().catch_up()
    state = _saved(node, tmp_path / "state")
    finish(node, table.casino, across, 4)
    table.casino.correct(  # a round that ended before the state, corrected after it
        request_id="fix",
        round_id=table.rounds[0],
        outcome={"face": "tails"},
        reason="misread",
        operator=operator_signer(node),
    )
    for n in range(5, 7):
        table.play(n)
    node.checkpointer().catch_up()
    resumed = _verify(node, resume=state, save_state=True, **chunks)
    full = _verify(node, **chunks)
    assert resumed.resumed_from == state.size < resumed.events == full.events
    assert resumed.settlement == full.settlement
    assert (
        resumed.settlement is not None and resumed.settlement.resettled == 7
    )  # 6 rounds, 1 correction
    assert (resumed.root, resumed.streams) == (full.root, full.streams)
    assert resumed.state is not None and resumed.state.size == full.events
    assert resumed.state.root.hex() == full.root
    assert "every row before it re-read and re-hashed" in resumed.summary()


@pytest.mark.parametrize("attack", ["edit", "remove"])
def test_an_attack_before_the_state_is_still_caught(
    node: Node, tmp_path: Path, attack: str
) -> None:
    table = Table(node)
    for n in range(1, 4):
        table.play(n)
    node.checkpointer().catch_up()
    state = _saved(node, tmp_path / "state")
    table.play(4)
    node.checkpointer().catch_up()
    victim = table.rounds[1]
    version = _version_of(Attacker(node.app.store_url), victim, Round.Settled)
    attacker = Attacker(node.app.store_url)
    try:
        envelope = attacker.row(victim, version)[4]
        if attack == "edit":  # a payload byte: the header and the leaf stay as they were
            flipped = bytes([envelope[-3] ^ 1])
            attacker.set_state(victim, version, envelope[:-3] + flipped + envelope[-2:])
        else:
            attacker.delete(victim, version)
    finally:
        attacker.close()
    findings = Findings()
    _verify(node, resume=state, findings=findings)
    altered = [f for f in findings if f.kind is FindingKind.ALTERED and f.step is Step.ENVELOPES]
    assert altered and "not the bytes the saved state was made from" in altered[0].text


def test_an_event_after_the_state_must_link_to_its_streams_head_before_it(
    node: Node, tmp_path: Path
) -> None:
    """The state keeps no stream heads: a new event on a stream that ended
    before the state links to the head re-read from the rows re-hashed. With
    database rights and the node key, an event appended after the state to
    an old round, linked to the wrong predecessor, is caught."""
    table = Table(node)
    table.play(1)
    table.play(2)
    node.checkpointer().catch_up()
    state = _saved(node, tmp_path / "state")
    assert state.streams > 0 and "heads" not in state.to_json()
    table.play(3)
    victim = table.rounds[0]
    attacker = Attacker(node.app.store_url)
    try:
        last = _version_of(attacker, victim, Round.Settled)
        _, _, _, topic, before = attacker.row(victim, last - 1)
        earlier = open_envelope(before, stream=victim, version=last - 1)
        forged, _ = seal(
            stream=victim,
            version=last + 1,
            event_type=topic,
            prev_hash=earlier.entry_hash,  # skips the real head
            payload=earlier.payload,
            signer=node.keys.signer(Role.LEDGER_NODE, PASSPHRASE),
            signed_at=now_micros(),
        )
        attacker.insert(victim, last + 1, topic, forged)
    finally:
        attacker.close()
    findings = Findings()
    _verify(node, resume=state, findings=findings)
    chains = [f for f in findings if f.step is Step.CHAINS and f.stream == victim]
    assert chains and chains[0].kind is FindingKind.ALTERED, [str(f) for f in findings]


def test_what_is_wrong_after_the_state_is_found(node: Node, tmp_path: Path) -> None:
    table = Table(node)
    table.play(1)
    node.checkpointer().catch_up()
    state = _saved(node, tmp_path / "state")
    liar = table.play(2, Casino(node.app, coin_games("1.0", GenerousPlugin())))
    table.play(3)
    node.checkpointer().catch_up()
    findings = Findings()
    report = _verify(node, resume=state, findings=findings, save_state=True)
    assert [(f.kind, f.step, f.stream) for f in findings] == [
        (FindingKind.RULE_BROKEN, Step.PAYOUTS, liar)
    ]
    assert report.state is None  # a run with a finding saves no state


def test_a_revocation_reaching_back_before_the_state_is_not_checked(
    node: Node, tmp_path: Path
) -> None:
    Table(node).play(1)
    node.checkpointer().catch_up()
    state = _saved(node, tmp_path / "state")
    operator = operator_signer(node)
    keyring = node.keys.keyring().with_revocations({operator.key_id: state.saved_at - 1})
    findings = Findings()
    verify_store(
        node.app,
        keyring,
        VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES, resume=state),
        sinks=Sinks(findings=findings),
    )
    assert [(f.kind, f.step) for f in findings] == [(FindingKind.NOT_CHECKED, Step.KEYS)]
    assert "verify in full" in findings.items[0].text


def _cli(store: str, keys: Path, *argv: str, level: str = "signatures") -> int:
    # The coin game is the tests' own, not installed: the CLI verifies up to signatures.
    return main(["--store", store, "--keys", str(keys), "verify", "--level", level, *argv])


def _saved_by_cli(node: Node, tmp_path: Path) -> Path:
    """One round played and checkpointed, its state saved by `verify --save-state`."""
    Table(node).play(1)
    node.checkpointer().catch_up()
    state = tmp_path / "state"
    assert _cli(node.app.store_url, node.keys.path, "--save-state", str(state)) == 0
    return state


def test_cli_saves_and_resumes(
    node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    table = Table(node)
    table.play(1)
    node.checkpointer().catch_up()
    store, keys, state = node.app.store_url, node.keys.path, tmp_path / "state"
    assert _cli(store, keys, "--save-state", str(state)) == 0
    first = json.loads((state / STATE_FILE).read_text())
    table.play(2)
    node.checkpointer().catch_up()
    capsys.readouterr()
    assert _cli(store, keys, "--resume", str(state)) == 0
    out = capsys.readouterr().out
    assert f"from log position {first['size']}" in out and f"state saved to {state}" in out
    assert "those between older ones were verified when the state was made" in out
    assert json.loads((state / STATE_FILE).read_text())["size"] > first["size"]


@pytest.mark.parametrize(
    "damage, message",
    [
        ("missing", "no state.json there"),
        ("not-json", "is not a verify state"),
        ("root", "its tree does not give its root"),
        ("level", "made at level signatures"),
    ],
)
def test_cli_refuses_a_bad_state_in_one_line(
    node: Node,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    damage: str,
    message: str,
) -> None:
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    state = _saved_by_cli(node, tmp_path)
    store, keys = node.app.store_url, node.keys.path
    path = state / STATE_FILE
    data = json.loads(path.read_text())
    level = "signatures"
    if damage == "missing":
        path.unlink()
    elif damage == "not-json":
        path.write_text("{")
    elif damage == "root":
        path.write_text(json.dumps({**data, "root": "00" * 32}))
    else:
        level = "integrity"
    capsys.readouterr()
    assert _cli(store, keys, "--resume", str(state), level=level) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_a_state_of_another_store_is_refused(
    node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    state = _saved_by_cli(node, tmp_path)
    data = json.loads((state / STATE_FILE).read_text())
    data["chunks"][0][4] = "0" * 64  # another log's rows
    (state / STATE_FILE).write_text(json.dumps(data))
    assert _cli(node.app.store_url, node.keys.path, "--resume", str(tmp_path / "state")) == 1
    err = capsys.readouterr().err
    assert "not the bytes the saved state was made from" in err
