"""Retention as policy (issue 40, item 2): the policy read strictly (malformed
or self-contradicting: one line, exit 2, nothing erased); what a policy makes
due, from the log; `apply` erasing it, each erasure operator-signed with the
policy in its reason, verify passing after; both stores."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino
from ledger.crypto.keys import Role
from ledger.erasure import erased_subjects
from ledger.errors import ConfigError
from ledger.node import Node
from ledger.plugins.manager import get_plugin_manager
from ledger.retention.plan import plan_retention
from ledger.retention.policy import load_policy
from tests.casino_support import event_count, seen
from tests.conftest import PASSPHRASE, ledger_cli
from tests.doc_pages import blocks, run_block, user_env

DOCS = Path(__file__).resolve().parents[2] / "docs"
LIMITS = {"min_bet": 10, "max_bet": 5_000, "max_round": 10_000}
POLICY = """format = "casino-ledger/retention/v1"
jurisdiction = "Testland"
source = "a test"

[game_records]
keep_years = 5

[personal_data]
erase_after_years = {erase}
keep_at_least_years = {floor}
"""


def policy_file(tmp_path: Path, erase: int = 5, floor: int = 0, name: str = "p.toml") -> Path:
    path = tmp_path / name
    path.write_text(POLICY.format(erase=erase, floor=floor))
    return path


def casino_with_a_closed_account(node: Node) -> tuple[Casino, str, str]:
    """(casino, a closed account, an open one); a round dealt by D1 between them."""
    casino = Casino(node.app, get_plugin_manager().games())
    gone = casino.open_account(request_id="a1", owner="Left Player", currency="EUR")
    stays = casino.open_account(request_id="a2", owner="Staying Player", currency="EUR")
    casino.deposit(request_id="d", account_id=stays, amount=1_000)
    table = casino.open_table(
        request_id="t", name="T1", game="taixiu", kind="physical", currency="EUR", limits=LIMITS
    )
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D1")
    casino.place_bet(
        request_id="b", round_id=round_id, account_id=stays, bet={"bet": "big"}, stake=100
    )
    casino.close_betting(request_id="c", round_id=round_id)
    dice = {"dice": [6, 5, 4]}
    source = seen(node, casino, round_id, dice)
    casino.record_outcome(request_id="o", round_id=round_id, outcome=dice, source=source)
    casino.close_account(request_id="x", account_id=gone, reason="left the casino")
    return casino, gone, stays


def test_every_example_policy_reads_and_the_page_runs(tmp_path: Path) -> None:
    for path in sorted((DOCS / "retention").glob("*.toml")):
        policy = load_policy(path)
        assert policy.erase_personal_after_years >= policy.keep_personal_at_least_years
    env = user_env("retention passphrase")
    outputs = [
        out
        for lang, body in blocks(DOCS / "retention.md")
        if (out := run_block(lang, body, tmp_path, env))
    ]
    first, refused = outputs[0].splitlines()
    assert first.startswith("policy: Denmark (policy ")
    assert "contradicts itself" in refused and "sooner than the 5 years" in refused


@pytest.mark.parametrize(
    "text, said",
    [
        ("not = [toml", "is not a retention policy (TOML)"),
        (POLICY.format(erase=5, floor=0) + "extra = 1\n", "unknown key 'extra'"),
        (POLICY.format(erase=5, floor=0).replace('source = "a test"\n', ""), "missing key"),
        (POLICY.format(erase=5.5, floor=0), "whole number of years"),
        (POLICY.format(erase=500, floor=0), "whole number of years"),
        (POLICY.format(erase=2, floor=6), "contradicts itself"),
        (POLICY.format(erase=5, floor=0).replace("v1", "v9"), "format must be"),
    ],
)
def test_a_bad_policy_is_one_line_and_erases_nothing(
    node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, said: str
) -> None:
    casino_with_a_closed_account(node)
    node.keys.create("operator-1", Role.OPERATOR, PASSPHRASE)
    path = tmp_path / "bad.toml"
    path.write_text(text)
    before = event_count(node.app)
    with ledger_cli(node.app.store_url, node.keys.path) as run:
        for command in ("plan", "apply"):
            capsys.readouterr()
            assert run("retention", command, "--policy", str(path)) == 2
            err = capsys.readouterr().err
            assert said in err and len(err.strip().splitlines()) == 1, err
    assert event_count(node.app) == before
    with pytest.raises(ConfigError):
        load_policy(path)


def test_the_plan_says_what_is_due_and_why(node: Node, tmp_path: Path) -> None:
    _, gone, _ = casino_with_a_closed_account(node)
    policy = load_policy(policy_file(tmp_path, erase=5))
    now = datetime.now(UTC)
    plan = plan_retention(node.app, policy, now)
    assert plan.due == [] and plan.ongoing == 1  # the open account
    assert {d.subject for d in plan.later} == {f"account-{gone}"} | {
        d.subject for d in plan.later if d.subject.startswith("dealer-")
    }
    assert len(plan.later) == 2  # the closed account and the dealer
    later = plan_retention(node.app, policy, now + timedelta(days=6 * 366))
    assert {d.ended for d in later.due} == {"account closed", "last round dealt"}
    assert later.rounds_past_keep == 1 and plan.rounds_kept == 1
    reason = later.due[0].reason(policy)
    assert "Testland" in reason and policy.sha256[:16] in reason and "Player" not in reason


def test_apply_erases_what_is_due_signed_and_verify_passes(
    node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    casino, gone, stays = casino_with_a_closed_account(node)
    node.keys.create("operator-1", Role.OPERATOR, PASSPHRASE)
    now = policy_file(tmp_path, erase=0)  # erased as the relationship ends
    with ledger_cli(node.app.store_url, node.keys.path) as run:
        capsys.readouterr()
        assert run("retention", "apply", "--policy", str(now)) == 0
        out = capsys.readouterr().out
        assert f"erased account-{gone}" in out and "2 subject(s) erased" in out
        assert run("retention", "apply", "--policy", str(now)) == 0  # nothing due twice
        assert "0 subject(s) erased" in capsys.readouterr().out
        assert run("events", "--significant", "--json") == 0
        significant = capsys.readouterr().out
    assert sum("retention policy Testland" in line for line in significant.splitlines()) == 2
    erased = erased_subjects(node.app)
    assert f"account-{gone}" in erased and f"account-{stays}" not in erased
    node.checkpointer().catch_up()
    report = verify_store(
        node.app,
        node.keys.keyring(),
        VerifyOptions(level=Level.SETTLEMENT, workers=1, games=get_plugin_manager().games()),
    )
    assert report.erasures == 2
    assert casino.account(stays).balance == 1_000 - 100 + 200  # money is never erased


ARCHIVE = "\n[archive]\nafter_days = {days}\n"


@pytest.mark.parametrize("days, said", [(-1, "after_days must be"), ("1", "after_days must be")])
def test_a_bad_archive_table_is_refused(tmp_path: Path, days: object, said: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(POLICY.format(erase=5, floor=0) + ARCHIVE.format(days=repr(days)))
    with pytest.raises(ConfigError, match=said):
        load_policy(path)
    path.write_text(POLICY.format(erase=5, floor=0) + "\n[archive]\nafter = 3\n")
    with pytest.raises(ConfigError, match="unknown key 'after'"):
        load_policy(path)


def test_apply_archives_the_rounds_the_policy_makes_due(
    node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    casino_with_a_closed_account(node)
    node.keys.create("operator-1", Role.OPERATOR, PASSPHRASE)
    node.checkpointer().catch_up()
    path = tmp_path / "p.toml"
    path.write_text(POLICY.format(erase=50, floor=0) + ARCHIVE.format(days=1))
    soon = plan_retention(node.app, load_policy(path), datetime.now(UTC))
    assert soon.rounds_to_archive == 0  # the round ended less than a day ago
    later = plan_retention(node.app, load_policy(path), datetime.now(UTC) + timedelta(days=2))
    assert later.rounds_to_archive == 1 and later.archive_before is not None
    with ledger_cli(node.app.store_url, node.keys.path) as run:
        capsys.readouterr()
        assert run("retention", "apply", "--policy", path) == 2  # where to? refused
        assert "--archive-to DIR" in capsys.readouterr().err
        assert run("retention", "plan", "--policy", path) == 0
        assert "0 finished round(s) last written before" in capsys.readouterr().out
    path.write_text(POLICY.format(erase=50, floor=0) + ARCHIVE.format(days=0))  # at once
    moved = tmp_path / "archive"
    with ledger_cli(node.app.store_url, node.keys.path) as run:
        capsys.readouterr()
        assert run("retention", "apply", "--policy", path, "--archive-to", moved) == 0
        assert "archived " in capsys.readouterr().out and (moved / "manifest.json").is_file()
        assert run("events", "--significant", "--json") == 0
        kinds = [json.loads(line)["kind"] for line in capsys.readouterr().out.splitlines()]
        assert "archive" in kinds
        assert run("verify", "--workers", 1, "--archive", moved) == 0
