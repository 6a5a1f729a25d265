"""Argument types that refuse out-of-range values before a command runs.

Each raises argparse.ArgumentTypeError, which the parser turns into one
`ledger: error:` line and exit code 2 (see ledger.cli.main.Parser).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from uuid import UUID

MAX_INT64 = 2**63 - 1  # the stores' integer columns and the seed's documented range


def int_range(low: int, high: int) -> Callable[[str], int]:
    """An int in low..high (inclusive)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low}..{high}, not {value}")
        return value

    parse.__name__ = "int"  # what argparse names in its own messages
    return parse


def seconds_range(low: float, high: float) -> Callable[[str], float]:
    """A number of seconds in low..high (inclusive): a time, never money."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not low <= value <= high:  # NaN fails this too
            raise argparse.ArgumentTypeError(f"must be {low:g}..{high:g} seconds, not {text}")
        return value

    parse.__name__ = "seconds"
    return parse


_DURATION = re.compile(r"([0-9]{1,9})(s|m|h|d)")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_DURATION = 366 * 86400  # a schedule longer than a year is a typo
SELF_VERIFY_DEFAULT = 86400  # GLI-19: at least every 24 hours


def duration_or_off(text: str) -> int:
    """A schedule's period in whole seconds ("30s", "15m", "24h", "1d"), or 0
    for "off"."""
    if text == "off":
        return 0
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration: a whole number and a unit, s, m, h or d "
            "(30s, 15m, 24h, 1d), or off"
        )
    seconds = int(match[1]) * _UNIT_SECONDS[match[2]]
    if not 1 <= seconds <= MAX_DURATION:
        raise argparse.ArgumentTypeError(f"{text!r}: give 1s..366d, or off")
    return seconds


duration_or_off.__name__ = "duration"


def uuid_text(text: str) -> str:
    """A stream or round id: a UUID, in its canonical lower-case form."""
    try:
        return str(UUID(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a UUID") from None


_PATH_SEGMENT = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@-]+")


def url_path_prefix(text: str) -> str:
    """A URL path a server answers under ("/witness", "/a/b"; "" or "/" for
    none), its trailing "/" dropped: `<prefix>/add-checkpoint` is then one
    path, as a log joins it to the prefix URL it was given."""
    if text in ("", "/"):
        return ""
    if not text.startswith("/"):
        raise argparse.ArgumentTypeError(
            f"{text!r} does not start with '/': a URL path, such as /{text.lstrip('/')}"
        )
    trimmed = text.rstrip("/")
    if not all(_PATH_SEGMENT.fullmatch(segment) for segment in trimmed.split("/")[1:]):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a URL path of plain segments (letters, digits and -._~!$&'()*+,;=:@"
            ", no empty segment, no space, '?', '#' or '%')"
        )
    return trimmed
