"""`ledger checkpoint`, `ledger verify`, `ledger proof`: the auditor's commands."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.audit.level import Level
from ledger.cli.args import MAX_INT64, int_range, uuid_text
from ledger.cli.common import WithLedger, loaded_plugins, run_with_ledger
from ledger.cli.passphrase import read_passphrase
from ledger.cli.progress import progress_bar
from ledger.cli.self_verify import (
    add_self_verify_option,
    announce,
    plan_beside_follow,
    refuse_without_follow,
)
from ledger.cli.tiles import publish_tiles
from ledger.crypto.roles import Role
from ledger.errors import CannotCheckError, ConfigError, VerificationError
from ledger.inputs import existing_directory, output_directory, output_file
from ledger.store.config import store_url

# The verifier, the checkpointer and the node are imported by the commands
# that use them, not to build the parser (ledger.cli.main).
if TYPE_CHECKING:
    from collections.abc import Mapping

    from ledger.audit.verify import VerificationReport
    from ledger.casino.opened import Ledger
    from ledger.crypto.checkpoint import Checkpoint
    from ledger.crypto.keys import Keyring
    from ledger.crypto.signing import Signer
    from ledger.crypto.witness_policy import WitnessPolicy
    from ledger.node import Node
    from ledger.plugins.manager import Plugins
    from ledger.plugins.registry import LoadedGame
    from ledger.store.application import LedgerApplication
    from ledger.store.checkpointer import Checkpointer


def _export_path(given: str | None) -> Path | None:
    """Where to write the checkpoint; a bad path fails before anything runs."""
    return None if given is None else output_file(given, "export to")


def cmd_checkpoint(args: argparse.Namespace) -> WithLedger:
    """Catch up (when this keys directory holds the checkpoint key and --no-sign is
    not given), then print or export the newest checkpoint whose signature verifies."""
    export = _export_path(args.export)
    tiles = _tiles_path(args.tiles)
    refuse_without_follow(args)
    return WithLedger(partial(_checkpoint, args, export, tiles))


def _checkpoint(
    args: argparse.Namespace, export: Path | None, tiles: Path | None, ledger: Ledger
) -> int:
    from ledger.audit.proofs import newest_checkpoint
    from ledger.node import holds_private_key
    from ledger.store.witnessing import DEADLINE_SECONDS, CosignatureTable

    interrupted = False  # --follow ends with Ctrl-C: the last checkpoint out, then exit 130
    node = ledger.node
    sign = not args.no_sign and holds_private_key(node.keys, node.keyring, Role.CHECKPOINT)
    publish = _tiles_publisher(node, tiles)
    if args.follow and not sign:
        raise ConfigError("--follow signs checkpoints: it needs the checkpoint private key")
    events, _ = node.app.tables.event_count()
    if sign:
        # (a key kept unencrypted, as `keys create --unencrypted` makes it, needs none)
        node.passphrase = read_passphrase() if node.keys.encrypted(Role.CHECKPOINT) else None
        checkpointer = node.checkpointer()
        if args.follow:
            self_verify = plan_beside_follow(args, node)  # the node's own, on a schedule
            checking = self_verify[1]() if self_verify is not None else None
            print("following the log (Ctrl-C to stop)", file=sys.stderr)
            if self_verify is not None:
                announce(self_verify[0])
            try:
                interrupted = _follow_until_interrupted(checkpointer, lambda: publish(True))
            finally:
                if checking is not None:
                    checking.stop()
        with progress_bar("checkpointing") as (advance, _):
            checkpointer.catch_up(progress=advance)
        if node.witnesses is not None:  # what the witnesses answer in time goes out too
            node.witnesses.close(wait=DEADLINE_SECONDS)
    publish(False)
    newest = newest_checkpoint(node.app, node.keyring)
    if newest is not None:
        newest = CosignatureTable(node.app.tables).cosigned(newest)
    if newest is None:
        if events == 0:
            print("the log is empty: nothing to checkpoint")
            return 0
        raise VerificationError(
            f"the log holds {events} events but no stored checkpoint verifies: nothing to export"
        )
    if sign and newest.size < events:
        raise VerificationError(
            f"after catching up, the newest valid checkpoint (size {newest.size}) still covers "
            f"fewer than the {events} events of the log: nothing exported"
        )
    done = 130 if interrupted else 0
    if export is None:
        print(newest.to_note(), end="")
        return done
    export.write_text(newest.to_note())
    uncovered = events - newest.size
    coverage = (
        "it covers every event of the log"
        if uncovered <= 0
        else f"the {uncovered} newest events of the log are not under it"
    )
    print(f"wrote checkpoint of size {newest.size} to {export}: {coverage}")
    return done


def _tiles_path(given: str | None) -> Path | None:
    """Where --tiles DIR writes; a bad path fails before anything is signed."""
    return None if given is None else output_directory(given, "write tiles to")


def _tiles_publisher(node: Node, directory: Path | None) -> Callable[[bool], None]:
    """With --tiles DIR: a call brings the tiles up to the newest checkpoint
    (quietly while following: a line per turn would drown the terminal)."""
    if directory is None:
        return lambda quiet: None

    def publish(quiet: bool) -> None:
        publish_tiles(node, directory, quiet=quiet, out=sys.stderr)

    return publish


def _follow_until_interrupted(checkpointer: Checkpointer, then: Callable[[], None]) -> bool:
    """Follow the log until Ctrl-C (SIGINT), which ends the loop between two
    batches rather than inside one: an interrupt raised mid-batch could leave a
    transaction open that the last catch-up then waits on. A second Ctrl-C
    during that catch-up interrupts as usual. True once interrupted."""
    stopped = threading.Event()
    previous = signal.signal(signal.SIGINT, lambda *_: stopped.set())
    try:
        checkpointer.follow(stop=stopped.is_set, then=then)
    finally:
        signal.signal(signal.SIGINT, previous)
    return stopped.is_set()


def _load_trusted(path: str | None) -> Checkpoint | None:
    if path is None:
        return None
    from ledger.crypto.checkpoint import Checkpoint

    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read kept checkpoint {path}: {exc.strerror}") from exc
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not a checkpoint note (not UTF-8 text)") from None
    try:
        return Checkpoint.from_note(text)
    except VerificationError as exc:
        # Either form (C2SP, or the project-specific one of releases <= 0.2) is read;
        # anything else is bad input, not a failed check of the log.
        raise ConfigError(f"{path} is not a checkpoint note: {exc}") from None


def _verify_keyring(args: argparse.Namespace) -> tuple[Keyring, str]:
    """The keyring verify trusts: the auditor's own copy (--keyring), else the keys directory's."""
    from ledger.crypto.keys import Keyring
    from ledger.crypto.keystore import keys_dir

    if args.keyring:
        return Keyring.load(Path(args.keyring)), args.keyring
    directory = keys_dir(args.keys)
    return directory.keyring(), str(directory.keyring_path)


def cmd_verify_bundle(args: argparse.Namespace, level: Level, trusted: Checkpoint | None) -> int:
    """`verify --bundle DIR`: no store, no keys directory; the bundle's keyring
    unless the auditor gives their own (--keyring)."""
    from ledger.crypto.keys import Keyring
    from ledger.export.verify_bundle import verify_bundle

    keyring = Keyring.load(Path(args.keyring)) if args.keyring else None
    policy = _witness_policy(args)
    plugins = loaded_plugins() if level is Level.SETTLEMENT else None
    # The count runs twice over the events: loaded (a whole-log bundle), then verified.
    with progress_bar("verifying bundle") as (advance, _):
        report = verify_bundle(
            Path(args.bundle),
            keyring=keyring,
            level=level,
            trusted=trusted,
            workers=args.workers,
            progress=advance,
            plugins=plugins,
        )
    witnessed = []
    if policy is not None:
        from ledger.export.cosigned import newest_cosigned
        from ledger.export.reader import Bundle

        bundle = Bundle(Path(args.bundle))
        used = keyring if keyring is not None else bundle.keyring()
        policy.check_keyring(used)
        newest = newest_cosigned(bundle, used)
        if newest is None:
            raise VerificationError("the bundle holds no valid checkpoint for the witnesses")
        witnessed.append(_witnessed(policy, newest, "the bundle's newest checkpoint"))
        if trusted is not None:
            witnessed.append(_witnessed(policy, trusted, "the kept checkpoint"))
    print(report.summary())
    for line in witnessed:
        print(line)
    return 0


def _witness_policy(args: argparse.Namespace) -> WitnessPolicy | None:
    if args.witness_policy is None:
        return None
    from ledger.crypto.witness_policy import WitnessPolicy

    if args.trusted is None and args.bundle is None:
        raise ConfigError(
            "--witness-policy judges a kept checkpoint (--trusted FILE) or a bundle's (--bundle)"
        )
    return WitnessPolicy.load(Path(args.witness_policy))


def _witnessed(policy: WitnessPolicy, checkpoint: Checkpoint, what: str) -> str:
    """The policy's verdict on `checkpoint`: a line to print, else VerificationError."""
    label = f"{what} (size {checkpoint.size})"
    report = policy.check(checkpoint, what=label)
    return f"   witnesses: {label}: {report.summary()}"


