"""A node's scheduled self-verification (issue 40, item 5), without a server:
each run verifies what is new (everything the first time), is recorded in
the log as the node's own event and checked by `ledger verify` like an
auditor's run (an edited one is caught, on both stores), is listed by
`ledger events --significant` and `ledger report`, and a finding is said in
one line and left in the status the health endpoint reads."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from ledger.audit.record import passed_run, record_self_run
from ledger.audit.self_status import SelfStatus
from ledger.audit.self_verification import SelfRun, SelfVerifier, follow_schedule
from ledger.audit.significant import iter_significant
from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.audit.verify_state import STATE_FILE
from ledger.casino import Casino
from ledger.crypto.envelope import now_micros
from ledger.domain.audit_trail import AUDIT_TRAIL_ID, SELF_RECORDED_TOPIC
from ledger.errors import StoreUnavailableError, VerificationError
from ledger.node import Node, open_node
from tests.attacker import Attacker
from tests.casino_support import LIMITS, table_of
from tests.cli.test_cli_bad_input import assert_one_error_line
from tests.coin_game import coin_games
from tests.conftest import PASSPHRASE, ledger_cli
from tests.installed import installed_games
from tests.reproducible import reproducible_session
from tests.schemas import schema


def play(node: Node, n: int) -> None:
    """A wallet, a deposit and a round with a bet: events to verify."""
    casino = Casino(node.app, coin_games("1.0"))
    table = table_of(casino, "coin", LIMITS, name=f"T{n}", request_id=f"t{n}")
    player = casino.open_account(request_id=f"p{n}", owner=f"p{n}", currency="EUR")
    casino.deposit(request_id=f"d{n}", account_id=player, amount=1_000)
    round_id = casino.open_round(request_id=f"r{n}", table_id=table, dealer="D1")
    casino.place_bet(
        request_id=f"b{n}", round_id=round_id, account_id=player, bet={"on": "heads"}, stake=100
    )
    node.checkpointer().catch_up()


def verifier(node: Node, tmp_path: Path) -> SelfVerifier:
    return SelfVerifier(node.app, coin_games("1.0"), tmp_path / "state")


def test_each_run_is_recorded_resumed_and_listed(node: Node, tmp_path: Path) -> None:
    play(node, 1)
    checking = verifier(node, tmp_path)
    first = checking.run_once()
    assert first.finding is None and first.run["result"] == "passed"
    assert (tmp_path / "state" / STATE_FILE).is_file()  # the next run goes on from here
    play(node, 2)
    second = checking.run_once()
    assert second.finding is None and second.run["tree_size"] > first.run["tree_size"]
    # The second run's tree holds the first run's record: it was verified too.
    report = verify_store(node.app, node.keys.keyring(), VerifyOptions(level=Level.SIGNATURES))
    assert report.recorded_runs == 2
    runs = [e for e in iter_significant(node.app) if e.kind == "self-verification"]
    assert [e.details["tree_size"] for e in runs] == [
        first.run["tree_size"],
        second.run["tree_size"],
    ]
    assert runs[0].summary.startswith("self-verification by the node at level settlement: passed")
    assert "auditor_key_id" not in runs[0].details  # the node's own, not an auditor's


def test_a_finding_is_recorded_and_named_and_the_next_run_finds_it_again(
    node: Node, tmp_path: Path, store_url: str
) -> None:
    play(node, 1)
    checking = verifier(node, tmp_path)
    assert checking.run_once().finding is None
    attacker = Attacker(store_url)
    try:
        n, stream, version, _, state = attacker.rows()[4]
        attacker.set_state(stream, version, state[:-1] + b" ")
    finally:
        attacker.close()
    position = [row[0] for row in Attacker(store_url).rows()].index(n)
    for _ in range(2):  # no state saved by a run with a finding: found again
        found = checking.run_once()
        assert found.run["result"] == "failed" and found.run["root"] is None
        assert found.finding is not None and f"log position {position}" in found.finding
        assert found.findings >= 1 and found.run["counts"]["findings"] == found.findings
        assert found.run["message"] == found.finding


def test_an_edited_self_verification_run_fails_verify(
    node: Node, tmp_path: Path, store_url: str
) -> None:
    """An attacker with database rights turns a failed run into a passed one."""
    play(node, 1)
    run = verifier(node, tmp_path).run_once().run
    assert run["result"] == "passed"
    trail = node.app.tables.row_by_stream(str(AUDIT_TRAIL_ID), 2)
    assert trail is not None and trail[3] == SELF_RECORDED_TOPIC
    attacker = Attacker(store_url)
    try:
        _, stream, version, _, state = attacker.row(str(AUDIT_TRAIL_ID), 2)
        edited = state.replace(b'"passed"', b'"failed"')
        assert edited != state
        attacker.set_state(stream, version, edited)
    finally:
        attacker.close()
    with pytest.raises(VerificationError, match=r"audit trail: .*payload"):
        verify_store(node.app, node.keys.keyring(), VerifyOptions(level=Level.INTEGRITY))


def test_a_self_run_claiming_another_root_fails_verify(node: Node) -> None:
    """Its claims are held to the log like an auditor's run: its root at its size."""
    play(node, 1)
    report = verify_store(node.app, node.keys.keyring(), VerifyOptions(level=Level.SIGNATURES))
    run = passed_run(report, "fp", now_micros())
    run["root"] = "00" * 32
    record_self_run(node.app, run)
    with pytest.raises(VerificationError, match="recorded verification run"):
        verify_store(node.app, node.keys.keyring(), VerifyOptions(level=Level.SIGNATURES))


