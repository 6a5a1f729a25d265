"""`ledger keys create|list|use|revoke`."""

from __future__ import annotations

import argparse
import contextlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ledger.cli.args import int_range
from ledger.cli.common import WithLedger, passphrase_for
from ledger.cli.passphrase import read_passphrase
from ledger.crypto.roles import Role
from ledger.errors import KeyStoreError

if TYPE_CHECKING:
    from ledger.casino.opened import Ledger
    from ledger.crypto.keys import PublicKeyRecord


def cmd_keys_create(args: argparse.Namespace) -> int:
    from ledger.crypto.keystore import keys_dir

    directory = keys_dir(args.keys)
    if args.unencrypted and not args.yes_unencrypted:
        raise KeyStoreError("--unencrypted writes a plain private key: add --yes-unencrypted")
    record = directory.create(
        args.name, Role(args.role), passphrase_for(args, confirm=True), valid_days=args.valid_days
    )
    print(f"created {record.role.value} key {record.name} ({record.key_id}) in {directory.path}")
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    """Every key; `[signs now]` marks the key each role signs with (none when ambiguous).
    A checkpoint key also shows its C2SP note verifier key (`name+hash+base64`),
    the form any signed-note tool takes to check our checkpoints."""
    from ledger.crypto.keys import to_micros
    from ledger.crypto.keystore import keys_dir
    from ledger.crypto.validity import key_problem

    directory = keys_dir(args.keys)
    keyring = directory.keyring()
    signing: dict[Role, str] = {}
    for role in Role:
        # No mark when no usable private key of the role is here, or the choice is ambiguous.
        with contextlib.suppress(KeyStoreError):
            signing[role] = directory.choose(role).key_id
    now = datetime.now(UTC)
    for record in keyring:
        until = record.not_after.isoformat() if record.not_after else "no expiry"
        line = f"{record.key_id}  {record.role.value:<13} {record.name}  until {until}"
        if record.role is Role.CHECKPOINT:
            line += f"  verifier-key {_verifier_key(record)}"
        elif record.role is Role.WITNESS:  # under its key name; `ledger witness key` uses its own
            line += f"  witness-key {_witness_key(record)}"
        if record.revoked_at is not None:
            line += f"  revoked {record.revoked_at.isoformat()} ({record.revocation_reason})"
        elif key_problem(record, to_micros(now)) is not None:
            line += "  not valid now"
        if signing.get(record.role) == record.key_id:
            line += "  [signs now]"
        print(line)
    return 0


def _witness_key(record: PublicKeyRecord) -> str:
    from ledger.crypto.cosignature import cosigner_verifier_key
    from ledger.crypto.note import NoteError

    try:
        return cosigner_verifier_key(record.name, record.public_key)
    except NoteError:
        return "none (its name cannot appear in a signed note)"


def _verifier_key(record: PublicKeyRecord) -> str:
    from ledger.crypto.note import NoteError, verifier_key

    try:
        return verifier_key(record.name, record.public_key)
    except NoteError:
        return "none (its name cannot appear in a signed note)"


def cmd_keys_use(args: argparse.Namespace) -> int:
    from ledger.crypto.keystore import keys_dir

    record = keys_dir(args.keys).use(args.name)
    print(f"{record.role.value} signing key is now {record.name} ({record.key_id})")
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> WithLedger:
    from ledger.crypto.envelope import now_micros
    from ledger.crypto.keystore import keys_dir
    from ledger.revocation import revoke_key

    directory = keys_dir(args.keys)
    passphrase = read_passphrase()
    operator = directory.signer(Role.OPERATOR, passphrase, args.operator_key)

    def run(ledger: Ledger) -> int:
        node = ledger.node
        if node.anchor is not None:
            # Everything signed so far under a checkpoint issued before the
            # revocation: what the key signed until now stays valid (verify
            # trusts a revoked key's signatures only under such a checkpoint).
            node.checkpointer().catch_up()
        record = revoke_key(node.app, directory, args.key, args.reason, operator, now_micros())
        assert record.revoked_at is not None
        print(
            f"revoked {record.role.value} key {record.name} ({record.key_id}) "
            f"from {record.revoked_at.isoformat()}: recorded in the log and the keyring"
        )
        return 0

    return WithLedger(run, writable=True, passphrase=passphrase)


def add_key_commands(commands: Any) -> None:
    keys = commands.add_parser(
        "keys", help="create, list, choose and revoke Ed25519 keys"
    ).add_subparsers(dest="keys_command", required=True)
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
    keys.add_parser("list", help="list the keyring; mark the keys that sign now").set_defaults(
        handler=cmd_keys_list
    )
    use = keys.add_parser(
        "use", help="sign with this key for its role from now on (env LEDGER_<ROLE>_KEY overrides)"
    )
    use.add_argument("name")
    use.set_defaults(handler=cmd_keys_use)
    revoke = keys.add_parser(
        "revoke", help="revoke a key from now: an operator-signed event, and the keyring entry"
    )
    revoke.add_argument("key", metavar="KEY_ID", help="key id (or key name)")
    revoke.add_argument("--reason", required=True, help="why (recorded and signed)")
    revoke.add_argument("--operator-key", metavar="NAME", help="operator key to sign with")
    revoke.set_defaults(handler=cmd_keys_revoke)
