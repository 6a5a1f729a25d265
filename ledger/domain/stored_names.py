"""Stored names: what the ledger's records call things where that is not what
the code calls them now (docs/design.md, "Glossary").

A record is signed and kept for ever, so a name in it is never rewritten: an
event written before a class version renamed its fields keeps them, and is
*upcast* where it is read. This module is the one place that knows every such
name, so no reader spells an older one itself:

- `STORED_AS`: per event topic and class version, each payload key stored
  under an older name, and the name it has now. eventsourcing's upcasters
  (`Round.Opened.upcast_v2_v3`, `GameTable.Opened.upcast_v2_v3`) rename
  through `upcast`; the readers of raw stored payloads (the audit, the recall,
  the export and its bundle check) read through `current_names` (a whole
  payload) or `stored_key` (one field of one), and only for the opening
  events, the only ones renamed: a bet's event costs nothing more to read.
- Names inside signed bytes or hashed data, which keep their first spelling
  whatever the code calls the thing: a dealer device's signed report of a
  draw is the fact `"throw"` (its counter the key `"throw"`, dice and cards
  alike) and an action it attests by that report is recorded with
  `source["signed"] = "throw"`; a request's record fingerprints the game a
  table is opened with under the argument `"variant"` (`Casino.open_table`),
  so a retry of a request made before the rename gets its first answer.

The projections' read models are rebuilt from the events, not kept: their
columns say `game` (`ledger.projections.runner` rebuilds one built by an
earlier release), so none is a stored name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

#: The topics of the events whose payload keys were renamed (each one's
#: `get_topic`: tests/store/test_stored_names.py holds them to the classes).
ROUND_OPENED: Final = "ledger.domain.round:Round.Opened"
TABLE_OPENED: Final = "ledger.domain.game_table:GameTable.Opened"

# Versions 1 and 2 (every release before the rename) stored a round's game as
# `variant`, its version as `variant_version` and its committed seed (dice or
# cards) as `dice_seed`; a table's game as `variant`.
_ROUND_OPENED_V1_V2: Final = {
    "variant": "game",
    "variant_version": "game_version",
    "dice_seed": "seed_id",
}
_TABLE_OPENED_V1_V2: Final = {"variant": "game"}

#: (event topic, class version) -> {stored key: its name now}. A class version
#: not listed stores every key under its name now.
STORED_AS: Final[Mapping[tuple[str, int], Mapping[str, str]]] = {
    (ROUND_OPENED, 1): _ROUND_OPENED_V1_V2,
    (ROUND_OPENED, 2): _ROUND_OPENED_V1_V2,
    (TABLE_OPENED, 1): _TABLE_OPENED_V1_V2,
    (TABLE_OPENED, 2): _TABLE_OPENED_V1_V2,
}
#: The topics `STORED_AS` renames a payload of (a reader's quick test).
RENAMED_TOPICS: Final = frozenset(topic for topic, _ in STORED_AS)

#: A dealer device's signed report of a draw (`ledger.domain.signed_facts`):
#: the fact's `action`, and the key of the draw's counter in it and in a fault's.
THROW_FACT: Final = "throw"
#: `source["signed"]` of an action a dealer device attested by a draw report.
SIGNED_THROW: Final = THROW_FACT
#: The action name every faulty draw was stored under before a game declared
#: its own (`Game.fault_action`): a recorded action so named is a fault.
STORED_FAULT: Final = "fault"
#: `source["fault"]` (true): a faulty draw its game names otherwise, so a
#: reader with no game (the aggregate, the log scan) knows it as one.
FAULT_MARK: Final = "fault"
#: The argument `Casino.open_table`'s request record fingerprints the game under.
OPEN_TABLE_GAME_ARG: Final = "variant"


def is_fault(action: str, source: Mapping[str, Any]) -> bool:
    """Whether a recorded action is a faulty draw, read from the record alone."""
    return action == STORED_FAULT or source.get(FAULT_MARK) is True


def fault_marked(action: str, source: dict[str, Any]) -> dict[str, Any]:
    """The source of the game's fault as recorded: marked when its name is not
    the stored one (rounds recorded before keep their shape)."""
    return source if action == STORED_FAULT else {**source, FAULT_MARK: True}


def class_version_of(state: Mapping[str, Any]) -> int:
    """The class version a raw stored payload was written at: eventsourcing's
    mapper stores `class_version` only when it is above 1."""
    found = state.get("class_version", 1)
    return found if type(found) is int else 1


def current_names(topic: str, state: dict[str, Any]) -> dict[str, Any]:
    """A raw stored payload of `topic` under the names it has now: a new dict
    when its class version stored older names, else `state` itself. Reading it
    again changes nothing (a name now is never an older one)."""
    renamed = STORED_AS.get((topic, class_version_of(state)))
    if renamed is None:
        return state
    return {renamed.get(key, key): value for key, value in state.items()}


def stored_key(topic: str, class_version: object, name: str) -> str:
    """The key a payload of `topic` written at `class_version` (None: 1) holds
    the field called `name` now under."""
    version = class_version if type(class_version) is int else 1
    for stored, now in STORED_AS.get((topic, version), {}).items():
        if now == name:
            return stored
    return name


def upcast(topic: str, from_version: int, state: dict[str, Any]) -> None:
    """eventsourcing's upcaster of `topic` from `from_version`: the stored names
    renamed in place (the payload is the mapper's own copy)."""
    for stored, now in STORED_AS[(topic, from_version)].items():
        if stored in state:
            state[now] = state.pop(stored)
