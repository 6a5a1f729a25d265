#!/usr/bin/env python3
"""Set up the project on a machine that has only Python, then run one job.

    python3 tools/bootstrap.py simulate [ARGS]   # set up, then `ledger simulate`
    python3 tools/bootstrap.py test [ARGS]       # set up, then the whole test suite (pytest)
    python3 tools/bootstrap.py setup             # set up only

Setting up = a virtualenv in .venv with the core package, its development
tools and every variant plugin under plugins/, installed editable. It is
redone only when a pyproject.toml changed since the last time.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
STAMP = VENV / ".bootstrap-stamp"


def plugin_dirs() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))


def fingerprint() -> str:
    digest = hashlib.sha256()
    for path in [ROOT / "pyproject.toml", *(p / "pyproject.toml" for p in plugin_dirs())]:
        digest.update(str(path.relative_to(ROOT)).encode() + path.read_bytes())
    return digest.hexdigest()


def setup() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        print("bootstrap: creating .venv", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)
    wanted = fingerprint()
    if not STAMP.exists() or STAMP.read_text() != wanted:
        print("bootstrap: installing the ledger and its plugins", file=sys.stderr)
        packages = ["-e", f"{ROOT}[dev]"]
        for plugin in plugin_dirs():
            packages += ["-e", str(plugin)]
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                *packages,
            ],
            check=True,
        )
        STAMP.write_text(wanted)
    return python


def main(argv: list[str]) -> int:
    job, *rest = argv or ["setup"]
    python = setup()
    if job == "setup":
        return 0
    if job == "simulate":
        command = [str(VENV / "bin" / "ledger"), "simulate", *rest]
    elif job == "test":
        command = [str(python), "-m", "pytest", *rest]
    else:
        print(f"bootstrap: unknown job {job!r} (simulate, test or setup)", file=sys.stderr)
        return 2
    os.chdir(ROOT)
    os.execv(command[0], command)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
