"""Names people type (account owners, table names, reasons): bounded, printable.

They are recorded forever and shown by every report, so a megabyte of text or a
NUL, newline or escape sequence is refused at the door rather than stored.
"""

from __future__ import annotations

import unicodedata
from typing import Final

from ledger.errors import InvalidCommandError

MAX_NAME: Final = 200
MAX_TEXT: Final = 1000


def check_name(value: object, what: str = "name", *, limit: int = MAX_NAME) -> str:
    """1..limit characters, not only spaces, and no control or format characters."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidCommandError(f"{what} must be a non-empty text")
    if len(value) > limit:
        raise InvalidCommandError(f"{what} is {len(value)} characters long; the limit is {limit}")
    for position, char in enumerate(value):
        # Cc: NUL, newline, ESC...; Cf: bidi overrides and other invisible formatting.
        if unicodedata.category(char) in ("Cc", "Cf", "Cs"):
            raise InvalidCommandError(
                f"{what} holds a control character (U+{ord(char):04X}) at position {position}"
            )
    return value
