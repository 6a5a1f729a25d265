"""Compiled bytecode, cached for the suite even where PYTHONDONTWRITEBYTECODE is set.

A run starts hundreds of Python processes (xdist workers, `ledger` commands,
`ledger serve` and its workers). With nothing cached each of them compiles
every module it imports, and each worker rewrites and compiles every test
module's asserts again: about 0.2 s of CPU a `ledger` command, 9 s a worker.
The cache goes under the virtualenv (ignored by git, made by the set-up), so
the working tree stays as clean as PYTHONDONTWRITEBYTECODE keeps it. Outside
a virtualenv nothing is changed.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PREFIX_ENV = "PYTHONPYCACHEPREFIX"


def use_bytecode_cache() -> None:
    """Cache bytecode in <venv>/pycache for this process and every one it starts."""
    if sys.prefix == sys.base_prefix:
        return
    prefix = os.environ.get(PREFIX_ENV) or str(Path(sys.prefix) / "pycache")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ[PREFIX_ENV] = prefix
    sys.dont_write_bytecode = False
    sys.pycache_prefix = prefix
