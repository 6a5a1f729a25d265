"""`ledger verify` reports every finding in one run, classified, with its log
position, stream and round (`--findings FILE`: JSON Lines, docs/schemas/finding.json).

Attacked on both stores: one store with a wrong payout (a lying release),
a bad signature and a deleted event in three other rounds lists exactly those
three rounds; a release-0.1 store with RNG re-throws lists exactly those
rounds as older-release findings and nothing else; a round whose game is not
installed is not-checked (exit 3) unless something failed too (exit 1).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from ledger.audit.findings import Findings, Step
from ledger.audit.verify import Level, Sinks, VerifyOptions, verify_store
from ledger.casino import Casino
from ledger.cli.main import main
from ledger.crypto.envelope import open_envelope
from ledger.domain.round import Round
from ledger.errors import CannotReDeriveError, FindingKind, VerificationError
from ledger.node import Node
from ledger.plugins import hookimpl
from ledger.plugins.registry import GameRegistry
from tests.attacker import Attacker
from tests.casino_support import seen
from tests.coin_game import COIN_GAMES, CoinPlugin, CoinToss, coin_games
from tests.conftest import PASSPHRASE

SCHEMA = json.loads((Path(__file__).parents[2] / "docs" / "schemas" / "finding.json").read_text())
RELEASE_01 = Path(__file__).parents[1] / "data" / "release-0.1-faults-store"
LIMITS = {"min_bet": 10, "max_bet": 1000, "max_round": 2000}


class Generous(CoinToss):
    """A lying release: same id and rules hash, pays half as much again."""

    def step(self, bets: Any, actions: Any) -> Any:
        step = super().step(bets, actions)
        return {**step, "settle": {b: v * 3 // 2 for b, v in step["settle"].items()}}


class GenerousPlugin(CoinPlugin):
    @hookimpl
    def ledger_register_games(self, registry: GameRegistry) -> None:
        registry.add(Generous())


def open_with_bets(casino: Casino, table: str, players: list[str], n: int) -> str:
    """Coin round `n`, a bet of 100 from each player (tails, heads, ...)."""
    round_id = casino.open_round(request_id=f"r{n}", table_id=table, dealer="D1")
    for i, player in enumerate(players):
        casino.place_bet(
            request_id=f"b{n}-{i}",
            round_id=round_id,
            account_id=player,
            bet={"on": "heads" if i % 2 else "tails"},
            stake=100,
        )
    return round_id


def finish(node: Node, casino: Casino, round_id: str, n: int) -> None:
    """Betting closed, heads seen by the dealer device, the round settled."""
    casino.close_betting(request_id=f"c{n}", round_id=round_id)
    outcome = {"face": "heads"}
    casino.record_outcome(
        request_id=f"o{n}",
        round_id=round_id,
        outcome=outcome,
        source=seen(node, casino, round_id, outcome),
    )


def _play(node: Node, casino: Casino, table: str, players: list[str], n: int) -> str:
    round_id = open_with_bets(casino, table, players, n)
    finish(node, casino, round_id, n)
    return round_id


def _five_rounds(node: Node) -> list[str]:
    """Five coin rounds; the second settled by a lying release."""
    casino = Casino(node.app, COIN_GAMES)
    players = []
    for name in ("alice", "bob"):
        account = casino.open_account(request_id=f"a-{name}", owner=name, currency="EUR")
        casino.deposit(request_id=f"d-{name}", account_id=account, amount=5000)
        players.append(account)
    table = casino.open_table(
        request_id="t",
        name="T1",
        game="coin",
        kind="physical",
        currency="EUR",
        limits=LIMITS,  # type: ignore[arg-type]
    )
    liar = Casino(node.app, coin_games("1.0", GenerousPlugin()))
    rounds = [_play(node, liar if n == 2 else casino, table, players, n) for n in range(1, 6)]
    node.checkpointer().catch_up()
    return rounds


def _version_of(attacker: Attacker, stream: str, topic: type, *, last: bool = False) -> int:
    """The version of the stream's first (or `last`) event of this type."""
    rows = attacker.sql(
        f"SELECT originator_version, topic FROM {attacker.events} WHERE originator_id = ? "
        "ORDER BY originator_version",
        (attacker.key(stream),),
    )
    versions = [v for v, t in rows if t.endswith(topic.__qualname__)]
    return versions[-1] if last else versions[0]


