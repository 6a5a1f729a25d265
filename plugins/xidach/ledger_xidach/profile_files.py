"""Profiles as files: the ones shipped with the plugin and an operator's own.

A profile file is one JSON object::

    {"id": "xidach-vip", "options": {"ace_rule": "any", "xi_dach_tens": true,
     "min_score": 15, "seats": 7, "win_pays": [1, 1], "xi_ban_pays": [2, 1],
     "xi_dach_pays": [3, 2], "dealer_bust_pays_all_at": 28}}

``id`` is the game id rounds record (lowercase letters and digits in
hyphen-separated words); ``options`` gives every option of `rules.OPTIONS`,
so a profile never changes because a default in the code did. The shipped
profiles are package data (``ledger_xidach/profiles/*.json``); an operator's
are every ``*.json`` in the directory ``$LEDGER_XIDACH_PROFILES`` names. A bad
file stops start-up with a `ConfigError` naming it.
"""

from __future__ import annotations

import json
import os
import re
import reprlib
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any, Final

from ledger.plugins import ConfigError
from ledger_xidach.rules import OPTIONS, XiDachRules

PROFILES_ENV: Final = "LEDGER_XIDACH_PROFILES"
MAX_ID: Final = 40
# Safe wherever a game id goes: a command line, a URL path, a report, a file name.
SAFE_ID: Final = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
SHAPE: Final = '{"id": "<game id>", "options": {...}}'


def parse_profile(data: bytes, source: str) -> tuple[str, XiDachRules]:
    """A profile file's game id and rules; a bad file is one line naming `source`."""
    try:
        return _parse(data)
    except ConfigError as exc:
        raise ConfigError(f"xì dách profile {source}: {exc}") from None


def _parse(data: bytes) -> tuple[str, XiDachRules]:
    try:
        text = data.decode("utf-8-sig")  # an editor's byte-order mark is harmless
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text") from None
    try:
        document = json.loads(text, object_pairs_hook=_object, parse_constant=_no_constant)
    except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
        raise ConfigError(f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ConfigError(f"a profile is {SHAPE}")
    unknown = sorted(set(document) - {"id", "options"})
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(unknown)}: a profile is {SHAPE}")
    for key in ("id", "options"):
        if key not in document:
            raise ConfigError(f"no {key}: a profile is {SHAPE}")
    game_id, options = document["id"], document["options"]
    if not (isinstance(game_id, str) and len(game_id) <= MAX_ID and SAFE_ID.fullmatch(game_id)):
        raise ConfigError(
            "id must be lowercase letters and digits in words joined by single hyphens, "
            f"at most {MAX_ID} characters: {reprlib.repr(game_id)}"
        )
    if not isinstance(options, dict):
        raise ConfigError(f"options must be an object: {reprlib.repr(options)}")
    missing = [name for name in OPTIONS if name not in options]
    if missing:
        raise ConfigError(f"missing option(s): {', '.join(missing)}")
    return game_id, XiDachRules.from_profile(options)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json keeps the last of two equal keys silently: an option given twice is a typo.
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ConfigError(f"key {reprlib.repr(key)} given twice")
        found[key] = value
    return found


def _no_constant(name: str) -> Any:
    raise ConfigError(f"not JSON: {name}")


def shipped_profiles() -> dict[str, XiDachRules]:
    """The profiles packaged with the plugin, by game id."""
    found: dict[str, XiDachRules] = {}
    directory = files("ledger_xidach") / "profiles"
    for entry in sorted(directory.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".json"):
            game_id, rules = parse_profile(
                entry.read_bytes(), f"ledger_xidach/profiles/{entry.name}"
            )
            if game_id in found:
                raise ConfigError(f"two shipped xì dách profiles are named {game_id}")
            found[game_id] = rules
    return dict(sorted(found.items()))


def operator_profiles(taken: Mapping[str, str]) -> dict[str, XiDachRules]:
    """The profiles in the directory `PROFILES_ENV` names (none when it is unset).

    `taken` maps each game id already in use to who provides it: a file
    claiming one of those, or another file's id, is refused.
    """
    setting = os.environ.get(PROFILES_ENV, "").strip()
    if not setting:
        return {}
    directory = Path(setting)
    try:
        # A typo in the setting must not silently load nothing.
        entries = sorted(directory.iterdir())
    except OSError as exc:
        raise ConfigError(f"{PROFILES_ENV}: cannot list {directory}: {exc.strerror}") from None
    owners = dict(taken)
    found: dict[str, XiDachRules] = {}
    for path in entries:
        # Dot files are editors' locks and backups, never profiles.
        if path.suffix != ".json" or path.name.startswith("."):
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"xì dách profile {path}: cannot read it: {exc.strerror}") from None
        game_id, rules = parse_profile(data, str(path))
        if game_id in owners:
            raise ConfigError(
                f"xì dách profile {path}: game id {game_id} is already {owners[game_id]}"
            )
        owners[game_id] = f"defined in {path}"
        found[game_id] = rules
    return found


PROFILES: Final = shipped_profiles()
# The seed as written: every win 1:1, minimum 16, aces by hand size.
XIDACH: Final = PROFILES["xidach"]
# A house variant, configured without code: lower minimum, richer naturals.
XIDACH_HOUSE: Final = PROFILES["xidach-house"]
