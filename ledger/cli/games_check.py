"""`ledger games check`: would the installed release strand or re-judge the
store's recorded rounds? (docs/plugins.md, "Changing a game's rules or its
code"). It records the installed games' rules data in the store's rules
register first, so it opens the store for writing."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ledger.cli.common import WithLedger, loaded_plugins

if TYPE_CHECKING:
    from ledger.audit.games.release_check import GamesCheck
    from ledger.casino.opened import Ledger
    from ledger.plugins.registry import LoadedGame


def check_games_command(args: argparse.Namespace) -> WithLedger:
    plugins = loaded_plugins()  # a broken plugin fails before the passphrase is asked

    def run(ledger: Ledger) -> int:
        from ledger.audit.games.release_check import SAMPLE, check_release

        app = ledger.node.app
        sample = SAMPLE if args.sample is None else args.sample
        keyring = app.signing_keyring()
        check = check_release(app, keyring, ledger.plugins, record=True, sample=sample)
        say(check)
        return 0 if check.ok else 1

    return WithLedger(run, writable=True, plugins=plugins)


def check_before_serving(ledger: Ledger) -> None:
    """`ledger serve`'s check of the installed release, on the store it opened for
    writing: the rules it records are said on stderr; a release that would strand
    or re-judge recorded rounds is refused (exit 1) before any worker starts."""
    from ledger.audit.games.release_check import check_release, refuse_if_stranded_or_rejudged

    app = ledger.node.app
    check = check_release(app, app.signing_keyring(), ledger.plugins, record=True)
    for game in check.recorded:
        print(_recorded(game), file=sys.stderr)
    refuse_if_stranded_or_rejudged(check)


def _recorded(game: LoadedGame) -> str:
    return (
        f"recorded the rules of {game.id} (rules {game.rules_hash[:12]}, "
        f"{game.plugin} {game.version}) in the store's rules register"
    )


def say(check: GamesCheck) -> None:
    """The check's lines: what it recorded, each pinned rules' verdict, then
    every problem (stderr), each one line."""
    for game in check.recorded:
        print(_recorded(game))
    for line in check.lines:
        print(f"ok: {line}")
    for problem in check.problems():
        print(f"ledger: error: {problem}", file=sys.stderr)
    if check.ok:
        rounds = sum(use.rounds for use in check.uses)
        print(
            f"OK: {rounds} recorded round{'' if rounds == 1 else 's'} under "
            f"{len(check.uses)} pinned rules: this release strands and re-judges none"
        )
