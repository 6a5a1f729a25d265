"""The shipped plugin passes the core's variant contract."""

from __future__ import annotations

from typing import Any, ClassVar

import ledger_taixiu.plugin

from ledger.plugins.contract import VariantContract


class TestTaixiuPluginContract(VariantContract):
    plugin: ClassVar[Any] = ledger_taixiu.plugin
    plugin_name = "casino-ledger-taixiu"
    outcomes: ClassVar[list[dict[str, list[int]]]] = [
        {"dice": [1, 2, 3]},
        {"dice": [6, 6, 6]},
        {"dice": [4, 4, 1]},
    ]
    invalid_outcomes: ClassVar[list[Any]] = [
        {"dice": [0, 2, 3]},
        {"dice": [1, 2]},
        {"dice": [1, 2, 3, 4]},
        {"dice": [1.0, 2, 3]},
        {},
    ]
