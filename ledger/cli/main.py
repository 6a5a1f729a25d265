"""`ledger`: the command line for operators and auditors.

Every `LedgerError` becomes one line on stderr and its non-zero exit code
(1: verification failed; 2: bad input or setup; 3: no installed plugin can
re-derive a round, see ledger.errors); nothing else is caught. A command run
with `--json` writes that line as a JSON object, with the error's `code` (and
`param`) of the catalogue (`ledger.error_codes`), as the HTTP API's error body.
A reader that closes stdout or stderr early (`ledger ... 2>&1 | head`) ends no
command: the rest of the output goes nowhere and the exit code is still the
command's, the error line that had nowhere to go included (ledger.cli.output).

A command that works on the ledger checks its input, then answers what to run
on it (`ledger.cli.common.WithLedger`): `main` opens that one ledger, hands it
over and closes it (`run_with_ledger`); no command opens one of its own.

Building the parser imports only the commands' parsers: each command imports
what it runs (the node, the verifier, the store's driver) when it runs, so a
process pays only for the command it is (`--help` for none).
"""

from __future__ import annotations

import argparse
import functools
import json
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from ledger.cli.archive import add_archive_command
from ledger.cli.audit import add_audit_commands
from ledger.cli.common import WithLedger, check_keys_path, run_with_ledger
from ledger.cli.erase import add_erase_command
from ledger.cli.events import add_events_command
from ledger.cli.export import add_export_command
from ledger.cli.games import add_game_commands
from ledger.cli.history import add_history_command
from ledger.cli.keys import add_key_commands
from ledger.cli.migrate import add_migrate_command
from ledger.cli.mirror import add_mirror_command
from ledger.cli.new_game import add_new_game_command
from ledger.cli.output import flush_before_exit, tolerate_closed_pipes
from ledger.cli.projections import add_projection_commands
from ledger.cli.publish import add_publish_command
from ledger.cli.recall import add_recall_command
from ledger.cli.report import add_report_command
from ledger.cli.retention import add_retention_commands
from ledger.cli.seeds import add_seed_commands
from ledger.cli.serve import add_serve_commands
from ledger.cli.simulate import add_simulate_command
from ledger.cli.tiles import add_tiles_command
from ledger.cli.witness import add_witness_commands
from ledger.errors import LedgerError
from ledger.store.drivers import loaded_errors

INTERRUPTED = 130  # the exit code of a command ended by Ctrl-C (docs/cli.md)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one `ledger: error:` line (exit 2) like every other."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"ledger: error: {self.prog}: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="ledger", description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="store URL (default: $LEDGER_STORE or sqlite:///ledger.db)")
    parser.add_argument("--keys", help="keys directory (default: $LEDGER_KEYS or ./keys)")
    commands = parser.add_subparsers(dest="command", required=True)
    add_key_commands(commands)
    add_simulate_command(commands)
    add_audit_commands(commands)
    add_export_command(commands)
    add_mirror_command(commands)
    add_projection_commands(commands)
    add_game_commands(commands)
    add_new_game_command(commands)
    add_events_command(commands)
    add_tiles_command(commands)
    add_recall_command(commands)
    add_history_command(commands)
    add_report_command(commands)
    add_serve_commands(commands)
    add_seed_commands(commands)
    add_migrate_command(commands)
    add_erase_command(commands)
    add_retention_commands(commands)
    add_archive_command(commands)
    add_publish_command(commands)
    add_witness_commands(commands)
    _anywhere(parser, ("--store", "--keys"))
    return parser


def _anywhere(parser: argparse.ArgumentParser, options: tuple[str, ...]) -> None:
    """`ledger verify --store URL` as well as `ledger --store URL verify`: each
    command takes the global options too (unset there, the global value stays)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            # An alias names the same parser again: each parser once.
            for sub in {id(sub): sub for sub in action.choices.values()}.values():
                for option in options:
                    sub.add_argument(option, default=argparse.SUPPRESS, help=argparse.SUPPRESS)
                _anywhere(sub, options)


@functools.cache
def _parser() -> argparse.ArgumentParser:
    """Built once a process (12 ms): a program that calls `main` again and again,
    as the tests do, pays for it once. Parsing leaves a parser as it was."""
    return build_parser()


def main(argv: Sequence[str] | None = None) -> int:
    with tolerate_closed_pipes():  # argparse's own usage error (exit 2) included
        args = _parser().parse_args(argv)
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        check_keys_path(args.keys)
        answer: int | WithLedger = args.handler(args)
        # A command that works on the ledger gets the one opened for it here.
        code = run_with_ledger(args, answer) if isinstance(answer, WithLedger) else answer
    except LedgerError as exc:
        report_error(args, str(exc), type(exc).__name__, exc.code, exc.param)
        return exc.exit_code
    except _store_outages() as exc:  # the store went away mid-command
        from ledger.store.outage import describe_outage, disk_full

        # The command it stopped was one transaction: rolled back, nothing of it kept.
        advice = ": free space, then run the command again" if disk_full(exc) else ""
        detail = f"store unavailable: {describe_outage(exc)}{advice}"
        report_error(args, detail, "StoreUnavailable", "store_unavailable")
        return 2
    except KeyboardInterrupt:
        print("ledger: interrupted", file=sys.stderr)
        return INTERRUPTED
    return code


def report_error(
    args: argparse.Namespace, detail: str, error: str, code: str, param: str | None = None
) -> None:
    """The one error line on stderr: plain text, or with `--json` the HTTP API's
    error body as one JSON object (a program reads `code`, not the text)."""
    if getattr(args, "json", False) is True:
        body = {"detail": detail, "error": error, "code": code}
        print(json.dumps(body if param is None else {**body, "param": param}), file=sys.stderr)
    else:
        print(f"ledger: error: {detail}", file=sys.stderr)


def _store_outages() -> tuple[type[BaseException], ...]:
    """eventsourcing's OperationalError and InterfaceError: only a command that
    imported eventsourcing's persistence (opened a store) can raise them."""
    return loaded_errors(
        "eventsourcing.persistence:OperationalError", "eventsourcing.persistence:InterfaceError"
    )


def run_program() -> int:
    """`main` as a process of its own runs it (the `ledger` script, `python -m`)."""
    try:
        code = main()
    finally:  # argparse's SystemExit (--help, a usage error) included
        flush_before_exit()
    if code == INTERRUPTED:
        # Ended by Ctrl-C: another one while the interpreter exits would turn
        # the documented exit code into a death by signal (or a traceback).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code


if __name__ == "__main__":
    raise SystemExit(run_program())
