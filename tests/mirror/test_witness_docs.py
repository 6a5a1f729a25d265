"""docs/witnesses.md's examples run, in order, in one empty directory (as
tests/house/test_readme.py runs the README's): a simulated casino, a witness served
over HTTP, a cosigned checkpoint, the auditor's policy check, and the
cosignature checked by hand."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.ports import free_port

PAGE = Path(__file__).resolve().parents[2] / "docs" / "witnesses.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def test_the_witness_page_runs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env |= {
        "LEDGER_PASSPHRASE": "docs passphrase",
        "LEDGER_PROGRESS_INTERVAL": "off",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    }
    port = str(free_port())
    outputs = []
    for lang, body in FENCE.findall(PAGE.read_text()):
        if lang == "sh":
            command = ["bash", "-euo", "pipefail", "-c", body.replace("8100", port)]
        elif lang == "python":
            command = [sys.executable, "-c", body]
        else:
            continue
        result = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
        )
        assert result.returncode == 0, f"block failed:\n{body}\n{result.stdout}\n{result.stderr}"
        assert "Traceback" not in result.stderr, result.stderr
        outputs.append(result.stdout)
    assert len(outputs) == 4
    assert outputs[1].strip().splitlines()[-1] == "2"  # the log's line and the witness's
    assert "1 of 1 witnesses cosigned it (quorum 1): valid: witness.example/w1+" in outputs[2]
    assert outputs[2].strip().endswith("no refused submission")
    assert outputs[3].startswith("cosigned by witness.example/w1 at ")
