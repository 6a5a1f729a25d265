"""The lists' cursors: where the next page starts, opaque to the caller.

A cursor holds the list it came from, a digest of the filters it was asked
with, and the key of the page's last row (`ledger.projections.pages.Key`),
as base64url JSON followed by a checksum of it. A cursor is not a secret and
grants nothing the caller could not ask for; the checksum is there so that a
mistyped, cut or edited cursor is refused (400) rather than read as another
position, and the list and filter digest so that one list's cursor, or one
asked with other filters, is refused instead of paging the wrong rows.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from ledger.errors import InvalidCommandError
from ledger.projections.pages import Key, Page

MAX_CURSOR = 512  # characters: a key is two short strings


def encode(list_name: str, filters: Mapping[str, object], key: Key) -> str:
    body = json.dumps(
        {"list": list_name, "filters": _digest(filters), "after": list(key)},
        separators=(",", ":"),
        sort_keys=True,
    ).encode()
    return f"{_b64(body)}.{_b64(_checksum(body))}"


def next_page(page: Page[Any], list_name: str, filters: Mapping[str, object]) -> str | None:
    """The cursor of the page after `page`; None when it is the last."""
    return None if page.last is None else encode(list_name, filters, page.last)


def decode(text: str | None, list_name: str, filters: Mapping[str, object]) -> Key | None:
    """The key a cursor of `list_name`, asked with `filters`, starts after (None:
    no cursor, the first page); InvalidCommandError when it is not such a cursor."""
    if text is None:
        return None
    refused = InvalidCommandError(
        f"cursor is not one GET /v1/{list_name} gave with these filters: ask for the first "
        "page again (no cursor)",
        code="invalid_cursor",
        param="cursor",
    )
    body_text, dot, checksum = text.partition(".")
    try:
        body = _unb64(body_text)
        if not dot or _unb64(checksum) != _checksum(body):
            raise refused
        found = json.loads(body)
    except (ValueError, binascii.Error, UnicodeError):
        raise refused from None
    if not isinstance(found, dict):
        raise refused
    after = found.get("after")
    if (
        found.get("list") != list_name
        or found.get("filters") != _digest(filters)
        or not isinstance(after, list)
        or len(after) != 2
        or not all(isinstance(part, str) for part in after)
    ):
        raise refused
    return (after[0], after[1])


def _digest(filters: Mapping[str, object]) -> str:
    given = {name: value for name, value in filters.items() if value is not None}
    text = json.dumps(given, separators=(",", ":"), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _checksum(body: bytes) -> bytes:
    return hashlib.sha256(b"casino-ledger/cursor/v1\n" + body).digest()[:12]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    if not text.isascii():
        raise ValueError("not base64")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
