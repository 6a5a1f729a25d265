"""`ledger verify --bundle DIR`: a bundle verified on a machine with no database.

A whole-log bundle is read as a log (`bundle_log.BundleLog`) and checked by
`ledger verify`'s own code (`verify_log`), every level included. A partial
bundle (one round, or a range of log positions) carries an inclusion proof
per event against one checkpoint, and consistency proofs that this
checkpoint extends the older ones first covering some of its events; it is
checked here: the checkpoints' signatures, each consistency proof, each
envelope against its record, signer, signature and key validity (judged, as
`ledger verify` judges it, by the first checkpoint covering the event), each
stream's chain inside the bundle, the log order, each inclusion proof, and
(level settlement) each round opened in the bundle re-derived by its own
game and rules.

At level settlement, a round's game is the installed one declaring the rules
hash it pinned or, when none does, the game an installed plugin builds from
the rules data the bundle's games.jsonl carries (`ledger_game_from_rules`,
after the data is checked to hash to the rules hash): a bundle is
self-contained for rules wherever the game's code is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.audit.findings import Step
from ledger.audit.games.round_games import games_from_rules
from ledger.audit.games.settlement import SettlementAudit
from ledger.audit.log.key_times import Coverage, SignedWhen, checkpoint_times
from ledger.audit.log.log_events import ledger_transcoder
from ledger.audit.verify import Level, Sinks, VerificationReport, VerifyOptions, verify_log
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import (
    GENESIS_HASH,
    SignerCheck,
    check_row,
    open_envelope,
    where,
)
from ledger.crypto.keys import Keyring, to_micros
from ledger.crypto.merkle import verify_consistency, verify_inclusion
from ledger.crypto.validity import signing_problem
from ledger.errors import ConfigError, VerificationError
from ledger.export.bundle_files import CONSISTENCY, GAMES, MANIFEST, PROOFS
from ledger.export.bundle_log import BundleLog
from ledger.export.reader import Bundle, parse_checkpoint
from ledger.export.tlog_proofs import check_tlog_proofs, refuse_tlog_proofs
from ledger.plugins.manager import Plugins
from ledger.plugins.registry import LoadedGame


@dataclass
class BundleReport:
    kind: str
    keyring_source: str
    events: int = 0
    games: int = 0
    store: VerificationReport | None = None  # a whole-log bundle: verify's own report
    lines: list[str] = field(default_factory=list)  # a partial bundle: what was checked
    built: list[str] = field(default_factory=list)  # games built from the bundle's rules data

    def summary(self) -> str:
        if self.store is not None:
            head = self.store.summary().replace("OK: ", "OK (bundle, the whole log): ", 1)
            extra = [
                "   every checkpoint's root recomputed from the bundle's events (a bundle "
                "holds no Merkle tree: consistency between checkpoints follows from the roots)",
                f"   {self.games} game profiles' rules match the rules hash their rounds pinned",
            ]
        else:
            events = f"{self.events} event{'' if self.events == 1 else 's'}"
            head, extra = f"OK (bundle, {self.kind}): {events}", self.lines
        return "\n".join([head, *extra, *self.built, f"   keyring: {self.keyring_source}"])


def verify_bundle(
    directory: Path,
    *,
    keyring: Keyring | None = None,
    level: Level = Level.SETTLEMENT,
    trusted: Checkpoint | None = None,
    workers: int | None = None,
    progress: Callable[[int], None] | None = None,
    games: Mapping[str, LoadedGame] | None = None,
    plugins: Plugins | None = None,
) -> BundleReport:
    """Verify the bundle in `directory`; raise the first `VerificationError`.

    `keyring` is the auditor's own (default: the bundle's keyring.json). At level
    settlement, `plugins` (the caller's: this layer loads none) build the games
    of the rules data in games.jsonl that none of `games` (default: `plugins`'
    games) declares."""
    bundle = Bundle(directory)
    source = "the auditor's own keyring" if keyring is not None else "the bundle's keyring.json"
    keyring = keyring if keyring is not None else bundle.keyring()
    profiles = bundle.games()  # the rules data of games.jsonl
    report = BundleReport(bundle.kind, source, games=len(profiles))
    if level is Level.SETTLEMENT:
        if plugins is None:
            raise ValueError("level settlement re-derives every round: verify_bundle(plugins=...)")
        pinned = games_from_rules(
            plugins.games() if games is None else games,
            _rules_data(profiles),
            plugins.game_from_rules,
            source=f"bundle {GAMES}",
        )
        report.built = [
            f"   {game_id} (rules {rules[:12]}) is not installed here: its game was built "
            f"from the rules data in {GAMES} by {game.plugin} {game.version}"
            for game_id, rules, game in pinned.built_games
        ]
        games = pinned
    if bundle.whole_log:
        refuse_tlog_proofs(bundle.directory)
        try:
            report.store = verify_log(
                BundleLog(bundle),
                keyring,
                VerifyOptions(level=level, trusted=trusted, workers=workers, games=games),
                sinks=Sinks(progress=progress),
            )
        except VerificationError as exc:
            message = str(exc)
            raise VerificationError(
                message if message.startswith("bundle") else f"bundle: {message}"
            ) from None
        report.events = report.store.events
    else:
        if trusted is not None:
            raise ConfigError("--trusted needs a whole-log bundle (consistency proofs)")
        _verify_partial(bundle, keyring, level, {} if games is None else games, report, progress)
    _check_manifest_count(bundle, report.events)
    _check_profiles(bundle, profiles)
    return report


def _rules_data(games: list[dict[str, Any]]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(game id, rules hash, rules data) of every game profile carrying its rules
    (`Bundle.games` has checked each against its hash)."""
    return [
        (g["game"], g["rules_hash"], g["rules"])
        for g in games
        if type(g.get("game")) is str and type(g.get("rules")) is dict
    ]


def _check_manifest_count(bundle: Bundle, events: int) -> None:
    stated = bundle.manifest.get("events")
    if stated != events:
        raise VerificationError(
            f"bundle manifest.json says {stated!r} events but events.jsonl holds {events}: "
            "the bundle is incomplete or was added to"
        )


def _check_profiles(bundle: Bundle, games: list[dict[str, object]]) -> None:
    """Every round's pinned rules are in games.jsonl, as data."""
    present = {(g.get("game"), g.get("rules_hash")) for g in games if g.get("rules") is not None}
    for game, rules in sorted(bundle.profiles_used):
        if (game, rules) not in present:
            raise VerificationError(
                f"bundle {GAMES}: the rules of {game} (rules hash {rules[:12]}), which a round "
                "opened with, are missing"
            )


def _valid_checkpoints(bundle: Bundle, keyring: Keyring) -> dict[int, Checkpoint]:
    """Every exported checkpoint, parsed and its signature checked, by signed size
    (of two of one size, the earlier issued: both say the events existed then)."""
    found: dict[int, Checkpoint] = {}
    origin = None
    for column, note, label in bundle.checkpoints():
        checkpoint = parse_checkpoint(note, label)
        if column != checkpoint.size:
            raise VerificationError(
                f"bundle {label}: its tree_size {column!r} is not the size it signs "
                f"({checkpoint.size})"
            )
        try:
            checkpoint.verify(keyring, origin=origin)
        except VerificationError as exc:
            raise VerificationError(f"bundle {label}: {exc}") from None
        origin = checkpoint.origin
        if checkpoint.size in found and found[checkpoint.size].root != checkpoint.root:
            raise VerificationError(
                f"bundle {label}: two signed checkpoints of size {checkpoint.size} state "
                "different roots (a fork)"
            )
        if checkpoint.size not in found or checkpoint.issued_at < found[checkpoint.size].issued_at:
            found[checkpoint.size] = checkpoint
    return found


def _proven_extensions(
    bundle: Bundle, checkpoints: Mapping[int, Checkpoint]
) -> set[tuple[int, int]] | None:
    """(old size, new size) of every consistency proof of the bundle, each checked
    against the two checkpoints' roots; None when the bundle has no consistency.jsonl."""
    lines = bundle.consistency()
    if lines is None:
        return None
    proven = set()
    for old, new, proof, label in lines:
        for size in (old, new):
            if size not in checkpoints:
                raise VerificationError(
                    f"bundle {label}: no valid checkpoint of size {size} in the bundle"
                )
        try:
            verify_consistency(old, new, proof, checkpoints[old].root, checkpoints[new].root)
        except VerificationError as exc:
            raise VerificationError(f"bundle {label}: {exc}") from None
        proven.add((old, new))
    return proven


def _verify_partial(
    bundle: Bundle,
    keyring: Keyring,
    level: Level,
    games: Mapping[str, LoadedGame],
    report: BundleReport,
    progress: Callable[[int], None] | None,
) -> None:
    checkpoints = _valid_checkpoints(bundle, keyring)
    coverage = Coverage(checkpoint_times(list(checkpoints.values())))
    proven = _proven_extensions(bundle, checkpoints)
    judged_by: dict[tuple[int, int], int] = {}  # (first covering, proof's size) -> events
    signer_check = SignerCheck(keyring)
    transcoder = ledger_transcoder()
    rounds = SettlementAudit(keyring, games, steps=(Step.RULES, Step.PAYOUTS))
    heads: dict[str, tuple[int, bytes]] = {}
    proofs = bundle.proofs()
    last_position = first_position = -1
    used: set[int] = set()
    entries: dict[int, bytes] = {}  # log position -> header, for the tlog-proofs
    count = 0
    for event in bundle.events():
        label = f"bundle {event.label}"
        proof = next(proofs, None)
        if proof is None or proof[0] != event.position:
            raise VerificationError(f"{label}: no inclusion proof for it in {PROOFS}")
        if event.position <= last_position:
            raise VerificationError(
                f"{label}: after log position {last_position}: events out of log order"
            )
        if bundle.kind == "range" and count and event.position != last_position + 1:
            raise VerificationError(
                f"{label}: after log position {last_position}: the range lacks log positions "
                f"{_span(last_position + 1, event.position - 1)} (an event was removed)"
            )
        first_position = event.position if count == 0 else first_position
        last_position = event.position
        _, size, path, proof_label = proof
        checkpoint = checkpoints.get(size)
        if checkpoint is None:
            raise VerificationError(
                f"bundle {proof_label}: no valid checkpoint of size {size} in the bundle"
            )
        used.add(size)
        stream, version = event.stream, event.version
        try:
            envelope = open_envelope(event.envelope, stream=stream, version=version)
            check_row(envelope, stream=stream, version=version, topic=event.topic)
            if level is Level.INTEGRITY:
                signer_check.check_signer(envelope, stream=stream, version=version)
            else:
                signer_check.check_signature(envelope, stream=stream, version=version)
            bound, covered_size = _first_covering(event.position, checkpoint, coverage, proven)
            judged_by[covered_size, size] = judged_by.get((covered_size, size), 0) + 1
            signed_at = bound if envelope.signed_at is None else envelope.signed_at
            window = signer_check.windows[envelope.key_id]
            problem = signing_problem(signed_at, window, bound, covered_size)
            if problem:
                raise VerificationError(problem, where=where(stream, version))
            _check_link(stream, version, envelope.prev_hash, heads.get(stream), bundle)
            verify_inclusion(event.position, size, envelope.entry_hash, path, checkpoint.root)
            entries[event.position] = envelope.header
        except VerificationError as exc:
            raise VerificationError(f"{label}: {exc}") from None
        heads[stream] = (version, envelope.entry_hash)
        if level is Level.SETTLEMENT:
            state = transcoder.decode(envelope.payload)
            at = f"{where(stream, version)} ({label})"
            rounds.check(stream, event.topic, state, at, SignedWhen(-1), event.position)
        count += 1
        if progress and count % 1000 == 0:
            progress(1000)
    if next(proofs, None) is not None:
        raise VerificationError(f"bundle {PROOFS}: more proofs than events (an event was removed)")
    if bundle.kind == "round" and set(heads) != {bundle.round_id}:
        raise VerificationError(
            f"bundle of round {bundle.round_id} holds events of other streams or none of its own"
        )
    if bundle.kind == "range":
        _check_range(bundle, first_position, last_position, count)
    report.events = count
    origin = next(iter(checkpoints.values())).origin if checkpoints else None
    tlog_proofs = check_tlog_proofs(bundle.directory, entries, keyring, checkpoints, origin=origin)
    sizes = ", ".join(str(s) for s in sorted(used)) or "none"
    judged = (
        "before the first checkpoint that covers it"
        if proven is not None
        else f"before the checkpoint its proof is against (no {CONSISTENCY}: a bundle "
        "written before it existed, so no older checkpoint vouches for an event)"
    )
    report.lines = [
        f"   {len(checkpoints)} checkpoint signatures verified; every event proven included "
        f"under the checkpoint of size {sizes}",
        *(
            f"   the checkpoint of size {new} extends the one of size {old} (consistency "
            f"proven), the first that covers {_n(judged_by.get((old, new), 0), 'event')} here"
            for old, new in sorted(proven or ())
        ),
        f"   every envelope matches its record, signer and "
        f"{'signature' if level is not Level.INTEGRITY else '(signatures NOT checked)'} "
        f"and was signed inside its key's validity, {judged}",
        f"   {len(heads)} streams' chains unbroken inside the bundle"
        + (" from their first event" if bundle.kind == "round" else ""),
    ]
    if tlog_proofs is not None:
        report.lines.append(tlog_proofs)
    if bundle.kind == "range":
        report.lines.append(
            f"   every log position from {first_position} to {last_position} is here, none "
            "missing (the range the manifest states)"
        )
    if level is Level.SETTLEMENT:
        report.lines.append(
            f"   {rounds.rounds} rounds re-derived (step order, fault policy); "
            f"{rounds.payouts.resettled} settlements re-settled with their own game and rules "
            f"({rounds.payouts.bets} bets)"
        )
    report.lines.append(
        "   NOT CHECKED here: money across wallets, RNG seeds and device reports outside the "
        "bundle, events of the log not in the bundle (verify a whole-log bundle for those)"
    )


def _first_covering(
    position: int,
    proving: Checkpoint,
    coverage: Coverage,
    proven: set[tuple[int, int]] | None,
) -> tuple[int, int]:
    """(issue time µs, size) of the checkpoint an event's keys are judged by: the
    first covering it, which must be the one its inclusion proof is against or one
    that checkpoint is proven to extend (consistency.jsonl); the proving checkpoint
    itself for a bundle written before consistency.jsonl existed."""
    covered_at, size = coverage.first_covering(position)
    if proven is None or covered_at is None or size is None or size > proving.size:
        return to_micros(proving.issued_at), proving.size  # the inclusion proof decides
    if size < proving.size and (size, proving.size) not in proven:
        raise VerificationError(
            f"no proof in {CONSISTENCY} that the checkpoint of size {proving.size} (its "
            f"inclusion proof's) extends the one of size {size}, the first that covers it"
        )
    return covered_at, size


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first} to {last}"


