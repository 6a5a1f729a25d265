"""docs/tlog.md's examples run, in order, in one empty directory: the sh blocks
with the virtualenv's `ledger`, the python blocks with its interpreter, and the
first python block's output is the sample the page shows after it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "tlog.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def test_the_pages_examples_run(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    bin_dir = str(Path(sys.executable).parent)
    env |= {
        "LEDGER_PASSPHRASE": "tlog docs passphrase",
        "LEDGER_PROGRESS_INTERVAL": "off",
        "PATH": bin_dir + os.pathsep + env.get("PATH", ""),
    }
    blocks = FENCE.findall(PAGE.read_text())
    outputs = []
    ran = 0
    for number, (lang, body) in enumerate(blocks):
        if lang not in ("sh", "python"):
            continue
        command = ["sh", "-e", "-c", body] if lang == "sh" else [sys.executable, "-c", body]
        done = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, f"block {number} ({lang}):\n{body}\n{done.stderr}"
        outputs.append((number, lang, done.stdout))
        ran += 1
    assert ran == 5
    first_python = next(i for i, lang, _ in outputs if lang == "python")
    shown = blocks[first_python + 1]
    assert shown[0] == ""  # the sample output that follows it
    printed = dict((i, out) for i, _, out in outputs)[first_python]
    pattern = re.sub(r"[0-9]+", "[0-9]+", re.escape(shown[1]))  # the figures vary from run to run
    assert re.fullmatch(pattern, printed), (printed, shown[1])
    # Level 0 as published for the checkpoint's size (whatever the session's): a
    # full tile of 256 hashes per 256 entries, then a partial one of the rest.
    tiles = tmp_path / "tiles"
    size = int((tiles / "checkpoint").read_text().split("\n")[1])
    for index in range(size // 256):
        assert (tiles / "tile" / "0" / f"{index:03d}").stat().st_size == 256 * 32
    if size % 256:
        partial = tiles / "tile" / "0" / f"{size // 256:03d}.p" / str(size % 256)
        assert partial.stat().st_size == size % 256 * 32
    assert any(re.match(r" +\d+ C2SP tlog-proofs", out) for _, lang, out in outputs if lang == "sh")
