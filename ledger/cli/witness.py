"""`ledger witness`: run a C2SP tlog-witness (docs/witnesses.md).

ledger witness init DIR --name NAME     its key, configuration and state
ledger witness add-log DIR ORIGIN KEY   follow a log (its note verifier key)
ledger witness key DIR                  print its verifier key (for the logs and auditors)
ledger witness serve DIR                serve POST /add-checkpoint (from the state init made)
ledger witness refusals DIR             the refused submissions it kept as evidence
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.cli.args import int_range, url_path_prefix
from ledger.cli.common import passphrase_for
from ledger.errors import ConfigError

if TYPE_CHECKING:
    from ledger.witness.config import WitnessConfig
    from ledger.witness.state import WitnessState


def cmd_init(args: argparse.Namespace) -> int:
    from ledger.witness.config import WitnessConfig

    directory = Path(args.directory)
    WitnessConfig.check_new(directory, args.name)  # before asking for a passphrase
    config = WitnessConfig.init(directory, args.name, passphrase_for(args, confirm=True))
    print(f"witness {config.name} set up in {config.directory}")
    print(f"verifier key: {config.verifier_key()}")
    return 0


def cmd_add_log(args: argparse.Namespace) -> int:
    from ledger.witness.config import WitnessConfig

    config = WitnessConfig.load(Path(args.directory))
    config.add_log(args.origin, args.key)
    keys = len(config.logs[args.origin])
    print(f"witness {config.name} follows log {args.origin!r} ({keys} key(s))")
    return 0


def cmd_key(args: argparse.Namespace) -> int:
    from ledger.witness.config import WitnessConfig

    print(WitnessConfig.load(Path(args.directory)).verifier_key())
    return 0


def cmd_refusals(args: argparse.Namespace) -> int:
    from ledger.witness.config import WitnessConfig
    from ledger.witness.state import WitnessState

    config = WitnessConfig.load(Path(args.directory))
    if not config.state_path.exists():
        raise ConfigError(
            f"no refusal to list: witness {config.name} has no state ({config.state_path} is "
            "missing); if it has cosigned before, its state and the refusals kept in it were "
            "lost (docs/witnesses.md)"
        )
    state = WitnessState.existing(config.state_path, read_only=True)
    try:
        refusals = state.refusals()
    finally:
        state.close()
    for refusal in refusals:
        print(f"{refusal.at}  {refusal.origin}  {refusal.status}  {refusal.reason}")
    if not refusals:
        print("no refused submission")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from ledger.cli.serve import check_listen
    from ledger.witness.asgi import witness_app
    from ledger.witness.config import WitnessConfig
    from ledger.witness.state import WitnessState
    from ledger.witness.witness import Witness

    config = WitnessConfig.load(Path(args.directory))
    logs = config.log_keys()
    kept = _kept_state(config, args.new_state)  # before a passphrase is asked or a port bound
    try:
        signer = config.signer(passphrase_for(args))
        check_listen(args.host, args.port)
    except BaseException:
        if kept is not None:
            kept.close()
        raise
    state = kept or WitnessState(config.state_path)  # --new-state: made once all else is right
    witness = Witness(config.name, signer, logs, state)
    app = witness_app(witness, config.verifier_key(), args.prefix)
    followed = ", ".join(sorted(logs)) or "no log yet (`ledger witness add-log`)"
    print(
        f"witness {config.name} on http://{args.host}:{args.port}{args.prefix}/add-checkpoint "
        f"following {followed}",
        file=sys.stderr,
        flush=True,
    )
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    finally:
        state.close()
    return 0


def _kept_state(config: WitnessConfig, new_state: bool) -> WitnessState | None:
    """The state the witness signed from (None: --new-state, and there is none).
    `ledger witness init` makes the state, so a missing one was lost: a
    witness starts again from nothing only when told."""
    from ledger.witness.state import WitnessState

    path = config.state_path
    if new_state and path.exists():
        raise ConfigError(
            f"--new-state, but {path} exists: it holds what witness {config.name} cosigned; "
            "serve without --new-state"
        )
    if new_state:
        return None
    if not path.exists():
        raise ConfigError(
            f"cannot start witness {config.name}: its state {path} is missing, and started "
            "from an empty one it could cosign a checkpoint inconsistent with one it cosigned "
            "before (a split view); restore the state, or pass --new-state only if this "
            "witness never cosigned (docs/witnesses.md)"
        )
    return WitnessState.existing(path)


def add_witness_commands(commands: Any) -> None:
    witness = commands.add_parser("witness", help="run a C2SP tlog-witness for other logs")
    sub = witness.add_subparsers(dest="witness_command", required=True)
    init = sub.add_parser("init", help="set a witness up: its key, configuration and state")
    init.add_argument("directory")
    init.add_argument("--name", required=True, help="its name on cosignatures, e.g. example.com/w1")
    init.add_argument("--unencrypted", action="store_true", help="no passphrase on its key")
    init.set_defaults(handler=cmd_init)
    add = sub.add_parser("add-log", help="follow a log: its origin and note verifier key")
    add.add_argument("directory")
    add.add_argument("origin")
    add.add_argument("key", help="the log's verifier key, name+hash+base64 (ledger keys list)")
    add.set_defaults(handler=cmd_add_log)
    key = sub.add_parser("key", help="print the witness's verifier key")
    key.add_argument("directory")
    key.set_defaults(handler=cmd_key)
    refusals = sub.add_parser("refusals", help="the refused submissions kept as evidence")
    refusals.add_argument("directory")
    refusals.set_defaults(handler=cmd_refusals)
    serve = sub.add_parser("serve", help="serve POST <prefix>/add-checkpoint")
    serve.add_argument("directory")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int_range(1, 65535), default=8100)
    serve.add_argument(
        "--prefix",
        type=url_path_prefix,
        default="",
        help="the submission prefix, a URL path such as /witness",
    )
    serve.add_argument(
        "--new-state",
        action="store_true",
        help="start from an empty state when state.db is missing: only for a witness that "
        "never cosigned (else it could cosign a split view)",
    )
    serve.add_argument("--unencrypted", action="store_true", help="its key has no passphrase")
    serve.add_argument("--log-level", default="warning")
    serve.set_defaults(handler=cmd_serve)
