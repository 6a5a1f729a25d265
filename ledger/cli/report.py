"""`ledger report FILE.html`: the auditor's report, in one pass over the log."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ledger.audit.level import Level
from ledger.cli.audit import _verify_keyring
from ledger.cli.common import loaded_plugins
from ledger.cli.progress import progress_bar
from ledger.errors import ConfigError
from ledger.inputs import output_file
from ledger.store.config import store_url


def _output(given: str) -> Path:
    """Where the report goes; a bad path fails before the log is read."""
    path = Path(given)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ConfigError(f"the report is an HTML file: {given} does not end in .html")
    return output_file(given, "write the report to")


def _shown(url: str) -> str:
    """The store URL without a password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def cmd_report(args: argparse.Namespace) -> int:
    from ledger.report import charts  # matplotlib missing: said before the log is read
    from ledger.report.html import render
    from ledger.report.reader import read_log
    from ledger.report.significant import collect
    from ledger.report.status import not_verified, run_verifier
    from ledger.report.theory import Theories, load_edges
    from ledger.store.application import LedgerApplication

    output = _output(args.file)
    charts.require()
    if args.level is not None and not args.verify:
        raise ConfigError(f"--level {args.level} is the level of --verify: add --verify")
    level = Level.parse(args.level or Level.SETTLEMENT.value) if args.verify else None
    edges = load_edges(args.edge or [])
    keyring, _ = _verify_keyring(args)
    plugins = loaded_plugins()
    games = plugins.games()
    url = store_url(args.store)
    app = LedgerApplication(url, keyring=keyring, create=False)
    try:
        from ledger.audit.games.recorded_games import games_of_store

        # Each round re-settled with the rules it pinned, an earlier release's too.
        pinned = games_of_store(app, games, plugins.game_from_rules) if level is not None else games
        with progress_bar("significant events") as (advance, _):
            significant = collect(app, advance)
        if level is None:
            status = not_verified(
                app,
                keyring,
                significant.last_verification,
                significant.last_self_verification,
            )
        else:
            with progress_bar("verifying") as (advance, _):
                status = run_verifier(app, keyring, level, pinned, advance)
        with progress_bar("reporting") as (advance, set_total):
            tally = read_log(app, Theories(games, edges), advance, set_total)
    finally:
        app.close()
    page = render(tally, status, _shown(url), significant)
    partial = output.with_name(f".{output.name}.{os.getpid()}.part")
    partial.write_text(page, encoding="utf-8")
    partial.replace(output)  # a reader never sees half a report
    print(f"wrote {output}: {tally.events:,} events, verification: {status.verdict}")
    return status.exit_code  # as `ledger verify` would: 1 failed, 2 or 3 could not check


def add_report_command(commands: Any) -> None:
    report = commands.add_parser("report", help="write an HTML audit report (one file, offline)")
    report.add_argument("file", metavar="FILE.html", help="where to write the report")
    report.add_argument(
        "--verify",
        action="store_true",
        help="run the verifier first and state its result (default: stated as not verified)",
    )
    report.add_argument(
        "--level",
        help="with --verify: integrity | signatures | settlement (default)",
    )
    report.add_argument(
        "--edge",
        action="append",
        metavar="FILE",
        help="a simulated return of a card game (docs/xidach_edge.json); repeatable",
    )
    report.add_argument(
        "--keyring",
        metavar="FILE",
        help="your own copy of the public keyring (default: the keys directory's)",
    )
    report.set_defaults(handler=cmd_report)
