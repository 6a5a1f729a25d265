"""The games installed here, for tests that verify at level settlement: the
audit layer loads no plugin itself (its caller hands it the games)."""

from __future__ import annotations

from collections.abc import Mapping

from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.registry import LoadedGame


def installed_games() -> Mapping[str, LoadedGame]:
    return get_plugin_manager().games()
