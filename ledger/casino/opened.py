"""One way to open a ledger: from the settings, the node (store and keys), the
games the installed plugins provide and the Python API over both. The CLI,
the HTTP app, simulation and the tools all open a ledger through
`open_ledger`, so each reads the same settings the same way.

    with open_ledger(passphrase=b"...") as ledger:
        ledger.casino.open_account(request_id="acc-1", owner="Ann", currency="EUR")
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from types import TracebackType
from typing import TYPE_CHECKING

from ledger.erasure import finish_erasures
from ledger.node import Node, open_node
from ledger.plugins.manager import Plugins, get_plugin_manager
from ledger.plugins.registry import LoadedGame

if TYPE_CHECKING:
    from ledger.casino.facade import Casino


@dataclass
class Ledger:
    """An open ledger: its node, its installed games, its Python API. The
    plugins load when first asked for (a command that only reads the log never
    imports a game)."""

    node: Node
    given_plugins: Plugins | None = None

    @cached_property
    def plugins(self) -> Plugins:
        return self.given_plugins if self.given_plugins is not None else get_plugin_manager()

    @property
    def games(self) -> Mapping[str, LoadedGame]:
        """The installed games by id (loaded once, on first use)."""
        return self.plugins.games()

    @cached_property
    def casino(self) -> Casino:
        """The Python API (`ledger.casino.Casino`) over the node and the games,
        imported when first asked for: a command that only reads never builds it."""
        from ledger.casino.facade import Casino

        return Casino(self.node.app, self.games)

    def close(self) -> None:
        self.node.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def open_ledger(
    store: str | None = None,
    keys: str | None = None,
    *,
    passphrase: bytes | None = None,
    writable: bool = True,
    plugins: Plugins | None = None,
    anchor_seconds: float | None = None,
    anchor_events: int | None = None,
) -> Ledger:
    """Open the ledger the settings name: the store (`store`, else
    $LEDGER_STORE, else ./ledger.db), the keys (`keys`, else $LEDGER_KEYS,
    else ./keys), the installed plugins (`plugins`, else every one the
    allow/block settings admit); `writable`, `passphrase` and the anchor
    settings as `ledger.node.open_node` takes them."""
    node = open_node(
        store,
        keys,
        passphrase=passphrase,
        writable=writable,
        anchor_seconds=anchor_seconds,
        anchor_events=anchor_events,
    )
    personal = node.app.personal
    if writable and personal is not None and personal.has_vault():
        try:  # an erasure a crash cut short (its event recorded, its key not yet gone)
            finish_erasures(node.app, personal)
        except BaseException:
            node.close()
            raise
    return Ledger(node, plugins)
