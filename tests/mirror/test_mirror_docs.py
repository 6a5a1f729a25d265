"""docs/mirror.md's examples run, one after the other in one empty directory
(as tests/house/test_readme.py runs the reference pages'), and every test its
table of attacks names exists."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.house.test_readme import FENCE
from tests.ports import free_port

PAGE = Path(__file__).resolve().parents[2] / "docs" / "mirror.md"


def test_every_runnable_block_of_the_mirror_page_runs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env |= {
        "LEDGER_PASSPHRASE": "mirror passphrase",
        "LEDGER_PROGRESS_INTERVAL": "off",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    }
    ports = {"8790": str(free_port()), "8791": str(free_port())}  # beside other tests' servers
    outputs = []
    for lang, body in FENCE.findall(PAGE.read_text()):
        if lang != "sh":
            assert lang == "", lang
            continue
        for documented, used in ports.items():
            body = body.replace(documented, used)
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
    assert len(outputs) == 2
    first, later = re.findall(r"^mirror: \+(\d+) events, holding (\d+)", outputs[0], re.M)
    assert int(first[0]) == int(first[1]) > 0 and int(later[1]) == int(first[1]) + int(later[0])
    assert outputs[1].startswith("OK:") and "OK (bundle, the whole log)" in outputs[1]
    assert f"{later[1]} events under the copy's newest checkpoint" in outputs[1]


def test_every_attack_the_page_lists_is_a_test() -> None:
    named = re.findall(r"`(test_\w+)`", PAGE.read_text())
    source = (PAGE.parent.parent / "tests" / "mirror" / "test_mirror.py").read_text()
    assert len(named) >= 9
    for name in named:
        assert f"def {name}(" in source, name
