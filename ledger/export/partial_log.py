"""A partial bundle (one round, or a range of log positions) read by `ledger
verify` as it reads a whole log: a log source that proves the inclusion of
what it holds.

The bundle's structure is checked when it is opened: an inclusion proof for
every event, in log order, against a checkpoint of the bundle whose signature
verifies; consistency proofs that this checkpoint extends the older ones
first covering some of its events; a round bundle holds its round from its
first event, a range bundle every position of its range. Then `ledger
verify`'s own steps run over it (`ledger.audit.verify.Verifier`): the
checkpoints (2), each run of consecutive positions as a chunk, every envelope
against its record, signer, signature and key validity judged, as verify
judges it, by the first checkpoint covering the event (4), each stream's
chain inside the bundle (5), each event's inclusion proof (6, where a whole
log recomputes its roots), the consistency and tlog proofs (7), and at level
settlement each round re-derived by its own game and rules (10, 11). What a
part of the log cannot show (money across wallets, seeds and device reports
outside it) is named as not checked.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ledger.audit.findings import Finding, Findings, Step
from ledger.audit.log.checkpoints import check_not_rolled_back
from ledger.audit.log.chunk_walk import leaf_anyway, verify_rows
from ledger.audit.log.chunks import ChunkResult, ChunkSpec, Problem
from ledger.audit.log.key_times import Coverage, checkpoint_times
from ledger.audit.log.log_events import Event, ledger_transcoder
from ledger.audit.log.log_source import chunk_spec
from ledger.audit.log.parallel import WorkerPlan
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import GENESIS_HASH, Envelope, SignerCheck, open_envelope
from ledger.crypto.keys import Keyring, to_micros
from ledger.crypto.merkle import verify_consistency, verify_inclusion
from ledger.errors import ConfigError, FindingKind, VerificationError
from ledger.export.bundle_files import CONSISTENCY, MANIFEST, PROOFS
from ledger.export.bundle_log import BundleRows
from ledger.export.reader import Bundle, BundleEvent, parse_checkpoint
from ledger.export.tlog_proofs import check_tlog_proofs

#: What a part of the log re-derives at level settlement: its rounds (a wallet's
#: balance and a seed's draws need events the bundle does not hold).
PARTIAL_SETTLEMENT_STEPS: tuple[Step, ...] = (Step.RULES, Step.PAYOUTS)


@dataclass(frozen=True)
class _Proof:
    size: int  # the checkpoint it is against
    path: list[bytes]
    label: str


class PartialBundleLog:
    """A `LogSource` over a round or range bundle (read in this process: it is small)."""

    locates_roots = False
    parallel = False
    settlement_steps = PARTIAL_SETTLEMENT_STEPS

    def __init__(self, bundle: Bundle, keyring: Keyring) -> None:
        self.bundle = bundle
        self.keyring = keyring
        self.transcoder = ledger_transcoder()
        self.checkpoints = _valid_checkpoints(bundle, keyring)
        self.rows = BundleRows({}, [(c, n) for c, n, _ in bundle.checkpoints()])
        self.events_held, self.proofs = _events_and_proofs(bundle, self.checkpoints)
        self.proven = _proven_extensions(bundle, self.checkpoints)
        # (first checkpoint covering, proof's checkpoint) -> events judged by it.
        self.judged_by: dict[tuple[int, int], int] = {}
        self.tlog_line: str | None = None

    # -- LogSource ------------------------------------------------------------

    def plan(
        self,
        sizes: list[int],
        check_signatures: bool,
        chunk_leaves: int,
        times: list[tuple[int, int]],
        start: tuple[int, int] = (0, 0),
    ) -> tuple[int, list[ChunkSpec]]:
        """A chunk for each run of consecutive positions proven under one checkpoint;
        each event's key judged by the first checkpoint covering it that its proof's
        checkpoint is proven to extend (or by that checkpoint itself)."""
        if start != (0, 0):
            raise ConfigError(
                "--resume goes on from a store's saved state: a bundle is verified whole"
            )
        coverage = Coverage(checkpoint_times(list(self.checkpoints.values())))
        specs: list[ChunkSpec] = []
        events, index = self.events_held, 0
        while index < len(events):
            end = index + 1
            size = self.proofs[index].size
            while (
                end < len(events)
                and events[end].position == events[end - 1].position + 1
                and self.proofs[end].size == size
            ):
                end += 1
            for event in events[index:end]:
                self._judged(event, self.checkpoints[size], coverage)
            first, last = events[index].position, events[end - 1].position + 1
            usable = self._usable_times(self.checkpoints[size])
            spec = chunk_spec(first, last, index, end, [], check_signatures, usable)
            specs.append(replace(spec, aligned=False))
            index = end
        return len(events), specs

    def start_plan(self, chunk_leaves: int, start: tuple[int, int] = (0, 0)) -> None:
        pass  # the events were read and checked for order when the bundle was opened

    def end_plan(self) -> None:
        pass

    def longer_than(self, leaves: int) -> bool:
        return False  # read in this process: no workers

    def verify_chunk(self, signer_check: SignerCheck, spec: ChunkSpec) -> ChunkResult:
        """Steps 4 and 5 inside the run (`verify_rows`), then step 6: each event's
        inclusion proof against its checkpoint (kept in `facts` for the merge)."""
        events = self.events_held[spec.after_id : spec.last_id]
        rows = [(e.position + 1, e.stream, e.version, e.topic, e.envelope) for e in events]
        result = verify_rows(spec, rows, signer_check)
        labels = {e.position: e.label for e in events}
        for problem in result.problems:
            problem.message = f"bundle {labels[problem.position]}: {problem.message}"
            problem.located = True
        not_included: list[Problem] = []
        for event, proof in zip(events, self.proofs[spec.after_id : spec.last_id], strict=True):
            checkpoint = self.checkpoints[proof.size]
            try:
                entry = leaf_anyway(event.envelope)
                verify_inclusion(event.position, proof.size, entry, proof.path, checkpoint.root)
            except VerificationError as exc:
                message = f"bundle {event.label}: {exc}"
                not_included.append(Problem(event.position, message, located=True))
        result.facts = not_included
        result.rows = len(rows)
        return result

    def worker_plan(self, keyring_json: str) -> WorkerPlan:
        return WorkerPlan(_no_worker, (), _no_chunk, ())  # (never started: `parallel` is False)

    @property
    def worker_modules(self) -> tuple[str, ...]:
        return ()

    def merge(self, result: ChunkResult) -> Problem | None:
        return None

    def merger(self, found: Findings) -> InclusionMerge:
        return InclusionMerge(found, self)

    def finish_chunks(self) -> None:
        streams = {event.stream for event in self.events_held}
        bundle = self.bundle
        if bundle.kind == "round" and streams != {bundle.round_id}:
            raise VerificationError(
                f"bundle of round {bundle.round_id} holds events of other streams or none of "
                "its own"
            )

    def root_mismatch(self, matched: int, size: int) -> Problem:
        raise AssertionError("a partial bundle recomputes no root: it proves inclusion")

    def first_removed(self, begin: int, end: int) -> Problem | None:
        return None

    def check_proofs(self, checkpoints: list[Checkpoint], trusted: Checkpoint | None) -> None:
        """Step 7: the consistency proofs were checked when the bundle was opened;
        here the tlog-proofs, each event's proof in the C2SP format."""
        check_not_rolled_back(checkpoints, trusted)
        entries = {e.position: header for e, header, _ in self._opened()}
        origin = next(iter(self.checkpoints.values())).origin if self.checkpoints else None
        self.tlog_line = check_tlog_proofs(
            self.bundle.directory, entries, self.keyring, self.checkpoints, origin=origin
        )

    def events(self, progress: Any = None, start: tuple[int, int] = (0, 0)) -> Iterator[Event]:
        for event, _, envelope in self._opened():
            state = self.transcoder.decode(envelope.payload)
            yield (
                event.position,
                event.stream,
                event.version,
                event.topic,
                state,
                envelope.signed_at,
            )

    def chunk_events(self, spec: ChunkSpec, verified: ChunkResult) -> Iterator[Event]:
        raise AssertionError("a partial bundle is settled after its chunks, not between them")

    def events_of_chunk(self, spec: ChunkSpec) -> Iterator[Event]:
        raise AssertionError("a partial bundle is settled after its chunks, not between them")

    # -- what the report says ------------------------------------------------

    def lines(self, streams: int, level_checks_signatures: bool) -> list[str]:
        """What was checked, as the OK report of a partial bundle lists it."""
        used = sorted({proof.size for proof in self.proofs})
        sizes = ", ".join(str(s) for s in used) or "none"
        judged = (
            "before the first checkpoint that covers it"
            if self.proven is not None
            else f"before the checkpoint its proof is against (no {CONSISTENCY}: a bundle "
            "written before it existed, so no older checkpoint vouches for an event)"
        )
        signature = "signature" if level_checks_signatures else "(signatures NOT checked)"
        lines = [
            f"   {len(self.checkpoints)} checkpoint signatures verified; every event proven "
            f"included under the checkpoint of size {sizes}",
            *(
                f"   the checkpoint of size {new} extends the one of size {old} (consistency "
                f"proven), the first that covers {_n(self.judged_by.get((old, new), 0), 'event')} "
                "here"
                for old, new in sorted(self.proven or ())
            ),
            f"   every envelope matches its record, signer and {signature} and was signed "
            f"inside its key's validity, {judged}",
            f"   {streams} streams' chains unbroken inside the bundle"
            + (" from their first event" if self.bundle.kind == "round" else ""),
        ]
        if self.tlog_line is not None:
            lines.append(self.tlog_line)
        if self.bundle.kind == "range" and self.events_held:
            first, last = self.events_held[0].position, self.events_held[-1].position
            lines.append(
                f"   every log position from {first} to {last} is here, none missing (the "
                "range the manifest states)"
            )
        return lines

    # -- helpers ---------------------------------------------------------------

    def _opened(self) -> Iterator[tuple[BundleEvent, bytes, Envelope]]:
        """Each event whose envelope parses (one that does not is a step 4 finding)."""
        for event in self.events_held:
            try:
                envelope = open_envelope(event.envelope, stream=event.stream, version=event.version)
            except VerificationError:
                continue
            yield event, envelope.header, envelope

    def _usable_times(self, proving: Checkpoint) -> list[tuple[int, int]]:
        """The checkpoints an event proven under `proving` may be judged by: it, and
        those it is proven to extend (none but it without consistency.jsonl)."""
        usable = [(proving.size, to_micros(proving.issued_at))]
        for old, new in self.proven or ():
            if new == proving.size and old in self.checkpoints:
                usable.append((old, to_micros(self.checkpoints[old].issued_at)))
        return sorted(usable)

    def _judged(self, event: BundleEvent, proving: Checkpoint, coverage: Coverage) -> None:
        """The first checkpoint covering the event must be the proof's or one the
        proof's checkpoint is proven to extend: dropping a consistency proof must
        not move an event's judgement to a later (more lenient) checkpoint."""
        covered_at, size = coverage.first_covering(event.position)
        if self.proven is None or covered_at is None or size is None or size > proving.size:
            size = proving.size  # the inclusion proof decides
        elif size < proving.size and (size, proving.size) not in self.proven:
            raise VerificationError(
                f"bundle {event.label}: no proof in {CONSISTENCY} that the checkpoint of size "
                f"{proving.size} (its inclusion proof's) extends the one of size {size}, the "
                "first that covers it"
            )
        self.judged_by[size, proving.size] = self.judged_by.get((size, proving.size), 0) + 1


