"""A script of tools/ imported as a module by the tests that hold it (tools/
is not a package, and putting it on sys.path would change every later import
of the test process)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def tool(name: str) -> ModuleType:
    """tools/NAME.py, loaded under NAME."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
