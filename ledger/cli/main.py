"""`ledger`: the command line for operators and auditors.

Every `LedgerError` becomes one line on stderr and a non-zero exit code
(1: verification failed; 2: bad input or setup); nothing else is caught.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
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
from ledger.domain.table import Table
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
    directory = keys_dir(args.keys)
    probe_store(store_url(args.store))  # an unusable store fails before keys are made
    if not directory.has_node_keys():
        passphrase = read_passphrase(confirm=True)
        for record in directory.create_node_keys(passphrase):
            print(f"created {record.role.value} key {record.name} in {directory.path}")
    node = _open(args, writable=True)
    rng = random.Random(args.seed)
    try:
        # Load the checkpoint key before recording: a missing or unreadable
        # key must fail before anything touches the store.
        checkpointer = node.checkpointer()
        recorded = 0
        with progress_bar("recording") as (advance, set_total):
            set_total(args.events)
            tables: list[Table] = []
            while recorded < args.events:
                if len(tables) < args.tables:
                    tables.append(Table(name=f"T{len(tables) + 1}", dealer=f"D{rng.randint(1, 9)}"))
                table = rng.choice(tables)
                for _ in range(9):
                    table.throw_dice([rng.randint(1, 6) for _ in range(3)])
                recordings = node.app.save(table)
                recorded += len(recordings)
                advance(len(recordings))
        with progress_bar("checkpointing") as (advance, _):
            checkpoint = checkpointer.catch_up(progress=advance)
        print(f"recorded {recorded} sealed events in {describe(node.app.store_url)}")
        if checkpoint:
            print(f"checkpoint: size {checkpoint.size}, root {checkpoint.root.hex()}")
        with progress_bar("verifying") as (advance, set_total):
            report = verify_store(node.app, node.keyring, progress=advance, on_total=set_total)
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

    simulate = commands.add_parser("simulate", help="record sealed events, checkpoint, verify")
    simulate.add_argument("--events", type=int, default=5000)
    simulate.add_argument("--tables", type=int, default=8)
    simulate.add_argument("--seed", type=int)
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
