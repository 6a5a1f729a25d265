"""`ledger`: the command line for operators and auditors.

Every `LedgerError` becomes one line on stderr and a non-zero exit code
(1: verification failed; 2: bad input or setup); nothing else is caught.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import sys
from collections.abc import Sequence
from pathlib import Path

from eventsourcing.persistence import InterfaceError, OperationalError

from ledger.audit.verify import Level, verify_store
from ledger.cli.passphrase import read_passphrase
from ledger.cli.progress import progress_bar
from ledger.cli.projections import add_projection_commands
from ledger.cli.variants import add_variant_commands
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Role
from ledger.errors import ConfigError, KeyStoreError, LedgerError
from ledger.node import Node, keys_dir, open_node
from ledger.plugins.manager import get_plugin_manager
from ledger.store.application import probe_store
from ledger.store.config import describe, store_url


def _passphrase(args: argparse.Namespace, *, confirm: bool = False) -> bytes | None:
    return None if getattr(args, "unencrypted", False) else read_passphrase(confirm=confirm)


def _open(args: argparse.Namespace, *, writable: bool) -> Node:
    directory = keys_dir(args.keys)
    directory.keyring()  # fail on missing keys before asking for a passphrase
    passphrase = read_passphrase() if writable else None
    return open_node(args.store, args.keys, passphrase=passphrase, writable=writable)


def cmd_keys_create(args: argparse.Namespace) -> int:
    directory = keys_dir(args.keys)
    if args.unencrypted and not args.yes_unencrypted:
        raise KeyStoreError("--unencrypted writes a plain private key: add --yes-unencrypted")
    record = directory.create(
        args.name, Role(args.role), _passphrase(args, confirm=True), valid_days=args.valid_days
    )
    print(f"created {record.role.value} key {record.name} ({record.key_id}) in {directory.path}")
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    for record in keys_dir(args.keys).keyring():
        until = record.not_after.isoformat() if record.not_after else "no expiry"
        print(f"{record.key_id}  {record.role.value:<13} {record.name}  until {until}")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    """A casino session on the store, then checkpoint, projections, verify and a summary."""
    from ledger.casino import Casino
    from ledger.projections import ProjectionRunner
    from ledger.simulation import (
        SessionConfig,
        check_config,
        default_tables,
        dice_source,
        parse_seed,
        run_session,
        summary_lines,
    )

    # Bad input fails first: before keys are made or the store is touched.
    config = SessionConfig(
        tables=default_tables(args.tables),
        players=args.players,
        rounds=args.rounds,
        fault_rate=args.fault_rate,
        seed=secrets.randbelow(2**32) if args.seed is None else args.seed,
    )
    variants = get_plugin_manager().variants()
    check_config(config, variants)
    dice = dice_source(None if args.dice_seed is None else parse_seed(args.dice_seed))
    directory = keys_dir(args.keys)
    probe_store(store_url(args.store))  # an unusable store fails before keys are made
    if not directory.has_node_keys():
        passphrase = read_passphrase(confirm=True)
        for record in directory.create_node_keys(passphrase):
            print(f"created {record.role.value} key {record.name} in {directory.path}")
    node = _open(args, writable=True)
    try:
        # Load the checkpoint key before recording: a missing or unreadable
        # key must fail before anything touches the store.
        checkpointer = node.checkpointer()
        before, _ = node.app.tables.event_count()
        with progress_bar("playing", unit="round") as (advance, set_total):
            set_total(config.rounds)
            result = run_session(Casino(node.app, variants), variants, config, dice, advance)
        recorded = node.app.tables.event_count()[0] - before
        with progress_bar("checkpointing") as (advance, _):
            checkpoint = checkpointer.catch_up(progress=advance)
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
                level=Level.SETTLEMENT,
                variants=variants,
                progress=advance,
                on_total=set_total,
            )
        print(report.summary())
    finally:
        node.close()
    return 0


def cmd_checkpoint(args: argparse.Namespace) -> int:
    node = _open(args, writable=False)
    try:
        node.passphrase = read_passphrase()
        checkpointer = node.checkpointer()
        if args.follow:
            print("following the log (Ctrl-C to stop)", file=sys.stderr)
            with contextlib.suppress(KeyboardInterrupt):
                checkpointer.follow()
        with progress_bar("checkpointing") as (advance, _):
            checkpointer.catch_up(progress=advance)
        latest = node.app.tables.latest_checkpoint()
        if latest is None:
            print("the log is empty: nothing to checkpoint")
            return 0
        note = latest.to_note()
        if args.export:
            Path(args.export).write_text(note)
            print(f"wrote checkpoint of size {latest.size} to {args.export}")
        else:
            print(note, end="")
    finally:
        node.close()
    return 0


def _load_trusted(path: str | None) -> Checkpoint | None:
    if path is None:
        return None
    try:
        return Checkpoint.from_note(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read kept checkpoint {path}: {exc.strerror}") from exc


def cmd_verify(args: argparse.Namespace) -> int:
    level = Level.parse(args.level)
    trusted = _load_trusted(args.trusted)
    variants = get_plugin_manager().variants() if level is Level.SETTLEMENT else None
    node = _open(args, writable=False)
    try:
        with progress_bar("verifying") as (advance, set_total):
            report = verify_store(
                node.app,
                node.keyring,
                level=level,
                trusted=trusted,
                workers=args.workers,
                progress=advance,
                on_total=set_total,
                variants=variants,
            )
    finally:
        node.close()
    print(report.summary())
    return 0


def cmd_proof(args: argparse.Namespace) -> int:
    from ledger.audit.proofs import consistency_from, inclusion_of

    node = _open(args, writable=False)
    try:
        if args.kind == "inclusion":
            result = inclusion_of(node.app, args.stream, args.version)
        else:
            trusted = _load_trusted(args.since)
            assert trusted is not None
            result = consistency_from(node.app, trusted)
    finally:
        node.close()
    print(json.dumps(result, indent=2))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ledger", description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="store URL (default: $LEDGER_STORE or sqlite:///ledger.db)")
    parser.add_argument("--keys", help="keys directory (default: $LEDGER_KEYS or ./keys)")
    commands = parser.add_subparsers(dest="command", required=True)

    keys = commands.add_parser("keys", help="create and list Ed25519 keys").add_subparsers(
        dest="keys_command", required=True
    )
    create = keys.add_parser("create", help="create a key pair with a role")
    create.add_argument("name")
    create.add_argument("--role", required=True, choices=[r.value for r in Role])
    create.add_argument("--valid-days", type=int, help="validity period (default: no expiry)")
    create.add_argument("--unencrypted", action="store_true", help="write the key unencrypted")
    create.add_argument("--yes-unencrypted", action="store_true", help=argparse.SUPPRESS)
    create.set_defaults(handler=cmd_keys_create)
    keys.add_parser("list", help="list the keyring").set_defaults(handler=cmd_keys_list)

    simulate = commands.add_parser(
        "simulate", help="play a casino session on the store, checkpoint, verify, summarise"
    )
    simulate.add_argument("--rounds", type=int, default=300, help="rounds dealt (default 300)")
    simulate.add_argument("--players", type=int, default=40, help="players seated (default 40)")
    simulate.add_argument("--tables", type=int, default=4, help="tables (default 4)")
    simulate.add_argument(
        "--fault-rate", type=int, default=3, metavar="PERCENT", help="faulty throws (default 3)"
    )
    simulate.add_argument("--seed", type=int, help="seed of the players' choices (not the dice)")
    simulate.add_argument(
        "--dice-seed", metavar="HEX", help="a fixed 32-byte dice seed (tests and replays)"
    )
    simulate.set_defaults(handler=cmd_simulate)

    checkpoint = commands.add_parser("checkpoint", help="extend the Merkle log, sign a checkpoint")
    checkpoint.add_argument("--export", metavar="FILE", help="write the newest checkpoint here")
    checkpoint.add_argument("--follow", action="store_true", help="keep following the log")
    checkpoint.set_defaults(handler=cmd_checkpoint)

    verify = commands.add_parser("verify", help="verify the whole store")
    verify.add_argument(
        "--level", default=Level.SETTLEMENT.value, help="integrity | signatures | settlement"
    )
    verify.add_argument("--trusted", metavar="FILE", help="a checkpoint file kept from earlier")
    verify.add_argument("--workers", type=int, help="processes (default: all cores)")
    verify.set_defaults(handler=cmd_verify)

    proof = commands.add_parser("proof", help="inclusion or consistency proofs").add_subparsers(
        dest="kind", required=True
    )
    inclusion = proof.add_parser("inclusion", help="prove an event is in the log")
    inclusion.add_argument("stream")
    inclusion.add_argument("version", type=int)
    inclusion.set_defaults(handler=cmd_proof)
    consistency = proof.add_parser("consistency", help="prove the log only grew since a checkpoint")
    consistency.add_argument("--since", required=True, metavar="FILE")
    consistency.set_defaults(handler=cmd_proof)

    add_projection_commands(commands, _open)
    add_variant_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
    except LedgerError as exc:
        print(f"ledger: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except (OperationalError, InterfaceError) as exc:  # the store went away mid-command
        print(
            f"ledger: error: store unavailable: {str(exc).strip().splitlines()[0]}", file=sys.stderr
        )
        return 2
    except KeyboardInterrupt:
        print("ledger: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    raise SystemExit(main())