def _auditor(args: argparse.Namespace) -> tuple[Signer, bytes] | None:
    """With --record: the auditor key that signs the run (loaded before verifying,
    so a wrong key or passphrase fails before the work)."""
    if not args.record:
        return None
    from ledger.crypto.keystore import keys_dir

    passphrase = read_passphrase()
    return keys_dir(args.keys).signer(Role.AUDITOR, passphrase, args.auditor_key), passphrase


def _record(args: argparse.Namespace, auditor: tuple[Signer, bytes], run: dict[str, Any]) -> None:
    from ledger.audit.record import record_run

    signer, passphrase = auditor

    def append(ledger: Ledger) -> int:
        record_run(ledger.node.app, run, signer)
        return 0

    # The one ledger verify opens (it read the store as an auditor, no node).
    run_with_ledger(args, WithLedger(append, writable=True, passphrase=passphrase))
    print(
        f"   recorded in the log: verification {run['result']} over {run['tree_size']} events, "
        f"signed by auditor key {signer.key_id[:16]}"
    )


def _findings_file(args: argparse.Namespace) -> Path | None:
    """--findings FILE, checked before the work: a file that can be written."""
    return None if args.findings is None else output_file(args.findings, "write the findings to")


def _report_findings(report: VerificationReport, out: Path | None) -> None:
    """Write the findings (JSON Lines, always: an empty file says none); on any,
    print the run's summary (every step, the first findings) and raise the
    headline, whose exit code says what kind of failure it is."""
    if out is not None:
        with out.open("w", encoding="utf-8") as handle:
            report.findings.write_jsonl(handle)
    headline = report.findings.headline()
    if headline is None:
        return
    print(report.summary())
    if out is not None:
        print(f"   {_n(len(report.findings), 'finding')} written to {out}")
    raise headline


