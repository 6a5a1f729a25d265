"""Running a page's examples as a user types them: each `sh` block with bash
(`-euo pipefail`), each `python` block with this virtualenv's interpreter, in
one directory, with the `ledger` of this virtualenv first on PATH, no LEDGER_*
setting but the passphrase, and no prompt. Shared by the pages' tests."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
RUN = {"sh": "sh", "bash": "sh", "console": "sh", "python": "python"}


def blocks(page: Path) -> list[tuple[str, str]]:
    """Every fenced block of `page`: (language, body)."""
    return FENCE.findall(page.read_text())


def user_env(passphrase: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    return env | {
        "LEDGER_PASSPHRASE": passphrase,
        "LEDGER_PROGRESS_INTERVAL": "off",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    }


def run_block(lang: str, body: str, cwd: Path, env: dict[str, str]) -> str | None:
    """The block's output once it ran and succeeded (no traceback); None for a
    block that is not a program (output shown, JSON, a diagram)."""
    kind = RUN.get(lang)
    if kind is None:
        return None
    command = (
        ["bash", "-euo", "pipefail", "-c", body] if kind == "sh" else [sys.executable, "-c", body]
    )
    done = subprocess.run(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"block failed:\n{body}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout
