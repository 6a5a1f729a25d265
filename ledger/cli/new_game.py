"""`ledger new-game NAME`: a working game plugin package in ./NAME, to change
into your own game (docs/game-reference.md, docs/tutorial-game.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def cmd_new_game(args: argparse.Namespace) -> int:
    from ledger.cli.common import loaded_plugins
    from ledger.plugins.template import names_for, write_package

    names_for(args.name)  # a bad name is refused before any plugin loads
    target = Path(args.name)
    names = write_package(args.name, target, loaded_plugins().games())
    print(
        f"wrote {target}/: game {names.name}, distribution {names.distribution}, "
        f"module {names.module}"
    )
    print(f'next: pip install -e "./{target}[test]" && pytest {target} && ledger games')
    return 0


def add_new_game_command(commands: Any) -> None:
    new_game = commands.add_parser(
        "new-game", help="write a working game plugin package to start a new game from"
    )
    new_game.add_argument(
        "name", metavar="NAME", help="game id and package name (my-dice), its directory ./NAME"
    )
    new_game.set_defaults(handler=cmd_new_game)
