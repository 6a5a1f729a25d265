"""A retention policy: one TOML file per jurisdiction (docs/retention.md).

    format = "casino-ledger/retention/v1"
    jurisdiction = "Denmark"
    source = "..."                      # where the numbers come from

    [game_records]
    keep_years = 5                      # after the round ended, at least

    [personal_data]
    erase_after_years = 5               # after the relationship ended
    keep_at_least_years = 5             # anti-money-laundering: never sooner

Read strictly: an unknown or missing key, a number that is not a whole number
of years in range, or a policy that contradicts itself (erasing personal data
sooner than it must be kept) is refused with one line, before anything is done.
"""

from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ledger.errors import ConfigError

FORMAT = "casino-ledger/retention/v1"
MAX_YEARS = 100
_TOP = {"format", "jurisdiction", "source", "game_records", "personal_data"}
_ARCHIVE = {"after_days"}  # the one optional table: finished rounds into the archive tier
MAX_DAYS = 36_500
_GAME = {"keep_years"}
_PERSONAL = {"erase_after_years", "keep_at_least_years"}


@dataclass(frozen=True)
class Policy:
    jurisdiction: str
    source: str
    keep_game_records_years: int
    erase_personal_after_years: int
    keep_personal_at_least_years: int
    sha256: str  # of the file's bytes: what an erasure's reason names
    # Finished rounds leave the live store for an archive this many days after
    # their last event (`ledger archive`); None: the policy archives nothing.
    archive_after_days: int | None = None

    def describe(self) -> str:
        return (
            f"{self.jurisdiction} (policy {self.sha256[:16]}): game records kept "
            f"{self.keep_game_records_years} years after a round ended; personal data erased "
            f"{self.erase_personal_after_years} years after the relationship ended"
            + (
                f" (kept at least {self.keep_personal_at_least_years})"
                if self.keep_personal_at_least_years
                else ""
            )
        )


def load_policy(path: Path) -> Policy:
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path} is not a retention policy (TOML): {exc}") from None
    where = f"{path}"
    archive = data.pop("archive", None)
    _keys(data, _TOP, where)
    if data["format"] != FORMAT:
        raise ConfigError(f"{where}: format must be {FORMAT!r}")
    for name in ("jurisdiction", "source"):
        if not isinstance(data[name], str) or not data[name].strip():
            raise ConfigError(f"{where}: {name} must be text")
    game, personal = data["game_records"], data["personal_data"]
    _keys(game, _GAME, f"{where} [game_records]")
    _keys(personal, _PERSONAL, f"{where} [personal_data]")
    keep = _years(game["keep_years"], f"{where} [game_records] keep_years", least=1)
    erase = _years(personal["erase_after_years"], f"{where} [personal_data] erase_after_years")
    floor = _years(personal["keep_at_least_years"], f"{where} [personal_data] keep_at_least_years")
    if erase < floor:
        raise ConfigError(
            f"{where} contradicts itself: personal data erased {erase} years after the "
            f"relationship ended, sooner than the {floor} years it must be kept"
        )
    after = None
    if archive is not None:
        _keys(archive, _ARCHIVE, f"{where} [archive]")
        after = archive["after_days"]
        if type(after) is not int or not 0 <= after <= MAX_DAYS:
            raise ConfigError(
                f"{where} [archive] after_days must be a whole number from 0 to {MAX_DAYS}"
            )
    sha = hashlib.sha256(raw).hexdigest()
    name, source = data["jurisdiction"].strip(), data["source"].strip()
    return Policy(name, source, keep, erase, floor, sha, after)


def _keys(table: Any, wanted: set[str], where: str) -> None:
    if not isinstance(table, dict):
        raise ConfigError(f"{where} is not a table")
    unknown, missing = set(table) - wanted, wanted - set(table)
    if unknown:
        raise ConfigError(f"{where}: unknown key {sorted(unknown)[0]!r}")
    if missing:
        raise ConfigError(f"{where}: missing key {sorted(missing)[0]!r}")


def _years(value: Any, where: str, least: int = 0) -> int:
    if type(value) is not int or not least <= value <= MAX_YEARS:
        raise ConfigError(f"{where} must be a whole number of years from {least} to {MAX_YEARS}")
    return value


def years_after(moment: datetime, years: int) -> datetime:
    """The same day and time `years` later (29 February: the 28th)."""
    try:
        return moment.replace(year=moment.year + years)
    except ValueError:
        return moment.replace(year=moment.year + years, day=28)