class InclusionMerge:
    """Steps 4 to 6 across a partial bundle's chunks: each chunk's findings, each
    stream's chain across chunks (a range bundle's streams may begin before it;
    a round bundle's from the round's first event), each inclusion proof."""

    def __init__(self, found: Findings, log: PartialBundleLog) -> None:
        self.found, self.log = found, log
        self.heads: dict[str, tuple[int, bytes]] = {}
        self.labels = {e.position: e.label for e in log.events_held}
        self.saved: list[Any] = []
        self.roots: dict[int, bytes] = {}

    def record(self, result: ChunkResult) -> None:
        pass

    def envelopes(self, result: ChunkResult) -> None:
        for problem in result.problems:
            self._finding(Step.ENVELOPES, problem)

    def chains(self, result: ChunkResult) -> None:
        for stream, (position, version, prev) in result.firsts.items():
            problem = self._link(stream, version, prev, self.heads.get(stream))
            if problem:
                message = f"bundle {self.labels[position]}: {problem}"
                self._finding(Step.CHAINS, Problem(position, message, located=True, stream=stream))
        self.heads.update(result.lasts)

    def merkle(self, result: ChunkResult) -> None:
        for problem in result.facts or ():
            self._finding(Step.MERKLE, problem)

    def finish(self, count: int, sizes: set[int]) -> None:
        pass

    def check_stored_tree(self) -> None:
        pass

    def streams(self) -> int:
        return len(self.heads)

    def account_heads(self) -> str:
        return (
            "NOT CHECKED: the account heads maps the checkpoints sign (a partial bundle "
            "holds some accounts' events, not all)"
        )

    def root(self) -> str:
        sizes = [proof.size for proof in self.log.proofs]
        return self.log.checkpoints[max(sizes)].root.hex() if sizes else ""

    def spanning_kept(self) -> list[tuple[int, int, bytes]]:
        return []

    def close(self) -> None:
        pass

    def _link(
        self, stream: str, version: int, prev: bytes, head: tuple[int, bytes] | None
    ) -> str | None:
        if head is None:
            if version == 1 and prev != GENESIS_HASH:
                return "a stream's first event names a previous event"
            if self.log.bundle.kind == "round" and version != 1:
                return (
                    f"the round's events start at version {version}: versions before it are missing"
                )
            return None
        if version != head[0] + 1:
            return (
                f"stream jumps from version {head[0]} to {version}: an event is missing or out "
                "of order"
            )
        if prev != head[1]:
            return "chain broken: previous-envelope hash does not match the stream's previous event"
        return None

    def _finding(self, step: Step, problem: Problem) -> None:
        self.found.add(
            Finding(
                FindingKind.ALTERED, step, str(problem.as_error()), problem.position, problem.stream
            ),
            readable=problem.readable,
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


def _events_and_proofs(
    bundle: Bundle, checkpoints: Mapping[int, Checkpoint]
) -> tuple[list[BundleEvent], list[_Proof]]:
    """Every event with its inclusion proof, in log order (a range with none
    missing), each proof against a valid checkpoint of the bundle."""
    events: list[BundleEvent] = []
    proofs: list[_Proof] = []
    read = bundle.proofs()
    last = -1
    for event in bundle.events():
        label = f"bundle {event.label}"
        proof = next(read, None)
        if proof is None or proof[0] != event.position:
            raise VerificationError(f"{label}: no inclusion proof for it in {PROOFS}")
        if event.position <= last:
            raise VerificationError(f"{label}: after log position {last}: events out of log order")
        if bundle.kind == "range" and events and event.position != last + 1:
            raise VerificationError(
                f"{label}: after log position {last}: the range lacks log positions "
                f"{_span(last + 1, event.position - 1)} (an event was removed)"
            )
        last = event.position
        _, size, path, proof_label = proof
        if size not in checkpoints:
            raise VerificationError(
                f"bundle {proof_label}: no valid checkpoint of size {size} in the bundle"
            )
        events.append(event)
        proofs.append(_Proof(size, path, proof_label))
    if next(read, None) is not None:
        raise VerificationError(f"bundle {PROOFS}: more proofs than events (an event was removed)")
    if bundle.kind == "range":
        first = events[0].position if events else -1
        _check_range(bundle, first, last, len(events))
    return events, proofs


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


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first} to {last}"


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _no_worker() -> None:
    raise AssertionError("a partial bundle is verified in the calling process")


def _no_chunk(spec: ChunkSpec) -> ChunkResult:
    raise AssertionError("a partial bundle is verified in the calling process")
