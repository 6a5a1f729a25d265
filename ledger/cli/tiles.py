"""`ledger tiles DIR`: the log as C2SP tlog-tiles (docs/tiles.md); `--check`
reads a tiles directory as a monitor would."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ledger.cli.common import WithLedger
from ledger.cli.progress import progress_bar
from ledger.errors import ConfigError
from ledger.inputs import existing_directory, output_directory

if TYPE_CHECKING:
    from ledger.casino.opened import Ledger
    from ledger.export.tiles import TilesWritten
    from ledger.node import Node


def publish_tiles(
    node: Node, directory: Path, *, quiet: bool = False, out: TextIO | None = None
) -> TilesWritten | None:
    """Write the tiles of `node`'s newest valid checkpoint to `directory`
    (`quiet`: no progress and no line, for `checkpoint --follow`'s turns)."""
    from ledger.export.tiles import write_tiles
    from ledger.node import origin

    if quiet:
        return write_tiles(node.app, node.keyring, directory, origin=origin())
    with progress_bar("writing tiles") as (advance, _):
        written = write_tiles(node.app, node.keyring, directory, origin=origin(), progress=advance)
    print(describe(written, directory), file=out or sys.stdout)
    return written


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def describe(written: TilesWritten | None, directory: Path) -> str:
    if written is None:
        return "no checkpoint verifies yet: no tiles written (run `ledger checkpoint`)"
    if written.size == written.previous:
        return f"{directory} already publishes the checkpoint of size {written.size}"
    since = f" (extending the published size {written.previous})" if written.previous else ""
    return (
        f"wrote {_n(written.tiles, 'tile')} and {_n(written.bundles, 'entry bundle')} to "
        f"{directory} for "
        f"the checkpoint of size {written.size}{since}: every entry recomputed from its "
        "event and the tree checked against the signed root"
    )


def cmd_tiles(args: argparse.Namespace) -> int | WithLedger:
    if args.check:
        return _check(args)
    if args.keyring:
        raise ConfigError("--keyring goes with --check (writing uses the keys directory's keyring)")
    directory = output_directory(args.directory, "write tiles to")

    def run(ledger: Ledger) -> int:
        publish_tiles(ledger.node, directory)
        return 0

    return WithLedger(run)


def _check(args: argparse.Namespace) -> int:
    """`tiles DIR --check`: reads only, so its failures say what was found, not
    that nothing was written."""
    from ledger.crypto.keys import Keyring
    from ledger.crypto.keystore import keys_dir
    from ledger.export.tiles_check import check_tiles

    directory = existing_directory(args.directory, "tiles directory")
    keyring = Keyring.load(Path(args.keyring)) if args.keyring else keys_dir(args.keys).keyring()
    with progress_bar("checking tiles") as (advance, _):
        checked = check_tiles(directory, keyring, progress=advance)
    older = (
        f", and {_n(checked.older, 'older partial')} (of earlier checkpoints), each the start "
        "of the tile or bundle now at its index"
        if checked.older
        else ""
    )
    print(
        f"OK: {directory} holds the log {checked.origin!r} of {checked.size} entries under "
        f"a checkpoint whose signature verifies: {_n(checked.bundles, 'entry bundle')}, "
        f"each entry hashing to its leaf, and {_n(checked.tiles, 'tile')} rebuilt from them "
        f"byte for byte, up to the signed root{older}; no other file"
    )
    return 0


def add_tiles_command(commands: Any) -> None:
    tiles = commands.add_parser(
        "tiles", help="write the log as C2SP tlog-tiles to DIR (only what is new)"
    )
    tiles.add_argument(
        "directory", help="the tiles directory (created when missing; its parent must exist)"
    )
    tiles.add_argument("--check", action="store_true", help="write nothing: check the tiles in DIR")
    tiles.add_argument("--keyring", metavar="FILE", help="with --check: your copy of the keyring")
    tiles.set_defaults(handler=cmd_tiles)
