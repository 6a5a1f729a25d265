"""`ledger rounds void|resume ROUND --reason TEXT`: an operator ends or resumes
an interrupted round from the command line.

Both go through `Casino.void_round` / `Casino.resume_round`, so the checks are
the API's: the key must be an operator key of the keyring, valid now; the round
must be in a state its game allows; the reason is signed with the operator's
own key, and nothing is recorded when any check fails.
"""

from __future__ import annotations

import argparse
import json
import uuid
from typing import TYPE_CHECKING, Any

from ledger.cli.args import uuid_text
from ledger.cli.common import WithLedger, loaded_plugins
from ledger.cli.passphrase import read_passphrase
from ledger.crypto.roles import Role
from ledger.domain.currency import format_major
from ledger.domain.names import MAX_TEXT, check_name
from ledger.errors import ConfigError

if TYPE_CHECKING:
    from ledger.casino.opened import Ledger
    from ledger.crypto.keystore import KeyDirectory
    from ledger.crypto.signing import InMemorySigner


def operator_signer(directory: KeyDirectory, name: str | None, passphrase: bytes) -> InMemorySigner:
    """The operator key named `name`, else the one valid operator key held here
    (a revoked or expired key signs nothing, so it is no choice)."""
    return directory.signer(Role.OPERATOR, passphrase, name)


def cmd_round_action(args: argparse.Namespace) -> WithLedger:
    from ledger.crypto.keystore import keys_dir

    reason = check_name(args.reason, "--reason", limit=MAX_TEXT, param="reason")
    plugins = loaded_plugins()  # a broken plugin fails before a passphrase is asked for
    passphrase = read_passphrase()
    # The operator key first: a wrong key or passphrase fails before the store opens.
    operator = operator_signer(keys_dir(args.keys), args.operator_key, passphrase)

    def run(ledger: Ledger) -> int:
        casino = ledger.casino
        request_id = args.request_id or f"cli-{args.action}-{uuid.uuid4()}"
        if args.action == "void":
            returns = casino.void_round(
                request_id=request_id, round_id=args.round, reason=reason, operator=operator
            )
            staked = sum(r["stake"] for r in returns)
            currency = casino.round(args.round).currency
            print(
                f"voided round {args.round}: {len(returns)} stake{'s' * (len(returns) != 1)} "
                f"returned ({format_major(staked, currency)} {currency}), "
                f"signed by operator key {operator.key_id[:16]}"
            )
        else:
            casino.resume_round(
                request_id=request_id, round_id=args.round, reason=reason, operator=operator
            )
            print(f"resumed round {args.round}, signed by operator key {operator.key_id[:16]}")
        return 0

    return WithLedger(run, writable=True, passphrase=passphrase, plugins=plugins)


def cmd_round_play(args: argparse.Namespace) -> WithLedger:
    """Finish a round from the command line (one a killed session left open, or
    resumed): `throw` an RNG dice round from its table's committed seed, `act`
    one of the game's moves (RNG cards drawn by the core), `settle` it."""
    from ledger.cli.seeds import rng_from_args

    rng = rng_from_args(args) if args.action in ("throw", "act") else None
    moves = _json_object(args.args, "--args") if args.action == "act" else {}

    def run(ledger: Ledger) -> int:
        casino = ledger.casino
        request_id = args.request_id or f"cli-{args.action}-{uuid.uuid4()}"
        if args.action == "throw":
            thrown = casino.throw_dice(request_id=request_id, round_id=args.round, rng=rng)  # type: ignore[arg-type]
            print(f"threw {thrown.get('dice', thrown)} for round {args.round}")
            # The throw settled what its game settles.
            _print_settled(args.round, casino.round(args.round).results)
        elif args.action == "act":  # a game of actions settles what each step settles
            done = casino.act(
                request_id=request_id,
                round_id=args.round,
                actor=args.actor,
                action=args.move,
                args=moves,
                rng=rng,
            )
            drawn = f", drew {done['drawn']}" if done.get("drawn") else ""
            print(f"recorded {args.actor} {args.move} in round {args.round}{drawn}")
            _print_settled(args.round, done.get("settled") or [], quiet=True)
        else:
            settled = casino.settle(request_id=f"{request_id}-settle", round_id=args.round)
            _print_settled(args.round, settled)
        return 0

    return WithLedger(run, writable=True)


def _print_settled(round_id: str, settled: list[Any], quiet: bool = False) -> None:
    if settled or not quiet:
        print(f"round {round_id}: {len(settled)} bet{'s' * (len(settled) != 1)} settled")


def _json_object(text: str, flag: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{flag} is not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(value, dict):
        raise ConfigError(f'{flag} is a JSON object, e.g. \'{{"face": "heads"}}\'')
    return value


def add_round_actions(rounds: argparse.ArgumentParser) -> None:
    """`void`, `resume`, `throw`, `act` and `settle` under `ledger rounds` (which
    keeps its own --open listing)."""
    actions: Any = rounds.add_subparsers(dest="action", metavar="{void,resume,throw,act,settle}")
    for action, text in (
        ("throw", "an alias of act: an RNG dice round's dice from its table's seed (it settles)"),
        ("act", "record one of the game's moves in a round (RNG cards drawn for it)"),
        ("settle", "an alias kept: nothing is left to settle (a draw or action settles)"),
    ):
        parser = actions.add_parser(action, help=text)
        parser.add_argument("round", type=uuid_text, help="the round id (see `ledger rounds`)")
        if action == "act":
            parser.add_argument("actor", help="who moves (e.g. dealer, or a seat)")
            parser.add_argument("move", metavar="action", help="the move (e.g. hit, stand)")
            parser.add_argument("--args", default="{}", help="the move's arguments, a JSON object")
        if action != "settle":
            parser.add_argument("--rng-dir", help="the RNG seeds (default: <keys>/../rng-seeds)")
        parser.add_argument("--request-id", help="idempotency key (default: a new one)")
        parser.set_defaults(handler=cmd_round_play)
    for action, text in (
        ("void", "void an interrupted round: every stake back to its wallet"),
        ("resume", "resume an interrupted round where it stopped"),
    ):
        parser = actions.add_parser(action, help=text)
        parser.add_argument(
            "round", type=uuid_text, help="the round id (see `ledger rounds --open`)"
        )
        parser.add_argument(
            "--reason", required=True, help="why (signed, recorded, shown to auditors)"
        )
        parser.add_argument(
            "--operator-key", metavar="NAME", help="the operator key (default: the only one held)"
        )
        parser.add_argument("--request-id", help="idempotency key (default: a new one)")
        parser.set_defaults(handler=cmd_round_action)
