"""What a projection is: its proj_ tables, and what each event does to them.

A projection never reads the events itself and never commits: the runner
hands it each decoded (already verified) event inside the transaction that
will also move the projection's tracking position, so the rows and the
position are stored together or not at all.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

from ledger.errors import LedgerError
from ledger.projections.sql import Tx, check_table_name

Handler = Callable[[Any, Tx], None]
_PARENTHESES = re.compile(r"\([^)]*\)")
_CONSTRAINTS = frozenset({"primary", "unique", "check", "foreign", "constraint"})


class ProjectionError(LedgerError):
    """The projections are missing or out of step with the log (rebuild them)."""

    code = "projections_stale"


class Projection(ABC):
    """A read model rebuilt from the log; never the source of truth."""

    name: ClassVar[str]
    # Each proj_ table and its column definitions (portable SQL: TEXT, BIGINT,
    # INTEGER, PRIMARY KEY): the same text creates it on SQLite and PostgreSQL.
    tables: ClassVar[Mapping[str, str]]

    @abstractmethod
    def handlers(self) -> Mapping[type[Any], Handler]:
        """Per event class, what it does to the tables (inside the runner's transaction)."""

    def table_names(self) -> list[str]:
        return [check_table_name(table) for table in self.tables]

    def columns(self, table: str) -> set[str]:
        """The column names `tables` declares for `table` (constraints left out)."""
        definitions = _PARENTHESES.sub("", self.tables[table]).split(",")
        return {d.split()[0].lower() for d in definitions if d.strip()} - _CONSTRAINTS


def utc_text(moment: datetime) -> str:
    """A timestamp as stored in the projections: ISO 8601 in UTC, to the microsecond."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def utc_day(moment: datetime) -> str:
    return moment.astimezone(UTC).date().isoformat()
