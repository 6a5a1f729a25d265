"""The verifier is a checklist (issue 39, item 1): docs/auditing.md's numbered
list, the `Step` names every finding carries and the code that does each step
are one list, and `Verifier.run` calls its steps in that order."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ledger.audit.findings import Step
from ledger.audit.verify import CHECKLIST, Level, Verifier, VerifyOptions, verify_store
from ledger.casino import Casino
from ledger.node import Node
from tests.coin_game import COIN_GAMES
from tests.installed import installed_games

AUDITING = Path(__file__).resolve().parents[2] / "docs" / "auditing.md"
ITEM = re.compile(r"^(\d+)\. \*\*(.+?)\*\* \(`(.+?)`\)", re.MULTILINE)


def documented() -> list[tuple[int, str, str]]:
    text = AUDITING.read_text(encoding="utf-8")
    section = text.split("## What `verify` checks: the checklist", 1)[1].split("\n## ", 1)[0]
    return [(int(n), name, code) for n, name, code in ITEM.findall(section)]


def test_the_documented_checklist_is_the_code_s() -> None:
    in_code = [
        (step.number, step.value.split(" ", 1)[1], code.__qualname__) for step, code in CHECKLIST
    ]
    assert documented() == in_code
    assert [step for step, _ in CHECKLIST] == list(Step)  # every step, in order, once


def test_run_calls_the_steps_in_the_checklist_s_order(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    casino = Casino(node.app, COIN_GAMES)
    account = casino.open_account(request_id="a", owner="p", currency="EUR")
    casino.deposit(request_id="d", account_id=account, amount=500)
    node.checkpointer().catch_up()
    called: list[str] = []
    for _, code in CHECKLIST[:7]:  # the Verifier's own; 8-11 are the settlement audits'
        name = code.__name__
        original = getattr(Verifier, name)

        def traced(self: Verifier, *args: object, _name: str = name, _f: object = original) -> None:
            called.append(_name)
            _f(self, *args)  # type: ignore[operator]

        monkeypatch.setattr(Verifier, name, traced)
    report = verify_store(
        node.app,
        node.keyring,
        VerifyOptions(level=Level.SETTLEMENT, workers=1, games=installed_games()),
    )
    assert report.events > 0
    firsts = list(dict.fromkeys(called))  # each step's first call
    order = [code.__name__ for _, code in CHECKLIST[:7]]
    # Step 7 runs while the chunks are read: anywhere after step 3.
    assert [n for n in firsts if n != "proofs"] == [n for n in order if n != "proofs"]
    assert firsts.index("proofs") > firsts.index("recorded_runs")
