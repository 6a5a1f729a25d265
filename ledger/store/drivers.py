"""The PostgreSQL driver's exception classes, for code that only recognises them.

A psycopg (or psycopg_pool) exception can only exist in a process that has
imported psycopg, and a process on SQLite never does (ledger.store.pg_recorder
is imported only for a PostgreSQL store). So these classes are looked up among
the modules already imported: recognising a failure never imports the driver.
"""

from __future__ import annotations

import sys


def loaded_errors(*names: str) -> tuple[type[BaseException], ...]:
    """The exception classes named `module:Class` whose module is imported already."""
    found: list[type[BaseException]] = []
    for name in names:
        module_name, _, class_name = name.partition(":")
        module = sys.modules.get(module_name)
        cls = getattr(module, class_name, None) if module is not None else None
        if isinstance(cls, type) and issubclass(cls, BaseException):
            found.append(cls)
    return tuple(found)


def first_line(exc: BaseException) -> str:
    """A driver's error as one line (psycopg's run to several: the server's
    detail and hint), or its class's name when it says nothing."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
