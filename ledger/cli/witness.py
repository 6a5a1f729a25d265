"""`ledger witness`: run a C2SP tlog-witness (docs/witnesses.md).

ledger witness init DIR --name NAME     its key, configuration and state
ledger witness add-log DIR ORIGIN KEY   follow a log (its note verifier key)
ledger witness key DIR                  print its verifier key (for the logs and auditors)
ledger witness serve DIR                serve POST /add-checkpoint
ledger witness refusals DIR             the refused submissions it kept as evidence
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ledger.cli.args import int_range
from ledger.cli.common import passphrase_for


def cmd_init(args: argparse.Namespace) -> int:
    from ledger.witness.config import WitnessConfig

    config = WitnessConfig.init(Path(args.directory), args.name, passphrase_for(args, confirm=True))
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
    state = WitnessState(config.state_path)
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
    signer = config.signer(passphrase_for(args))
    check_listen(args.host, args.port)
    state = WitnessState(config.state_path)
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
    serve.add_argument("--prefix", default="", help="the submission prefix, e.g. /witness")
    serve.add_argument("--unencrypted", action="store_true", help="its key has no passphrase")
    serve.add_argument("--log-level", default="warning")
    serve.set_defaults(handler=cmd_serve)
