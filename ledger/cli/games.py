"""`ledger games` (its older name an alias: `ledger.casino.aliases`) and `ledger paytable GAME`."""

from __future__ import annotations

import argparse
from typing import Any

from ledger.cli.common import loaded_plugins


def cmd_games(args: argparse.Namespace) -> int:
    games = loaded_plugins().games()
    if not games:
        print("no games installed (install a plugin package, e.g. plugins/taixiu)")
    for game in sorted(games.values(), key=lambda g: g.id):
        print(
            f"{game.id:<14} {game.plugin} {game.version}  "
            f"rules {game.rules_hash}  {len(game.bets)} bets  "
            f"settlement API {game.settlement_api}"
            + (f"  [{', '.join(sorted(game.capabilities))}]" if game.capabilities else "")
        )
    return 0


def cmd_paytable(args: argparse.Namespace) -> int:
    from ledger.domain.percent import percent
    from ledger.plugins.paytable import paytable

    game = loaded_plugins().game(args.game)
    lines = paytable(game)  # a game without an exact paytable is refused first
    print(f"{game.id} ({game.plugin} {game.version}, rules {game.rules_hash[:16]})")
    print(f"{'bet':<20} {'pays':<18} {'return':>16} {'':>10}")
    for line in lines:
        exact = line.theoretical_return
        print(
            f"{line.bet:<20} {line.pays:<18} {f'{exact.numerator}/{exact.denominator}':>16} "
            f"{percent(exact):>10}"
        )
    return 0


def add_game_commands(commands: Any) -> None:
    commands.add_parser(
        "games",
        aliases=["variants"],  # alias
        help="list the installed games (each a rules profile)",
    ).set_defaults(handler=cmd_games)
    table = commands.add_parser("paytable", help="a game's payouts and exact returns")
    table.add_argument("game")
    table.set_defaults(handler=cmd_paytable)
