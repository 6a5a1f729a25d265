"""docs/history.md's examples run, in one empty directory, as a user types them:
the proof `ledger history` writes is checked by `ledger history --check` and by
the page's own checker, written from the page alone, which fails the proof with
a round removed, another account's event added or a stale head."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.doc_pages import blocks, run_block, user_env

PAGE = Path(__file__).resolve().parents[2] / "docs" / "history.md"


def test_every_runnable_block_of_the_history_page_runs(tmp_path: Path) -> None:
    env = user_env("history passphrase")
    outputs = [out for lang, body in blocks(PAGE) if (out := run_block(lang, body, tmp_path, env))]
    assert len(outputs) == 2
    made, checked = outputs[0].splitlines()
    assert "the last 3 rounds, 3 round(s), proven complete" in made
    assert checked == "checks"
    account, said = outputs[1].strip().split(": ")
    assert said.startswith("3 rounds, complete under checkpoint ")
    assert account in made

    checker = next(body for lang, body in blocks(PAGE) if lang == "python")
    honest = json.loads((tmp_path / "history.json").read_text())
    others = _another_accounts_event(tmp_path, env, honest["account"])
    removed, added, stale = (copy.deepcopy(honest) for _ in range(3))
    del removed["events"][1]
    added["events"].insert(1, others)
    stale["head"]["version"] -= 1
    for name, proof in (("removed", removed), ("added", added), ("stale", stale)):
        (tmp_path / "history.json").write_text(json.dumps(proof))
        done = subprocess.run(
            [sys.executable, "-c", checker], cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert done.returncode != 0, name
        assert "AssertionError" in done.stderr, (name, done.stderr)


def _another_accounts_event(directory: Path, env: dict[str, str], account: str) -> Any:
    listed = subprocess.run(
        ["ledger", "balances", "--json"], cwd=directory, env=env, capture_output=True, check=True
    )
    wallets = [
        b["account"].removeprefix("wallet:")
        for b in json.loads(listed.stdout)["balances"]
        if b["account"].startswith("wallet:") and account not in b["account"]
    ]
    shown = subprocess.run(
        ["ledger", "history", wallets[0], "--json"],
        cwd=directory,
        env=env,
        capture_output=True,
        check=True,
    )
    return json.loads(shown.stdout)["events"][0]
