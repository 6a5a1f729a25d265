"""`ledger simulate`: a casino session on the store, then checkpoint,
projections, verify and a summary."""

from __future__ import annotations

import argparse
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.cli.args import MAX_INT64, int_range
from ledger.cli.common import WithLedger, loaded_plugins
from ledger.cli.passphrase import read_passphrase
from ledger.cli.progress import progress_bar
from ledger.errors import ConfigError, KeyStoreError, LedgerError
from ledger.store.config import describe, store_url

if TYPE_CHECKING:
    from ledger.casino.opened import Ledger
    from ledger.devices import DealerDevice
    from ledger.node import Node


def cmd_simulate(args: argparse.Namespace) -> WithLedger:
    """A casino session on the store, then checkpoint, projections, verify and a summary."""
    from ledger.crypto.keystore import keys_dir
    from ledger.node import refuse_new_keys_beside_events
    from ledger.rng.server import default_rng_dir
    from ledger.simulation import (
        SessionConfig,
        check_config,
        default_tables,
        dice_source,
        parse_seed,
    )
    from ledger.simulation.config import DEFAULT_GAMES, DEFAULT_TURN_GAME, table_prefix
    from ledger.store.application import probe_store

    # Bad input fails first: before keys are made or the store is touched.
    plugins = loaded_plugins()
    games = plugins.games()
    floor: tuple[tuple[str, str], ...] = DEFAULT_GAMES
    if args.game:
        taken: set[str] = set()
        chosen = []
        for game_id in dict.fromkeys(args.game):
            prefix = table_prefix(game_id, taken)
            taken.add(prefix)
            chosen.append((game_id, prefix))
        floor = tuple(chosen)
    # The default floor's turn tables beside it, when their game is installed.
    card_tables = args.card_tables
    if card_tables is None:
        card_tables = 2 if not args.game and DEFAULT_TURN_GAME[0] in games else 0
    config = SessionConfig(
        tables=default_tables(args.tables, card_tables, floor),
        players=args.players,
        rounds=args.rounds,
        fault_rate=args.fault_rate,
        seed=secrets.randbelow(2**32) if args.seed is None else args.seed,
    )
    check_config(config, games)
    directory = keys_dir(args.keys)
    rng_dir = Path(args.rng_dir) if args.rng_dir else default_rng_dir(directory.path)
    if rng_dir.exists() and not rng_dir.is_dir():
        raise ConfigError(f"--rng-dir {rng_dir} is not a directory (RNG seeds are kept there)")
    session_seed = None if args.rng_seed is None else parse_seed(args.rng_seed)
    dice = dice_source(session_seed, keep_in=rng_dir)
    probe_store(store_url(args.store))  # an unusable store fails before keys are made
    if not directory.has_node_keys():
        refuse_new_keys_beside_events(args.store, directory)
        passphrase = read_passphrase(confirm=True)
        for record in directory.create_node_keys(passphrase):
            print(f"created {record.role.value} key {record.name} in {directory.path}")

    def run(ledger: Ledger) -> int:
        before, _ = ledger.node.app.tables.event_count()
        try:
            _session(args, ledger, before, config, dice)
        except LedgerError as exc:  # mid-session (the keys vanished, the store went away)
            cause = exc
            if not directory.keyring_path.exists():  # not "create keys": they would not fit
                cause = KeyStoreError(
                    f"the keys directory {directory.path} lost its keyring during the session: "
                    "restore it (new keys cannot sign for this store)"
                )
            raise SessionStopped(cause, _after(args.store, before)) from exc
        return 0

    return WithLedger(run, writable=True, plugins=plugins)


class SessionStopped(LedgerError):
    """What stopped a session, with what it left: the events it recorded (sealed,
    kept) and where to find the rounds it left open."""

    def __init__(self, cause: LedgerError, left: str) -> None:
        super().__init__(f"{cause}; {left}", code=cause.code, param=cause.param)
        self.exit_code = cause.exit_code


def _after(store: str | None, before: int) -> str:
    """What a stopped session left in the store, read afresh (no keys needed)."""
    from ledger.crypto.keys import Keyring
    from ledger.store.application import LedgerApplication

    try:
        app = LedgerApplication(store_url(store), keyring=Keyring(), create=False)
        try:
            events = app.tables.event_count()[0]
            newest = app.tables.newest_checkpoint_row()
        finally:
            app.close()
    except LedgerError:
        return "the store cannot be read now: run `ledger verify` once it can"
    try:
        covered = int(str(newest[0])) if newest is not None else 0  # a hint, for words only
    except (TypeError, ValueError):
        covered = 0
    unsigned = (
        f", the {events - covered:,} newest not yet under a checkpoint (`ledger checkpoint`)"
        if events > covered
        else ""
    )
    return (
        f"the session had recorded {events - before:,} events, sealed and kept{unsigned}; "
        "`ledger rounds --open` lists the rounds it left open, "
        "`ledger rounds void|resume` ends them"
    )


