"""docs/privacy.md's examples run, in one empty directory, as a user types them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.house.test_readme import FENCE

PAGE = Path(__file__).resolve().parents[2] / "docs" / "privacy.md"


def test_every_runnable_block_of_the_privacy_page_runs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env |= {
        "LEDGER_PASSPHRASE": "privacy passphrase",
        "LEDGER_PROGRESS_INTERVAL": "off",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    }
    outputs = []
    for lang, body in FENCE.findall(PAGE.read_text()):
        if lang != "sh":
            assert lang in ("", "json"), lang
            continue
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", body],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"block failed:\n{body}\n{done.stdout}\n{done.stderr}"
        assert "Traceback" not in done.stderr, done.stderr
        outputs.append(done.stdout)
    assert len(outputs) == 1
    first, second, owner, erasures, significant = outputs[0].splitlines()
    assert first.startswith("erased data subject account-") and "its key destroyed" in first
    assert second.startswith("erased data subject dealer-") and "its key destroyed" in second
    assert owner.split() == ["owner", "[erased]"]
    assert "2 erasures of personal data: operator signatures" in erasures
    assert significant == "2"
