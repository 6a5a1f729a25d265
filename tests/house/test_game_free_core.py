"""A game-free core (issue 20, item 1): `ledger/` imports no game plugin and
compares nothing with a game id. What the core needs of a game it asks through
the games contract (`ledger.games.api`: capabilities ``exact-paytable``,
``bet-families``, ``simulated-play``), so a new game needs no change here
(tests/games/test_fourth_game.py plays one). Read from the source, like
tests/house/test_layers.py: every file, lazy imports included."""

from __future__ import annotations

import ast
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ledger.plugins.manager import get_plugin_manager

ROOT = Path(__file__).resolve().parents[2]
LEDGER = ROOT / "ledger"


def plugin_packages() -> set[str]:
    """The top-level packages of every plugin distribution in the repository."""
    found = set()
    for folder in (ROOT / "plugins", ROOT / "tests" / "plugins"):
        for init in folder.glob("*/*/__init__.py"):
            found.add(init.parent.name)
    return found


def game_ids() -> set[str]:
    """Every game id the installed plugins register, and the test plugins'."""
    return set(get_plugin_manager().games()) | {"atlantic-city", "card-war", "bau-cua"}


def action_names() -> set[str]:
    """Every action a shipped game offers on the way through a round: each
    step's moves along the contract's seeded walks (issue 41, item 2)."""
    from ledger.plugins.rules_contract import legal_walk

    def args_for(game: Any, action: str) -> dict[str, Any]:
        return {"reason": "cocked"} if action == game.fault_action else {}

    found: set[str] = set()
    for game in get_plugin_manager().games().values():
        for seed in range(20):
            for _, _, step in legal_walk(game, random.Random(seed), args_for):
                found.update(a for offered in step["moves"].values() for a in offered)
    return found


def sources() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(LEDGER.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), str(path))


def imported(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module


def constants(node: ast.AST) -> Iterator[str]:
    """String constants an operand of a comparison stands for (a tuple, set or
    list of them included: `x in ("a", "b")`)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        yield node.value
    elif isinstance(node, ast.Tuple | ast.List | ast.Set):
        for element in node.elts:
            yield from constants(element)


def compared(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                for value in constants(operand):
                    yield node.lineno, value
        elif isinstance(node, ast.MatchValue):
            for value in constants(node.value):
                yield node.lineno, value


def test_the_plugins_and_games_are_found() -> None:
    # The checks below are only as good as these lists.
    assert {"ledger_taixiu", "ledger_xidach", "ledger_atlantic_city", "ledger_card_war"} <= (
        plugin_packages()
    )
    assert {"taixiu", "sicbo-void", "xidach", "xidach-house"} <= game_ids()


def test_the_core_imports_no_plugin() -> None:
    packages = plugin_packages()
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path, tree in sources()
        for line, module in imported(tree)
        if module.split(".")[0] in packages
    ]
    assert found == []


def test_the_core_compares_no_game_id() -> None:
    ids = game_ids()
    found = [
        f"{path.relative_to(ROOT)}:{line} compares with {value!r}"
        for path, tree in sources()
        for line, value in compared(tree)
        if value in ids
    ]
    assert found == []


def test_the_core_compares_no_action_name() -> None:
    """The core reads a game's close and fault from the game (`close_action`,
    `fault_action`); the one stored name a record keeps for a faulty draw is a
    named constant (`ledger.domain.stored_names.STORED_FAULT`), never a literal."""
    actions = action_names()
    assert {"close_betting", "fault", "throw", "deal", "hit", "stand"} <= actions
    found = [
        f"{path.relative_to(ROOT)}:{line} compares with {value!r}"
        for path, tree in sources()
        for line, value in compared(tree)
        # The command line's own words (`ledger rounds throw ROUND`) are not moves.
        if value in actions and LEDGER / "cli" not in path.parents
    ]
    assert found == []


def test_the_checks_see_a_comparison_and_an_import() -> None:
    # The walkers find what they look for (else the tests above pass on nothing).
    tree = ast.parse(
        "import ledger_xidach.rules\n"
        'if rules.get("game") == "xidach" or x in ("taixiu",):\n'
        "    pass"
    )
    assert [module for _, module in imported(tree)] == ["ledger_xidach.rules"]
    assert {value for _, value in compared(tree)} >= {"xidach", "taixiu"}
