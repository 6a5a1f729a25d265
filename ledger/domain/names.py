"""Names people type (account owners, table names, reasons): bounded, printable.

They are recorded forever and shown by every report, so a megabyte of text or a
NUL, newline or escape sequence is refused at the door rather than stored.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Final

from ledger.errors import InvalidCommandError

MAX_NAME: Final = 200
MAX_TEXT: Final = 1000

# A personal value as an event records it (an account's owner, a round's
# dealer; docs/privacy.md): sealed under its data subject's key, as
# {"sealed": ..., "subject": ...}; a store written before sealing holds it in
# clear, as a string.
PersonalValue = str | dict[str, str]


def check_name(
    value: object, what: str = "name", *, limit: int = MAX_NAME, param: str | None = None
) -> str:
    """1..limit characters, not only spaces, and no control or format characters
    (`param`: the field it was given in, for the error's `param`)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidCommandError(
            f"{what} must be a non-empty text", code="invalid_value", param=param
        )
    if len(value) > limit:
        raise InvalidCommandError(
            f"{what} is {len(value)} characters long; the limit is {limit}",
            code="invalid_value",
            param=param,
        )
    for position, char in enumerate(value):
        # Cc: NUL, newline, ESC...; Cf: bidi overrides and other invisible formatting.
        if unicodedata.category(char) in ("Cc", "Cf", "Cs"):
            raise InvalidCommandError(
                f"{what} holds a control character (U+{ord(char):04X}) at position {position}",
                code="invalid_value",
                param=param,
            )
    return value


def check_personal(value: object, what: str, *, param: str | None = None) -> PersonalValue:
    """A personal value: a name in clear (`check_name`), or a sealed one."""
    if isinstance(value, dict):
        if set(value) != {"sealed", "subject"} or not all(
            isinstance(v, str) and v for v in value.values()
        ):
            raise InvalidCommandError(
                f"{what} is neither a name nor a sealed value", code="invalid_value", param=param
            )
        return {"sealed": value["sealed"], "subject": value["subject"]}
    return check_name(value, what, param=param)


def personal_text(value: PersonalValue) -> str:
    """A personal value in a read model's text column: a sealed one as its JSON
    (never the clear value), one recorded in clear as it is."""
    if isinstance(value, dict):
        return json.dumps({"sealed": value["sealed"], "subject": value["subject"]})
    return value


def personal_from_text(text: str) -> PersonalValue:
    """`personal_text` read back."""
    if text.startswith('{"sealed": '):
        try:
            found = json.loads(text)
            return check_personal(found, "a stored personal value")
        except (ValueError, InvalidCommandError):
            pass
    return text
