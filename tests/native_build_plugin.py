"""A pytest plugin (`-p tests.native_build_plugin`): the C fast path the tests
call is the build at `$LEDGER_TEST_NATIVE`, not the one installed in place.

tests/audit/test_native_sanitized.py builds `ledger/crypto/_native.c` with
AddressSanitizer and UndefinedBehaviorSanitizer into a temporary directory
and runs the differential tests in a fresh interpreter with this plugin, so
every call into `ledger.crypto.native` reaches the sanitized code. Loaded
with `-p`, it runs before any conftest imports the ledger.
"""

from __future__ import annotations

import importlib.util
import os
import sys

BUILD = os.environ["LEDGER_TEST_NATIVE"]


def _load_native_from(path: str) -> None:
    if "ledger.crypto.native" in sys.modules:  # too late: it already holds the other build
        raise RuntimeError("ledger.crypto.native was imported before the plugin")
    import ledger.crypto  # the package only; its fast path is the one loaded below

    spec = importlib.util.spec_from_file_location("ledger.crypto._native", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"no extension module at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[spec.name] = module
    ledger.crypto._native = module  # type: ignore[attr-defined]
    from ledger.crypto.native import native

    if native is not module:
        raise RuntimeError(f"ledger.crypto.native is not the build at {path}")


_load_native_from(BUILD)


def pytest_report_header() -> str:
    """The parent test checks this line: the run really used that build."""
    from ledger.crypto.native import native

    return f"native fast path under test: {native.__file__}"
