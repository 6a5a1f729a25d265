"""`ledger games` (its older name an alias: `ledger.casino.aliases`) and `ledger paytable GAME`."""

from __future__ import annotations

import argparse
from typing import Any

from ledger.cli.args import int_range
from ledger.cli.common import WithLedger, loaded_plugins
from ledger.cli.games_check import check_games_command


def cmd_games(args: argparse.Namespace) -> int | WithLedger:
    if args.action == "check":
        return check_games_command(args)
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
    games = commands.add_parser(
        "games",
        help="list the installed games (each a rules profile); `games check`: would this "
        "release strand or re-judge the store's recorded rounds?",
    )
    games.add_argument("action", nargs="?", choices=["check"], help=argparse.SUPPRESS)
    games.add_argument(
        "--sample",
        type=int_range(0, 1000),
        help="games check: settled rounds re-settled per pinned rules (default 3)",
    )
    games.set_defaults(handler=cmd_games)
    # The older name lists the games, as it always did (`games check` came after it).
    older = commands.add_parser("variants", help="ledger games's older name")  # alias
    older.set_defaults(handler=cmd_games, action=None)
    table = commands.add_parser("paytable", help="a game's payouts and exact returns")
    table.add_argument("game")
    table.set_defaults(handler=cmd_paytable)
