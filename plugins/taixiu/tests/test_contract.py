"""The shipped plugin passes the core's games contract."""

from __future__ import annotations

from typing import Any, ClassVar

import ledger_taixiu.plugin

from ledger.plugins.contract import GameContract


class TestTaixiuPluginContract(GameContract):
    plugin: ClassVar[Any] = ledger_taixiu.plugin
    plugin_name = "casino-ledger-taixiu"
