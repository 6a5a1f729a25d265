"""`ledger seeds`: the RNG tables' committed seeds; `ledger seeds retire TABLE`
reveals one, so anyone can recompute every draw made with it.

A seed is revealed once no round draws from it any more. A session or a
server that stopped with a seed in use (killed, say) leaves it committed and
secret: its rounds are ended first (`ledger rounds void|resume`, then
`ledger rounds throw|act`), then the seed is retired from the RNG directory
that holds it (`rng-seeds` beside the keys, or `--rng-dir`).
"""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.cli.common import WithLedger
from ledger.errors import ConfigError

if TYPE_CHECKING:
    from ledger.casino.opened import Ledger
    from ledger.rng.server import RngServer


def rng_from_args(args: argparse.Namespace) -> RngServer:
    """The RNG directory's seeds (never created here: a missing one holds none)."""
    from ledger.crypto.keystore import keys_dir
    from ledger.rng.server import RngServer, default_rng_dir

    directory = Path(args.rng_dir) if args.rng_dir else default_rng_dir(keys_dir(args.keys).path)
    if directory.exists() and not directory.is_dir():
        raise ConfigError(f"--rng-dir {directory} is not a directory (RNG seeds are kept there)")
    if not directory.is_dir():
        raise ConfigError(
            f"no RNG directory {directory}: give the one that holds the seeds (--rng-dir)"
        )
    return RngServer(directory)


def cmd_seeds(args: argparse.Namespace) -> WithLedger:
    if args.seeds_command == "retire":
        rng = rng_from_args(args)

        def retire(ledger: Ledger) -> int:
            request_id = args.request_id or f"cli-retire-seed-{uuid.uuid4()}"
            seed_id = ledger.casino.retire_seed(request_id=request_id, table_id=args.table, rng=rng)
            print(f"revealed seed {seed_id} of table {args.table}: its draws can be recomputed")
            return 0

        return WithLedger(retire, writable=True)
    return WithLedger(_list_seeds)


def _list_seeds(ledger: Ledger) -> int:
    from ledger.cli.catch_up import catch_up
    from ledger.domain.game_table import GameTable
    from ledger.projections import queries

    node = ledger.node
    catch_up(node)
    print(f"{'TABLE':<36} {'NAME':<12} {'SEED IN USE':<16} ROUNDS THROWING FROM IT")
    for table_id, name in queries.tables(node.app):
        table: object = node.app.repository.get(uuid.UUID(table_id))
        if isinstance(table, GameTable) and table.active_seed is not None:
            print(f"{table_id:<36} {name:<12} {table.active_seed:<16} {table.rounds_in_play}")
    return 0


def add_seed_commands(commands: Any) -> None:
    seeds = commands.add_parser(
        "seeds", help="the RNG tables' seeds in use; `retire TABLE` reveals one"
    )
    seeds.set_defaults(handler=cmd_seeds, seeds_command=None)
    actions = seeds.add_subparsers(dest="seeds_command", metavar="{retire}")
    retire = actions.add_parser("retire", help="reveal a table's seed (no round may draw from it)")
    retire.add_argument("table", help="the table id (see `ledger seeds`)")
    retire.add_argument("--rng-dir", help="where its seed is kept (default: <keys>/../rng-seeds)")
    retire.add_argument("--request-id", help="idempotency key (default: a new one)")
    retire.set_defaults(handler=cmd_seeds)
