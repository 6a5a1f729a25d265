"""`ledger archive --before DATE --to DIR`: the finished rounds older than DATE
leave the store for a signed, self-verifying archive directory
(docs/archive.md); `ledger archive check DIR [--keyring FILE]` checks one
offline. Exit 0 when done (or checked), 1 when an archive does not check, 2
for bad input (a date that is not one, a directory that is not empty or not
writable); nothing archived on any error."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.cli.common import WithLedger
from ledger.cli.passphrase import read_passphrase
from ledger.cli.progress import progress_bar
from ledger.errors import ConfigError
from ledger.inputs import parse_moment

if TYPE_CHECKING:
    from ledger.casino.opened import Ledger


def cmd_archive(args: argparse.Namespace) -> WithLedger | int:
    if args.archive_command == "check":
        return _check(args)
    if args.archive_command == "list":
        return WithLedger(partial(_list, args.positions))
    if args.before is None or args.to is None:
        raise ConfigError("ledger archive needs --before DATE and --to DIR")
    horizon = parse_moment(args.before, "--before")
    if horizon > datetime.now(UTC):
        raise ConfigError(f"--before {args.before} is in the future: nothing is older than it")
    return WithLedger(
        partial(_archive, horizon, Path(args.to)), writable=True, passphrase=read_passphrase()
    )


def _archive(horizon: datetime, directory: Path, ledger: Ledger) -> int:
    from ledger.archive.run import archive_rounds

    with progress_bar("archiving") as (advance, _):
        done = archive_rounds(ledger.node, horizon, directory, advance)
    for archive in done.finished:
        print(f"finished archive {archive} (recorded before a crash): its events removed")
    if done.archive is None and (done.directory / "manifest.json").is_file():
        print(f"{done.directory} holds an archive recorded and applied: nothing more to do")
        return 0
    if done.archive is None:
        print(f"nothing to archive: no finished round is older than {horizon.isoformat()}")
        return 0
    print(
        f"archived {done.events} events of {done.rounds} finished rounds older than "
        f"{horizon.isoformat()} into {done.directory} (archive {done.archive}, verified against "
        f"the checkpoint of size {done.checkpoint_size}); recorded in the archive register, "
        "then removed from the store"
    )
    return 0


def _list(positions: bool, ledger: Ledger) -> int:
    """Each recorded archive and exactly the positions it took, as the store's
    rows say once held to the digest its register event signs."""
    from ledger.audit.log.archives import check_archived_table, recorded_archives
    from ledger.errors import VerificationError
    from ledger.store.archived import ArchivedTable

    app, problems = ledger.node.app, list[VerificationError]()
    records = recorded_archives(app.tables, app.mapper.transcoder, ledger.node.keyring, problems)
    table = ArchivedTable(app.tables)
    summary = check_archived_table(table, records, 0, problems)
    if problems:
        raise VerificationError(f"{problems[0]} (ledger verify lists every finding)")
    for record in records:
        count, first, last = summary.applied.get(record.archive, (0, -1, -1))
        state = f"positions {first} to {last}" if count else "recorded, its events not removed yet"
        print(
            f"archive {record.archive}: {record.events} events of {record.rounds} rounds older "
            f"than {record.horizon}, in {record.directory}; {state}"
        )
        if positions and count:
            listed = [str(e.position) for a, e in table.entries() if a == record.archive and e]
            print("  " + " ".join(listed))
    if not records:
        print("no archive: every event is in the store")
    return 0


def _check(args: argparse.Namespace) -> int:
    from ledger.archive.check import check_archive
    from ledger.archive.files import KEYRING
    from ledger.crypto.keys import Keyring

    directory = Path(args.directory)
    source = Path(args.keyring) if args.keyring else directory / KEYRING
    try:
        keyring = Keyring.from_json(source.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the keyring {source}: {exc}") from None
    checked = check_archive(directory, keyring)
    print(
        f"OK: archive {checked.manifest.archive}: {checked.events} events in {checked.streams} "
        f"whole streams, each envelope's signature, each stream's chain from its first event, "
        f"each leaf in the hash tiles, the tiles against the checkpoint of size "
        f"{checked.checkpoint.size} signed by the log's checkpoint key, archived.txt and the "
        f"manifest's digest; keys from {source}"
        + ("" if args.keyring else " (the archive's own: give --keyring to use yours)")
        + f"; {len(checked.checkpoint.others)} witness cosignature line(s) carried"
        + "; NOT CHECKED here: the cosignatures (a witness policy's job: docs/witnesses.md) and "
        "the rounds' payouts (`ledger verify --archive` re-settles them)"
    )
    return 0


def add_archive_command(commands: Any) -> None:
    archive = commands.add_parser(
        "archive", help="move finished rounds older than a date into a verified archive"
    )
    archive.add_argument("--before", metavar="DATE", help="archive rounds finished before DATE")
    archive.add_argument("--to", metavar="DIR", help="the archive directory (new, or empty)")
    archive.set_defaults(handler=cmd_archive, archive_command=None)
    actions = archive.add_subparsers(dest="archive_command")
    check = actions.add_parser("check", help="check an archive directory offline")
    check.add_argument("directory", metavar="DIR")
    check.add_argument("--keyring", metavar="FILE", help="public keyring (default: the archive's)")
    check.set_defaults(handler=cmd_archive)
    listing = actions.add_parser(
        "list", help="the archives and the log positions each took (held to their records)"
    )
    listing.add_argument("--positions", action="store_true", help="every position, not a range")
    listing.set_defaults(handler=cmd_archive)
