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

A process builds and imports only the parser of the command it runs
(`COMMANDS`; `--help` and usage errors build them all), and each command
imports what it runs (the node, the verifier, the store's driver) when it
runs, so a process pays only for the command it is.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import signal
import sys
from collections.abc import Sequence
from typing import NoReturn

from ledger.cli.common import WithLedger, check_keys_path, run_with_ledger
from ledger.cli.output import flush_before_exit, tolerate_closed_pipes
from ledger.errors import LedgerError
from ledger.store.drivers import loaded_errors

INTERRUPTED = 130  # the exit code of a command ended by Ctrl-C (docs/cli.md)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one `ledger: error:` line (exit 2) like every other."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"ledger: error: {self.prog}: {message} (see --help)\n")


# Every command's parser, in `--help`'s order: the module whose function adds
# it, and the commands (aliases included) that function adds. A process that
# runs one command imports and builds only that command's parser
# (tests/cli/test_cli_entry.py holds this table to the parsers it builds).
COMMANDS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("ledger.cli.keys", "add_key_commands", ("keys",)),
    ("ledger.cli.simulate", "add_simulate_command", ("simulate",)),
    ("ledger.cli.audit", "add_audit_commands", ("verify", "checkpoint", "proof")),
    ("ledger.cli.export", "add_export_command", ("export",)),
    ("ledger.cli.mirror", "add_mirror_command", ("mirror",)),
    ("ledger.cli.projections", "add_projection_commands", ("projections", "balances", "rounds")),
    ("ledger.cli.games", "add_game_commands", ("games", "variants", "paytable")),  # alias
    ("ledger.cli.new_game", "add_new_game_command", ("new-game",)),
    ("ledger.cli.events", "add_events_command", ("events",)),
    ("ledger.cli.tiles", "add_tiles_command", ("tiles",)),
    ("ledger.cli.recall", "add_recall_command", ("recall",)),
    ("ledger.cli.history", "add_history_command", ("history",)),
    ("ledger.cli.report", "add_report_command", ("report",)),
    ("ledger.cli.serve", "add_serve_commands", ("serve", "tokens", "openapi")),
    ("ledger.cli.seeds", "add_seed_commands", ("seeds",)),
    ("ledger.cli.migrate", "add_migrate_command", ("migrate",)),
    ("ledger.cli.erase", "add_erase_command", ("erase", "privacy")),
    ("ledger.cli.retention", "add_retention_commands", ("retention",)),
    ("ledger.cli.archive", "add_archive_command", ("archive",)),
    ("ledger.cli.publish", "add_publish_command", ("publish",)),
    ("ledger.cli.witness", "add_witness_commands", ("witness",)),
)
KNOWN = frozenset(name for _, _, names in COMMANDS for name in names)
GLOBAL_OPTIONS = ("--store", "--keys")  # each takes a value


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; given a `command` it knows, one with only the parsers
    of the module that adds that command (the same parsers, the same errors)."""
    parser = Parser(prog="ledger", description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="store URL (default: $LEDGER_STORE or sqlite:///ledger.db)")
    parser.add_argument("--keys", help="keys directory (default: $LEDGER_KEYS or ./keys)")
    commands = parser.add_subparsers(dest="command", required=True)
    chosen = [entry for entry in COMMANDS if command in entry[2]]
    for module, function, _ in chosen or COMMANDS:
        getattr(importlib.import_module(module), function)(commands)
    _anywhere(parser, GLOBAL_OPTIONS)
    return parser


def command_named(argv: Sequence[str]) -> str | None:
    """The command `argv` runs, when it names a known one before anything else
    but the global options (`ledger --store URL verify ...`); None otherwise
    (`--help`, no command, a misspelt one: the whole parser judges those)."""
    position = 0
    while position < len(argv):
        word = argv[position]
        if word in GLOBAL_OPTIONS:
            position += 2
        elif word.partition("=")[0] in GLOBAL_OPTIONS:
            position += 1
        else:
            return word if word in KNOWN else None
    return None


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
def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """Built once a process for each command (a program that calls `main` again
    and again, as the tests do, pays for it once). Parsing leaves a parser as it was."""
    return build_parser(command)


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    with tolerate_closed_pipes():  # argparse's own usage error (exit 2) included
        args = _parser(command_named(words)).parse_args(words)
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