def _bad_signature(attacker: Attacker, stream: str, version: int) -> None:
    _, _, _, _, state = attacker.row(stream, version)
    envelope = open_envelope(state, stream=stream, version=version)
    at = 6 + len(envelope.header)  # the signature follows the prefix and the header
    attacker.set_state(stream, version, state[:at] + bytes([state[at] ^ 1]) + state[at + 1 :])


def test_every_finding_in_one_run_each_in_its_own_round(node: Node, tmp_path: Path) -> None:
    rounds = _five_rounds(node)
    attacker = Attacker(node.app.store_url)
    try:
        _bad_signature(attacker, rounds[2], _version_of(attacker, rounds[2], Round.ActionRecorded))
        # The outcome, just before the settlement: the settlement, itself as
        # signed, is still read, so the wallets it credits still balance.
        outcome = _version_of(attacker, rounds[3], Round.ActionRecorded, last=True)
        assert _version_of(attacker, rounds[3], Round.Settled) == outcome + 1
        attacker.delete(rounds[3], outcome)
    finally:
        attacker.close()
    findings = Findings()
    report = verify_store(
        node.app,
        node.keyring,
        VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES),
        sinks=Sinks(findings=findings),
    )
    by_round: dict[str | None, set[tuple[FindingKind, Step]]] = {}
    for finding in findings:
        by_round.setdefault(finding.stream, set()).add((finding.kind, finding.step))
    # The lying payout, the forged signature, the removed event; rounds 1 and 5
    # and every wallet are clean, and nothing is reported twice for one cause.
    assert (FindingKind.RULE_BROKEN, Step.PAYOUTS) in by_round.pop(rounds[1])
    assert by_round.pop(rounds[2]) == {(FindingKind.ALTERED, Step.ENVELOPES)}
    removed = by_round.pop(rounds[3])
    assert removed and {kind for kind, _ in removed} == {FindingKind.ALTERED}
    # A removed event also leaves the log short of the checkpoint covering it.
    assert set(by_round) <= {None}
    assert all(
        (kind, step) in ((FindingKind.ALTERED, Step.MERKLE), (FindingKind.ALTERED, Step.CHAINS))
        for kinds in by_round.values()
        for kind, step in kinds
    )
    assert findings.implied >= 1  # round 3's outcome after an unreadable close: implied
    # Every finding names its position; the round ones name their round.
    for finding in findings:
        if finding.stream is not None:
            assert finding.position is not None
            assert finding.round_id in (finding.stream, None)
    assert report.summary().startswith("FAILED: ")
    # Without a sink the first finding is raised, as it always was.
    with pytest.raises(VerificationError) as raised:
        verify_store(
            node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=COIN_GAMES)
        )
    assert str(raised.value) == str(findings.headline())
    # Settled chunk by chunk while workers verify the next ones: the same findings
    # as one process settling after every chunk (the same chunks); with one
    # event a chunk, every link (the gap's too) is checked across a chunk's edge.
    by_run = {}
    for workers, leaves in ((1, 4), (2, 4), (1, 1)):
        found = by_run[workers, leaves] = Findings()
        verify_store(
            node.app,
            node.keyring,
            VerifyOptions(
                level=Level.SETTLEMENT, games=COIN_GAMES, workers=workers, chunk_leaves=leaves
            ),
            sinks=Sinks(findings=found),
        )
    assert [f.to_json() for f in by_run[2, 4]] == [f.to_json() for f in by_run[1, 4]]
    for found in by_run.values():
        assert {f.stream for f in found} == {f.stream for f in findings}


