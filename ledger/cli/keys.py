"""`ledger keys create|list`."""

from __future__ import annotations

import argparse
from typing import Any

from ledger.cli.args import int_range
from ledger.cli.common import passphrase_for
from ledger.crypto.keys import Role
from ledger.errors import KeyStoreError
from ledger.node import keys_dir


def cmd_keys_create(args: argparse.Namespace) -> int:
    directory = keys_dir(args.keys)
    if args.unencrypted and not args.yes_unencrypted:
        raise KeyStoreError("--unencrypted writes a plain private key: add --yes-unencrypted")
    record = directory.create(
        args.name, Role(args.role), passphrase_for(args, confirm=True), valid_days=args.valid_days
    )
    print(f"created {record.role.value} key {record.name} ({record.key_id}) in {directory.path}")
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    for record in keys_dir(args.keys).keyring():
        until = record.not_after.isoformat() if record.not_after else "no expiry"
        print(f"{record.key_id}  {record.role.value:<13} {record.name}  until {until}")
    return 0


def add_key_commands(commands: Any) -> None:
    keys = commands.add_parser("keys", help="create and list Ed25519 keys").add_subparsers(
        dest="keys_command", required=True
    )
    create = keys.add_parser("create", help="create a key pair with a role")
    create.add_argument("name")
    create.add_argument("--role", required=True, choices=[r.value for r in Role])
    create.add_argument(
        "--valid-days",
        type=int_range(1, 36_500),
        help="validity period, 1..36500 days (default: no expiry)",
    )
    create.add_argument("--unencrypted", action="store_true", help="write the key unencrypted")
    create.add_argument("--yes-unencrypted", action="store_true", help=argparse.SUPPRESS)
    create.set_defaults(handler=cmd_keys_create)
    keys.add_parser("list", help="list the keyring").set_defaults(handler=cmd_keys_list)
