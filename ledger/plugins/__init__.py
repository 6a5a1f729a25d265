"""Games as pluggy plugins.

One distinctive name for the markers and the entry-point group, so our hooks
never mix with another pluggy host's: ``casino_ledger``. A plugin package
declares ``[project.entry-points.casino_ledger]`` and implements hooks
prefixed ``ledger_`` with ``@hookimpl``.
"""

from __future__ import annotations

from typing import Final

import pluggy

PROJECT_NAME: Final = "casino_ledger"
ENTRY_POINT_GROUP: Final = PROJECT_NAME

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)