def _state_dir(args: argparse.Namespace) -> Path | None:
    """Where the next saved state goes: --save-state DIR, else the --resume DIR
    it goes on from; checked before the work (creating nothing)."""
    if args.resume is not None and args.save_state is None:
        return existing_directory(args.resume, "--resume")
    if args.save_state is None:
        return None
    return output_directory(args.save_state, "save the state to")


def _start_workers_early(app: LedgerApplication, workers: int | None) -> None:
    """The verifier's own early start (`prepare_workers`), made before this
    process imports the verifier (0.2 s), checks the origin and builds the
    games: on PostgreSQL (its pool's threads) the workers' fork server
    imports what they need meanwhile. The verifier asks again, and finds it
    running."""
    from ledger.audit.log.chunks import CHUNK_LEAVES
    from ledger.audit.log.log_source import StoreLog, prepare_workers

    prepare_workers(StoreLog(app), workers, CHUNK_LEAVES)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def cmd_verify(args: argparse.Namespace) -> int:
    level = Level.parse(args.level)
    trusted = _load_trusted(args.trusted)
    if args.bundle is not None:
        _refuse_store_options(args)
        return cmd_verify_bundle(args, level, trusted)
    policy = _witness_policy(args)
    keyring, source = _verify_keyring(args)
    fingerprint = keyring.fingerprint()
    if policy is not None:
        policy.check_keyring(keyring)
    auditor = _auditor(args)
    witnessed = None
    run = _StoreRun(args, level, trusted, keyring)
    try:
        if policy is not None and trusted is not None:  # before the log: it may be refused
            witnessed = _witnessed(policy, trusted, "the kept checkpoint")
        report, projections = run.verify()
    except (VerificationError, CannotCheckError) as exc:
        # A verdict (or the lack of one): still one line, naming the keyring it rests on.
        exc.args = (f"{exc} [keyring {fingerprint}]",)
        if auditor is not None:
            from ledger.audit.record import failed_run  # imports the verifier: only once it ran
            from ledger.crypto.envelope import now_micros

            failed = failed_run(level.value, run.tree_size, str(exc), fingerprint, now_micros())
            _record(args, auditor, failed)
        raise
    print(report.summary())
    print(f"   trusted keyring {fingerprint} ({source})")
    if witnessed is not None:
        print(witnessed)
    if run.state_dir is not None and report.state is not None:
        print(
            f"   state saved to {run.state_dir} (size {report.state.size}, root "
            f"{report.state.root.hex()}): verify --resume {run.state_dir} checks only what follows"
        )
    if projections is not None:
        print(projections.summary())
    if auditor is not None:
        from ledger.audit.record import passed_run
        from ledger.crypto.envelope import now_micros

        _record(args, auditor, passed_run(report, fingerprint, now_micros()))
    return 0