def test_the_cli_writes_every_finding_as_json_lines(
    node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rounds = _five_rounds(node)
    attacker = Attacker(node.app.store_url)
    try:  # the coin game is not installed for the CLI: checked here at level signatures
        for victim in (rounds[4], rounds[0]):
            _bad_signature(attacker, victim, _version_of(attacker, victim, Round.BetPlaced))
    finally:
        attacker.close()
    out = tmp_path / "findings.jsonl"
    code = main(["--store", node.app.store_url, "--keys", str(node.keys.path), "verify",
                 "--level", "signatures", "--findings", str(out)])  # fmt: skip
    printed = capsys.readouterr()
    assert code == 1
    records = [json.loads(line) for line in out.read_text().splitlines()]
    for record in records:
        jsonschema.validate(record, SCHEMA)
    # In log order, each with its position and stream.
    assert [(r["kind"], r["step"], r["stream"]) for r in records] == [
        ("altered", "4 envelopes", rounds[0]),
        ("altered", "4 envelopes", rounds[4]),
    ]
    assert records[0]["position"] < records[1]["position"]
    assert printed.out.startswith("FAILED: 2 findings (2 altered)")
    assert "NOT CHECKED at level signatures: steps 8 money" in printed.out
    # The first line on stderr is still the first finding, as before.
    assert printed.err.startswith(f"ledger: error: {records[0]['message']}")
    assert "Traceback" not in printed.err


def test_a_clean_store_writes_an_empty_findings_file(
    node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    casino = Casino(node.app, COIN_GAMES)
    casino.open_account(request_id="a", owner="alice", currency="EUR")
    node.checkpointer().catch_up()
    out = tmp_path / "findings.jsonl"
    code = main(["--store", node.app.store_url, "--keys", str(node.keys.path), "verify",
                 "--findings", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr()
    assert out.read_text() == ""
    assert capsys.readouterr().out.startswith("OK: ")


def test_a_findings_file_in_no_directory_is_bad_input(
    node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--store", node.app.store_url, "--keys", str(node.keys.path), "verify",
                 "--findings", str(tmp_path / "nowhere" / "f.jsonl")])  # fmt: skip
    assert code == 2
    assert "nowhere does not exist" in capsys.readouterr().err


def test_a_round_whose_game_is_missing_is_not_checked_unless_something_failed(
    node: Node,
) -> None:
    rounds = _five_rounds(node)
    findings = Findings()
    verify_store(node.app, node.keyring, VerifyOptions(games={}), sinks=Sinks(findings=findings))
    # No game installed: every round is not checked (its money and sources still are).
    assert {f.kind for f in findings} == {FindingKind.NOT_CHECKED}
    assert sorted(f.round_id for f in findings) == sorted(rounds)
    assert isinstance(findings.headline(), CannotReDeriveError)  # exit 3
    attacker = Attacker(node.app.store_url)
    try:
        _bad_signature(attacker, rounds[0], _version_of(attacker, rounds[0], Round.BetPlaced))
    finally:
        attacker.close()
    findings = Findings()
    verify_store(node.app, node.keyring, VerifyOptions(games={}), sinks=Sinks(findings=findings))
    headline = findings.headline()
    assert isinstance(headline, VerificationError) and headline.exit_code == 1
    assert sum(f.kind is FindingKind.NOT_CHECKED for f in findings) == 4  # round 1: altered


def _release_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("LEDGER_KEYS", "LEDGER_STORE", "LEDGER_ORIGIN", "LEDGER_NODE_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    target = tmp_path / "release"
    shutil.copytree(RELEASE_01, target)
    return target


def _faulty_rng_rounds(store: Path) -> set[str]:
    """Rounds with a FaultRecorded event, read with SQL alone."""
    attacker = Attacker(f"sqlite:///{store}")
    try:
        rows = attacker.sql(
            "SELECT originator_id FROM stored_events WHERE topic LIKE '%FaultRecorded'"
        )
    finally:
        attacker.close()
    from uuid import UUID

    return {str(UUID(str(r[0]))) for r in rows}


def test_a_release_01_store_lists_exactly_its_rng_rethrows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = _release_copy(tmp_path, monkeypatch)
    expected = _faulty_rng_rounds(copy / "ledger.db")
    assert len(expected) >= 5  # the fixture's 7 faulty RNG throws
    out = tmp_path / "findings.jsonl"
    code = main(
        [
            "--store",
            f"sqlite:///{copy / 'ledger.db'}",
            "--keys",
            str(copy / "keys"),
            "verify",
            "--trusted",
            str(copy / "kept.txt"),
            "--findings",
            str(out),
        ]
    )
    printed = capsys.readouterr()
    assert code == 1  # today's rules refuse them: a failure, classified
    records = [json.loads(line) for line in out.read_text().splitlines()]
    for record in records:
        jsonschema.validate(record, SCHEMA)
    assert {r["round"] for r in records} == expected
    assert len(records) == sum(1 for _ in records)  # one per faulty throw
    assert {(r["kind"], r["rule"], r["release"], r["step"]) for r in records} == {
        ("older-release", "rng-never-faulty", "0.1", "9 sources")
    }
    # Everything else was checked: every step reports, payouts included.
    assert "11 payouts: " in printed.out and "(listed above)" in printed.out
    assert printed.out.count("finding") >= 1
