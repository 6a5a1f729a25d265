"""The tiles' checker written on Go's golang.org/x/mod/sumdb/tlog
(tests/go/tlogcheck), built once per session with Debian's Go and x/mod.

Missing Go skips its tests on a developer's machine and fails them under
CI=true (tools/bootstrap.py installs `golang-go golang-golang-x-mod-dev`)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

SOURCE = Path(__file__).parent / "go" / "tlogcheck"
GOPATH = Path("/usr/share/gocode")
TLOG = GOPATH / "src" / "golang.org" / "x" / "mod" / "sumdb" / "tlog"


def build_tlogcheck(workdir: Path) -> Path:
    """The built checker; skipped (failed under CI=true) without Go and x/mod."""
    go = shutil.which("go")
    if go is None or not TLOG.is_dir():
        missing = "Go and Debian's golang.org/x/mod (golang-go golang-golang-x-mod-dev)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{missing} needed by the tiles' interop test: not installed")
        pytest.skip(f"{missing} not installed")
    binary = workdir / "tlogcheck"
    env = {
        **os.environ,
        "GOPATH": str(GOPATH),
        "GO111MODULE": "off",
        "GOCACHE": str(workdir / "gocache"),
        "GOFLAGS": "",
    }
    built = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=SOURCE,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    return binary


def check_tlog_proof(binary: Path, proof: Path, vkey: str) -> subprocess.CompletedProcess[str]:
    command = [str(binary), "-proof", str(proof), "-vkey", vkey]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)


def run_tlogcheck(
    binary: Path,
    directory: Path,
    vkey: str,
    *,
    old: Path | None = None,
    sample: Sequence[int] = (),
    leaves: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    command = [str(binary), "-dir", str(directory), "-vkey", vkey]
    if leaves is not None:
        command += ["-leaves", str(leaves)]
    if old is not None:
        command += ["-old", str(old)]
    if sample:
        command += ["-sample", ",".join(map(str, sample))]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
