"""`ledger mirror --from URL`: a regulator's own verified copy of a node's log
(docs/mirror.md)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.audit.level import Level
from ledger.cli.args import int_range, seconds_range
from ledger.cli.common import games_at
from ledger.errors import ConfigError, StoreUnavailableError, VerificationError
from ledger.mirror.limits import BATCH, RECHECK
from ledger.store.config import describe, store_url

if TYPE_CHECKING:
    from ledger.crypto.keys import Keyring, PublicKeyRecord
    from ledger.crypto.keystore import KeyDirectory
    from ledger.mirror.copy import Mirror, Pass
    from ledger.mirror.source import Source
    from ledger.store.application import LedgerApplication

TOKEN_ENV = "LEDGER_SOURCE_TOKEN"
RECHECK_EVERY = 5.0  # seconds between re-reads of the history when following
REQUEST_DEADLINE = 60.0  # seconds for one whole answer: a slow source cannot hold a mirror
MIN_POLL = 0.1  # seconds: a follower never asks the source more than 10 times a second
MIRROR_DIR = "mirror"  # inside the keys directory: the mirror's state and refusals


def _token(args: argparse.Namespace) -> str:
    if args.token_file is not None:
        path = Path(args.token_file)
        if not path.is_file():
            raise ConfigError(f"--token-file {path}: no such file")
        token = path.read_text().strip()
    else:
        token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise ConfigError(
            f"the source's feed needs an auditor token: --token-file FILE or ${TOKEN_ENV}"
        )
    return token


def _keyring(args: argparse.Namespace, directory: KeyDirectory) -> tuple[Keyring, bool]:
    """The source's public keyring, kept in the mirror's keys directory: given
    once (--keyring FILE, from a channel the regulator trusts); a later
    --keyring may add keys (a source's new key), never drop or change one.
    Checked, not saved: (the keyring, whether it is to be saved)."""
    from ledger.crypto.keys import Keyring

    held = Keyring.load(directory.keyring_path) if directory.keyring_path.exists() else None
    if args.keyring is None:
        if held is None:
            raise ConfigError(
                f"no keyring in {directory.path}: give the source's public keyring once "
                "(--keyring FILE)"
            )
        return held, False
    given = Keyring.load(Path(args.keyring))
    if held is not None:
        theirs = {record.key_id: record for record in given}
        changed = [r.key_id for r in held if not _kept(r, theirs.get(r.key_id))]
        if changed:
            raise ConfigError(
                f"--keyring {args.keyring} drops or changes key {changed[0][:16]} of the "
                f"mirror's keyring in {directory.path}: a keyring may only gain keys and "
                "revocations"
            )
    return given, True


def _kept(mine: PublicKeyRecord, theirs: PublicKeyRecord | None) -> bool:
    """`theirs` is `mine`, or `mine` revoked (from the same moment or earlier):
    a revocation is never lifted, nor moved later."""
    if theirs is None:
        return False
    revocation = ("revoked_at", "revocation_reason")
    same = {k: v for k, v in mine.to_json().items() if k not in revocation}
    if same != {k: v for k, v in theirs.to_json().items() if k not in revocation}:
        return False
    if mine.revoked_at is None:
        return True
    return theirs.revoked_at is not None and theirs.revoked_at <= mine.revoked_at


def _not_a_node(directory: KeyDirectory) -> None:
    """A mirror's keys directory is its own: never a node's, whose private
    signing keys it would sit beside (and whose store it would write into)."""
    from ledger.crypto.keys import Keyring, Role
    from ledger.node import holds_private_key

    if not directory.keyring_path.exists():
        return
    if holds_private_key(directory, Keyring.load(directory.keyring_path), Role.LEDGER_NODE):
        raise ConfigError(
            f"keys directory {directory.path} holds a node's private signing key: a mirror "
            "keeps a store and a keys directory of its own (--store URL --keys DIR)"
        )


def _reach(source: Source, follow: bool) -> None:
    """Ask the source once before anything is made: a URL that does not serve a
    ledger node's API (a witness, the tiles, a web page) is refused in one
    line, a token it does not accept too. Following, a source that cannot be
    reached yet is waited for, as later passes wait for it."""
    from ledger.mirror.source import SourceAnswered

    wait = 1.0
    while True:
        try:
            source.checkpoints(0, limit=1)
            return
        except SourceAnswered as exc:
            if exc.status in (401, 403):
                raise ConfigError(
                    f"the source {source.base} refused the token ({exc.status}): give an "
                    "auditor token of that node"
                ) from None
            raise ConfigError(
                f"--from {source.base} does not serve a ledger node's API: GET /v1/checkpoints "
                f"answered {exc.status}"
            ) from None
        except VerificationError:
            raise ConfigError(
                f"--from {source.base} does not serve a ledger node's API: GET /v1/checkpoints "
                "did not answer with a list of checkpoints"
            ) from None
        except StoreUnavailableError as exc:
            if not follow:
                raise
            print(f"mirror: {exc}; trying again in {wait:.1f} s", file=sys.stderr, flush=True)
            time.sleep(wait)
            wait = min(30.0, wait * 2)


def _own_store(app: LedgerApplication, directory: Path, store: str) -> None:
    """A store that holds events no mirror of this directory copied is someone
    else's (a node's own, another mirror's): a mirror writes only into its own."""
    from ledger.mirror.copy import MIRROR_FILE

    held = app.tables.event_count()[0]
    if held and not (directory / MIRROR_FILE).exists():
        raise ConfigError(
            f"the store {store} holds {held} events this mirror did not copy (no "
            f"{MIRROR_FILE} in {directory}): a mirror writes into a store of its own"
        )


def _line(done: Pass, level: Level) -> str:
    lag = f", lag {done.lag_seconds:.2f} s" if done.lag_seconds is not None else ""
    return (
        f"mirror: +{done.events} events, holding {done.size} under the source's checkpoint "
        f"of size {done.checkpoint} (verified at level {level.value}; "
        f"{done.rechecked} events of history re-read and compared){lag}"
    )


def cmd_mirror(args: argparse.Namespace) -> int:
    from ledger.crypto.keystore import keys_dir
    from ledger.mirror.copy import Mirror
    from ledger.mirror.source import Source
    from ledger.store.application import LedgerApplication

    level = Level.parse(args.level)
    source = Source(args.source, _token(args), timeout=args.timeout)
    keys = keys_dir(args.keys)
    _not_a_node(keys)
    keyring, given = _keyring(args, keys)
    games = games_at(level)
    _reach(source, args.follow)
    directory = keys.path / MIRROR_DIR
    url = store_url(args.store)
    app = LedgerApplication(url, keyring=keyring, create=True)
    try:
        _own_store(app, directory, describe(url))
        if given:  # only now is anything written: a ledger's source, the mirror's own store
            keys.path.mkdir(parents=True, exist_ok=True)
            keyring.save(keys.keyring_path)
        mirror = Mirror(
            app,
            keyring,
            source,
            directory,
            level=level,
            games=games,
            batch=args.batch,
            recheck=args.recheck,
            recheck_every=RECHECK_EVERY if args.follow else 0.0,
        )
        if not args.follow:
            print(_line(mirror.sync(), level))
            return 0
        print(f"following {source.base} (Ctrl-C to stop)", file=sys.stderr, flush=True)
        # Ctrl-C ends the loop between two batches, never inside one: an interrupt
        # raised mid-batch could leave a transaction open that closing then waits
        # on (as `checkpoint --follow`). A second Ctrl-C interrupts as usual.
        stopped = threading.Event()

        def stop(*_: object) -> None:
            stopped.set()
            signal.signal(signal.SIGINT, signal.default_int_handler)

        previous = signal.signal(signal.SIGINT, stop)
        try:
            follow_source(mirror, level, args.poll, stopped)
        finally:
            signal.signal(signal.SIGINT, previous)
        print(f"mirror: stopped, holding {mirror.size} events", file=sys.stderr)
        return 130
    finally:
        app.close()


def follow_source(mirror: Mirror, level: Level, poll: float, stopped: threading.Event) -> None:
    """Pass after pass until `stopped`. A source that cannot be reached is tried
    again (waiting longer each time, up to 30 s); a refusal ends the loop."""
    mirror.stop = stopped.is_set
    quiet_since = time.monotonic()
    backoff = poll
    while not stopped.is_set():
        try:
            done = mirror.sync()
        except StoreUnavailableError as exc:
            print(f"mirror: {exc}; trying again in {backoff:.1f} s", file=sys.stderr, flush=True)
            stopped.wait(backoff)
            backoff = min(30.0, max(backoff, 0.1) * 2)
            continue
        backoff = poll
        if done.events or time.monotonic() - quiet_since >= 10:
            print(_line(done, level), file=sys.stderr, flush=True)
            quiet_since = time.monotonic()
        if not done.events:
            stopped.wait(poll)


def add_mirror_command(commands: Any) -> None:
    mirror = commands.add_parser(
        "mirror",
        help="copy a node's log into this store, verifying every event and checkpoint",
        description=(
            "Follow a ledger node's event feed and checkpoints (its HTTP API) into the "
            "store given by --store, checking each batch with `verify` before writing it; "
            "refuse a source whose log does not extend what the mirror holds."
        ),
    )
    mirror.add_argument(
        "--from", dest="source", required=True, help="the source node's URL (http://HOST:PORT)"
    )
    mirror.add_argument(
        "--token-file", help=f"a file holding an auditor token of the source (or ${TOKEN_ENV})"
    )
    mirror.add_argument(
        "--keyring", help="the source's public keyring (once; kept in the keys directory)"
    )
    mirror.add_argument(
        "--level",
        default=Level.SIGNATURES.value,
        help="integrity, signatures (default) or settlement: what verify checks of each batch",
    )
    mirror.add_argument(
        "--follow", action="store_true", help="keep following (progress lines on stderr)"
    )
    mirror.add_argument(
        "--poll",
        type=seconds_range(MIN_POLL, 3600.0),
        default=1.0,
        help=f"seconds between looks when following, {MIN_POLL:g}..3600 (1)",
    )
    mirror.add_argument(
        "--timeout",
        type=seconds_range(1.0, 3600.0),
        default=REQUEST_DEADLINE,
        help=(
            "seconds within which the source must answer each request in full, "
            f"1..3600 ({REQUEST_DEADLINE:g})"
        ),
    )
    mirror.add_argument(
        "--batch",
        type=int_range(1, 1_000_000),
        default=BATCH,
        help=f"events verified and written in one transaction, at most ({BATCH})",
    )
    mirror.add_argument(
        "--recheck",
        type=int_range(0, 10**9),
        default=RECHECK,
        help=(
            f"events of the history already copied re-read from the source and compared "
            f"each pass ({RECHECK}; following, every {RECHECK_EVERY:.0f} s)"
        ),
    )
    mirror.set_defaults(handler=cmd_mirror)