def test_the_schedule_runs_says_each_outcome_and_retries_a_run_it_could_not_make(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outcomes: list[SelfRun | Exception] = [
        SelfRun(
            {"result": "passed", "tree_size": 5, "level": "settlement", "verified_at": 1}, None, 0
        ),
        StoreUnavailableError("the store went away"),
        SelfRun(
            {"result": "failed", "tree_size": 7, "level": "settlement", "verified_at": 2},
            "stream x version 2: payload bytes do not match (log position 3)",
            1,
        ),
    ]
    made: list[int] = []

    def run_once() -> SelfRun:
        made.append(1)
        outcome = outcomes[len(made) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    status = SelfStatus(tmp_path / "status.json", 1)
    assert status.read() == {
        "every_seconds": 1,
        "last_run_at": None,
        "result": None,
        "tree_size": None,
        "finding": None,
    }
    caplog.set_level(logging.INFO, "ledger.self-verification")
    follow_schedule(run_once, 0.01, lambda: len(made) == 3, status, poll=0.001)
    said = [r.getMessage() for r in caplog.records]
    assert said[0] == "self-verification passed: 5 events at level settlement, recorded in the log"
    assert said[1] == "self-verification could not run: the store went away"
    assert said[2] == (
        "self-verification FAILED over 7 events: stream x version 2: payload bytes do not "
        "match (log position 3) (recorded in the log)"
    )
    last = status.read()
    assert (last["result"], last["tree_size"]) == ("failed", 7)
    assert last["finding"].endswith("(log position 3)")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["serve", "--self-verify-every", "5x"], "'5x' is not a duration"),
        (["serve", "--self-verify-every", "0s"], "give 1s..366d, or off"),
        (["serve", "--self-verify-every", "400d"], "give 1s..366d, or off"),
        (
            ["serve", "--self-verify-every", "1h", "--read-only"],
            "a --read-only node records nothing",
        ),
        (["checkpoint", "--self-verify-every", "1h"], "runs beside --follow"),
        (["checkpoint", "--follow", "--self-verify-every", "1.5h"], "is not a duration"),
    ],
)
def test_bad_schedules_are_one_line_and_exit_2(
    tmp_path: Path, args: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = f"sqlite:///{tmp_path}/ledger.db"
    with ledger_cli(store, tmp_path / "keys") as ledger:
        try:
            code = ledger(*args)
        except SystemExit as exc:  # (argparse's usage errors)
            code = exc.code
    assert code == 2
    assert said in assert_one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "ledger.db").exists() and not (tmp_path / "keys").exists()


def test_checkpoint_follow_without_the_node_key_refuses_a_schedule_asked_for(
    node: Node, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service = tmp_path / "service-keys"
    service.mkdir()
    (service / node.keys.keyring_path.name).write_bytes(node.keys.keyring_path.read_bytes())
    (service / "checkpoint.pem").write_bytes((node.keys.path / "checkpoint.pem").read_bytes())
    play(node, 1)
    with ledger_cli(store_url, service) as ledger:
        assert ledger("checkpoint", "--follow", "--self-verify-every", "1h") == 2
    assert "holds none" in assert_one_error_line(capsys.readouterr().err)


def test_events_significant_and_the_report_list_the_runs(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keys = tmp_path / "keys"
    with ledger_cli(store_url, keys) as ledger, reproducible_session(3) as seeds:
        assert ledger("simulate", "--rounds", "2", "--players", "2", "--tables", "1", *seeds) == 0
    node = open_node(store_url, str(keys), passphrase=PASSPHRASE, anchor_seconds=0)
    try:
        SelfVerifier(node.app, installed_games(), tmp_path / "state").run_once()
    finally:
        node.close()
    capsys.readouterr()
    page = tmp_path / "report.html"
    with ledger_cli(store_url, keys) as ledger:
        assert ledger("events", "--significant", "--json") == 0
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert ledger("report", str(page)) == 0
        assert ledger("export", str(tmp_path / "bundle")) == 0
    records = [json.loads(line) for line in (tmp_path / "bundle" / "events.jsonl").open()]
    (recorded,) = [r for r in records if r["type"] == "AuditTrail.SelfVerificationRecorded"]
    schema("payloads").validate(recorded)  # docs/schemas/payloads.json describes it
    (run,) = [line for line in lines if line["kind"] == "self-verification"]
    assert run["stream"] == str(AUDIT_TRAIL_ID) and run["details"]["result"] == "passed"
    text = page.read_text()
    assert "self-verification by the node at level settlement: passed" in text
    assert "newest self-verification" in text  # the status section quotes it