def _refuse_store_options(args: argparse.Namespace) -> None:
    """What only a store's verification takes, refused for a --bundle."""
    if args.record:
        raise ConfigError("--record appends to a store's log: it cannot verify a --bundle")
    if args.resume or args.save_state:
        raise ConfigError(
            "--save-state and --resume go on along a store's log: a --bundle is verified whole"
        )
    if args.projections:
        raise ConfigError(
            "--projections checks a store's read models against its log: a --bundle has none"
        )
    if args.archive:
        raise ConfigError("--archive gives a store's archived events back: a --bundle has none")


def _games_of_store(
    app: LedgerApplication, plugins: Plugins | None
) -> Mapping[str, LoadedGame] | None:
    """At level settlement, each round re-settled with the rules it pinned: the
    installed games, and those built from the store's rules register."""
    from ledger.audit.games.recorded_games import games_of_store

    if plugins is None:
        return None
    return games_of_store(app, plugins.games(), plugins.game_from_rules)


class _StoreRun:
    """`verify` on a store: its options read (bad ones refused before the log is),
    then the run, its findings written, its state saved, the read models checked."""

    def __init__(
        self, args: argparse.Namespace, level: Level, trusted: Checkpoint | None, keyring: Keyring
    ) -> None:
        from ledger.audit.verify_state import VerifyState

        self.args, self.level, self.trusted, self.keyring = args, level, trusted, keyring
        self.findings_out = _findings_file(args)
        self.state_dir = _state_dir(args)
        if args.resume is not None:
            existing_directory(args.resume, "--resume")
        self.resume = VerifyState.load(Path(args.resume)) if args.resume else None
        self.tree_size = 0

    def verify(self) -> tuple[VerificationReport, Any]:
        from ledger.store.application import LedgerApplication

        args, level = self.args, self.level
        plugins = loaded_plugins() if level is Level.SETTLEMENT else None
        # Read-only, and no keys directory needed: only the public keyring is trusted.
        app = LedgerApplication(store_url(args.store), keyring=self.keyring, create=False)
        try:
            _start_workers_early(app, args.workers)  # before the verifier is imported
            from ledger.audit.findings import Findings
            from ledger.audit.verify import Sinks, VerifyOptions, verify_log, verify_store
            from ledger.store.origin import check_expected_origin

            check_expected_origin(app.tables)
            options = VerifyOptions(
                level=level,
                trusted=self.trusted,
                workers=args.workers,
                games=_games_of_store(app, plugins),
                resume=self.resume,
                save_state=self.state_dir is not None,
            )
            self.tree_size = app.tables.event_count()[0]
            with progress_bar("verifying") as (advance, set_total):
                sinks = Sinks(progress=advance, on_total=set_total, findings=Findings())
                if args.archive:
                    from ledger.archive.fill import ArchivedStoreLog

                    archives = [Path(directory) for directory in args.archive]
                    log = ArchivedStoreLog(app, archives, self.keyring)
                    report = verify_log(log, self.keyring, options, sinks)
                else:
                    report = verify_store(app, self.keyring, options, sinks)
            _report_findings(report, self.findings_out)
            if self.state_dir is not None and report.state is not None:
                report.state.save(self.state_dir, report.rounds)
            projections = None
            if args.projections:  # only once the events themselves are verified
                from ledger.audit.projections import verify_projections

                projections = verify_projections(app)
        finally:
            app.close()
        return report, projections