def _session(
    args: argparse.Namespace,
    ledger: Ledger,
    before: int,
    config: Any,
    dice: Any,
) -> None:
    from ledger.audit.games.recorded_games import games_of_store
    from ledger.audit.proofs import newest_checkpoint
    from ledger.audit.verify import Level, Sinks, VerifyOptions, verify_store
    from ledger.projections import ProjectionRunner
    from ledger.simulation import run_session, summary_lines

    node, games = ledger.node, ledger.games
    try:
        # Load the checkpoint key before recording: a missing or unreadable
        # key must fail before anything touches the store.
        checkpointer = node.checkpointer()
        device = _dealer_device(node)

        def events() -> str:
            return f"{node.app.tables.event_count()[0] - before:,} events"

        # Say what is played on: --tables, then --card-tables.
        counts: dict[str, int] = {}
        for spec in config.tables:
            counts[spec.game] = counts.get(spec.game, 0) + 1
        print(
            f"playing {config.rounds:,} rounds on "
            + ", ".join(f"{n} {game} table{'s' * (n != 1)}" for game, n in counts.items())
        )
        with progress_bar("playing", unit="round", detail=events) as (advance, set_total):
            set_total(config.rounds)
            result = run_session(ledger.casino, games, config, dice, advance, device)
        recorded = node.app.tables.event_count()[0] - before
        with progress_bar("checkpointing") as (advance, _):
            # The node's anchor may have covered everything already.
            checkpoint = checkpointer.catch_up(progress=advance) or newest_checkpoint(
                node.app, node.keyring
            )
        print(f"recorded {recorded} sealed events in {describe(node.app.store_url)}")
        if checkpoint:
            print(f"checkpoint: size {checkpoint.size}, root {checkpoint.root.hex()}")
        runner = ProjectionRunner(node.app)
        with progress_bar("projecting") as (advance, _):
            runner.catch_up(progress=advance)
        print(f"projections up to date at notification {min(runner.positions().values())}")
        print("\n".join(summary_lines(result)))
        with progress_bar("verifying") as (advance, set_total):
            report = verify_store(
                node.app,
                node.keyring,
                # Each round with the rules it pinned, an earlier release's included.
                VerifyOptions(
                    level=Level.SETTLEMENT,
                    games=games_of_store(node.app, games, ledger.plugins.game_from_rules),
                ),
                sinks=Sinks(progress=advance, on_total=set_total),
            )
        print(report.summary())
    finally:
        ledger.close()


def _dealer_device(node: Node) -> DealerDevice:
    """The physical tables' simulated dealer device, its key made on first use."""
    from ledger.simulation.device import DEVICE_KEY, simulated_device

    made = not any(record.name == DEVICE_KEY for record in node.keys.keyring())
    device = simulated_device(node.keys, node.passphrase)
    if made:
        print(f"created dealer-device key {DEVICE_KEY} in {node.keys.path}")
        node.keyring = node.keys.keyring()  # so the verify below knows it
    return device


def add_simulate_command(commands: Any) -> None:
    simulate = commands.add_parser(
        "simulate", help="play a casino session on the store, checkpoint, verify, summarise"
    )
    simulate.add_argument(
        "--rng-dir", help="where the RNG tables' seeds are kept (default: <keys>/../rng-seeds)"
    )
    simulate.add_argument("--rounds", type=int, default=300, help="rounds dealt (default 300)")
    simulate.add_argument("--players", type=int, default=40, help="players seated (default 40)")
    simulate.add_argument(
        "--game",
        action="append",
        metavar="GAME",
        help="play tables of this installed game (repeatable; default: taixiu and sicbo-void, "
        "then xidach's --card-tables)",
    )
    simulate.add_argument(
        "--tables",
        type=int,
        default=4,
        help="tables of the --game games in turn (default 4: taixiu and sicbo-void)",
    )
    simulate.add_argument(
        "--card-tables",
        type=int,
        default=None,
        help="tables of xidach, RNG and physical in turn, after --tables "
        "(default 2 when it is installed and no --game is given)",
    )
    simulate.add_argument(
        "--fault-rate",
        type=int,
        default=3,
        metavar="PERCENT",
        help="faulty draws at physical one-draw tables (default 3)",
    )
    simulate.add_argument(
        "--seed",
        type=int_range(0, MAX_INT64),
        help="seed of the players' choices (not the dice), 0..2**63-1",
    )
    simulate.add_argument(
        "--rng-seed",
        metavar="HEX",
        help="a fixed 32-byte session seed, every RNG table's seed derived from it "
        "(tests and replays)",
    )
    simulate.add_argument(
        "--dice-seed",  # alias
        dest="rng_seed",
        metavar="HEX",
        help=argparse.SUPPRESS,  # an alias (ledger.casino.aliases)
    )
    simulate.set_defaults(handler=cmd_simulate)