def _check_range(bundle: Bundle, first: int, last: int, count: int) -> None:
    """A range bundle holds every position of the range its manifest states."""
    manifest = bundle.manifest
    selection = manifest.get("selection") or {}
    stated_first = selection.get("from")
    stated_first = 0 if stated_first is None else stated_first
    stated_last = selection.get("to")
    log_size = manifest.get("log_size")
    if stated_last is None and type(log_size) is int:
        stated_last = log_size - 1
    if count == 0:
        raise VerificationError(f"bundle of range {stated_first}..{stated_last} holds no event")
    if (stated_first, stated_last) != (first, last) or (
        manifest.get("first_position"),
        manifest.get("last_position"),
    ) != (first, last):
        raise VerificationError(
            f"bundle {MANIFEST}: the range is log positions {stated_first}..{stated_last} "
            f"(first {manifest.get('first_position')!r}, last "
            f"{manifest.get('last_position')!r}), but the events are positions {first}..{last}: "
            f"positions {_missing(stated_first, stated_last, first, last)} are missing"
        )


def _missing(stated_first: object, stated_last: object, first: int, last: int) -> str:
    gaps = []
    if type(stated_first) is int and stated_first < first:
        gaps.append(_span(stated_first, first - 1))
    if type(stated_last) is int and stated_last > last:
        gaps.append(_span(last + 1, stated_last))
    return " and ".join(gaps) or "outside the events' range (the manifest was altered)"


def _check_link(
    stream: str, version: int, prev: bytes, head: tuple[int, bytes] | None, bundle: Bundle
) -> None:
    if head is None:
        if version == 1 and prev != GENESIS_HASH:
            raise VerificationError("a stream's first event names a previous event")
        if bundle.kind == "round" and version != 1:
            raise VerificationError(
                f"the round's events start at version {version}: versions before it are missing"
            )
        return
    if version != head[0] + 1:
        raise VerificationError(
            f"stream jumps from version {head[0]} to {version}: an event is missing or out of order"
        )
    if prev != head[1]:
        raise VerificationError(
            "chain broken: previous-envelope hash does not match the stream's previous event"
        )