def cmd_proof(args: argparse.Namespace) -> WithLedger:
    from ledger.audit.proofs import consistency_from, inclusion_of

    trusted = _load_trusted(args.since) if args.kind == "consistency" else None

    def run(ledger: Ledger) -> int:
        node = ledger.node
        if trusted is None:
            result = inclusion_of(node.app, args.stream, args.version, node.keyring)
        else:
            result = consistency_from(node.app, trusted, node.keyring)
        print(json.dumps(result, indent=2))
        return 0

    return WithLedger(run)


def add_audit_commands(commands: Any) -> None:
    checkpoint = commands.add_parser("checkpoint", help="extend the Merkle log, sign a checkpoint")
    checkpoint.add_argument("--export", metavar="FILE", help="write the newest checkpoint here")
    checkpoint.add_argument(
        "--follow",
        action="store_true",
        help="keep following the log: the service to run beside writing nodes",
    )
    checkpoint.add_argument(
        "--tiles",
        metavar="DIR",
        help="also publish the log as C2SP tlog-tiles in DIR (kept current with --follow)",
    )
    add_self_verify_option(checkpoint, "with --follow, the service")
    checkpoint.add_argument(
        "--no-sign",
        action="store_true",
        help="sign nothing: export the newest checkpoint whose signature verifies",
    )
    checkpoint.set_defaults(handler=cmd_checkpoint)

    _add_verify(commands)

    proof = commands.add_parser("proof", help="inclusion or consistency proofs").add_subparsers(
        dest="kind", required=True
    )
    inclusion = proof.add_parser("inclusion", help="prove an event is in the log")
    inclusion.add_argument("stream", type=uuid_text, help="the stream (aggregate) id")
    inclusion.add_argument("version", type=int_range(1, MAX_INT64), help="the event's version")
    inclusion.set_defaults(handler=cmd_proof)
    consistency = proof.add_parser("consistency", help="prove the log only grew since a checkpoint")
    consistency.add_argument("--since", required=True, metavar="FILE")
    consistency.set_defaults(handler=cmd_proof)


def _add_verify(commands: Any) -> None:
    """`ledger verify` and its options."""
    verify = commands.add_parser("verify", help="verify the whole store")
    verify.add_argument(
        "--level", default=Level.SETTLEMENT.value, help="integrity | signatures | settlement"
    )
    verify.add_argument("--trusted", metavar="FILE", help="a checkpoint file kept from earlier")
    verify.add_argument(
        "--witness-policy",
        metavar="FILE",
        help="witnesses and quorum the kept (--trusted) or bundle's checkpoint must meet "
        "(docs/witnesses.md)",
    )
    verify.add_argument(
        "--workers", type=int_range(1, 256), help="processes, 1..256 (default: all cores)"
    )
    verify.add_argument(
        "--projections",
        action="store_true",
        help="also rebuild every read model from the events and compare the stored proj_ rows",
    )
    verify.add_argument(
        "--keyring",
        metavar="FILE",
        help="your own copy of the public keyring (default: the keys directory's)",
    )
    verify.add_argument(
        "--archive",
        action="append",
        metavar="DIR",
        help="an archive the store's archived events are in (ledger archive; repeatable): "
        "they are read back and checked with the rest",
    )
    verify.add_argument(
        "--bundle",
        metavar="DIR",
        help="verify an export bundle (ledger export) instead of a store: no database needed",
    )
    verify.add_argument(
        "--record",
        action="store_true",
        help="append the run's result to the log, signed with an auditor key "
        "(needs the keys directory's ledger-node key too)",
    )
    verify.add_argument(
        "--auditor-key", metavar="NAME", help="the auditor key (default: the only one held)"
    )
    verify.add_argument(
        "--findings",
        metavar="FILE",
        help="write every finding as JSON Lines (docs/schemas/finding.json); empty when none",
    )
    verify.add_argument(
        "--save-state",
        metavar="DIR",
        help="after a run with no finding, save what the next run needs to check only "
        "what is new (DIR/state.json; docs/design.md)",
    )
    verify.add_argument(
        "--resume",
        metavar="DIR",
        help="go on from a state saved by --save-state: the rows before it re-hashed, "
        "the events after it checked in full; the next state is saved there again",
    )
    verify.set_defaults(handler=cmd_verify)
