"""`ledger export DIR`: the auditor's bundle (docs/export.md)."""

from __future__ import annotations

import argparse
from functools import partial
from typing import TYPE_CHECKING, Any

from ledger.cli.args import MAX_INT64, int_range, uuid_text
from ledger.cli.common import WithLedger, loaded_plugins
from ledger.cli.progress import progress_bar
from ledger.errors import ConfigError
from ledger.inputs import output_directory

if TYPE_CHECKING:
    from pathlib import Path

    from ledger.casino.opened import Ledger
    from ledger.export.writer import Selection


def _selection(args: argparse.Namespace) -> Selection:
    from ledger.export.writer import Selection

    if args.round is not None and (args.first is not None or args.last is not None):
        raise ConfigError("--round cannot be combined with --from/--to")
    if args.first is not None and args.last is not None and args.first > args.last:
        raise ConfigError(f"--from {args.first} is after --to {args.last}")
    return Selection(round_id=args.round, first=args.first, last=args.last)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def cmd_export(args: argparse.Namespace) -> WithLedger:
    selection = _selection(args)
    directory = output_directory(args.directory, "export to", empty=True)
    plugins = loaded_plugins()  # a broken plugin fails before the store is opened
    return WithLedger(partial(_export, selection, directory), plugins=plugins)


def _export(selection: Selection, directory: Path, ledger: Ledger) -> int:
    from ledger.export.writer import export_bundle

    node = ledger.node
    with progress_bar("exporting") as (advance, set_total):
        summary = export_bundle(
            node.app,
            node.keyring,
            directory,
            selection,
            ledger.games,
            progress=advance,
            on_total=set_total,
        )
    proofs = (
        f", each with an inclusion proof against the checkpoint of size {summary.proofs_against}"
        + (" (and as a C2SP tlog-proof in tlog-proofs/)" if selection.round_id else "")
        if summary.proofs_against is not None
        else ""
    )
    print(
        f"exported {_n(summary.events, 'event')}{proofs}, {_n(summary.checkpoints, 'checkpoint')}"
        f", the public keyring and the rules of {_n(summary.games, 'game profile')} to {directory}"
    )
    return 0


def add_export_command(commands: Any) -> None:
    export = commands.add_parser(
        "export", help="write an auditor's bundle (events, keyring, checkpoints, rules)"
    )
    export.add_argument("directory", help="a new or empty directory")
    export.add_argument("--round", type=uuid_text, help="only this round's events (with proofs)")
    export.add_argument(
        "--from",
        dest="first",
        type=int_range(0, MAX_INT64),
        help="first log position (with proofs)",
    )
    export.add_argument(
        "--to",
        dest="last",
        type=int_range(0, MAX_INT64),
        help="last log position, included (with proofs)",
    )
    export.set_defaults(handler=cmd_export)
