"""A whole-log bundle read by `ledger verify` as it reads a store: no database.

One pass over events.jsonl as bytes finds where each line starts (an array
of offsets, 8 bytes an event) and the few lines of the key registry and the
audit trail, which verification reads first. The log is then cut into chunks
of lines that worker processes read, check line by line against their own
envelope bytes (`reader.checked_event`), and verify exactly as a store's rows
(`chunk_walk.verify_rows`); what crosses chunks (each stream's currency, which
game profiles rounds pinned, where the registry's lines are) is merged in log
order here. The settlement level reads the lines once more, in order.

A bundle holds no Merkle rows: every checkpoint's root is recomputed from the
events (which is what consistency proofs would vouch for), and a root that
differs cannot be narrowed to one event.
"""

from __future__ import annotations

import base64
import hashlib
import json
from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from ledger.audit.findings import SETTLEMENT_STEPS, Findings
from ledger.audit.log.checkpoints import check_not_rolled_back
from ledger.audit.log.chunk_types import Merge
from ledger.audit.log.chunk_walk import verify_rows
from ledger.audit.log.chunks import ChunkResult, ChunkSpec, Problem, no_cycle_collection
from ledger.audit.log.log_events import Event, ledger_transcoder
from ledger.audit.log.log_source import chunk_spec
from ledger.audit.log.parallel import WorkerPlan
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import (
    ENVELOPE_PREFIX,
    MAGIC,
    SIGNED_AT_OFFSET,
    SignerCheck,
    open_envelope,
)
from ledger.crypto.keys import Keyring
from ledger.domain.audit_trail import AUDIT_TRAIL_ID
from ledger.domain.erasures import ERASURES_ID
from ledger.domain.key_registry import KEY_REGISTRY_ID
from ledger.errors import ConfigError, VerificationError
from ledger.export.bundle_files import EVENTS
from ledger.export.reader import (
    Bundle,
    BundleEvent,
    StreamCurrencies,
    canonical_event,
    checked_event,
    currency_problem,
    opens_round,
    round_profile,
)
from ledger.export.records import stream_type_version
from ledger.store.merkle_log import CheckpointRow
from ledger.store.recorders import Row

# Streams verification reads before the log (revocations, recorded runs, erasures).
INDEXED: Final = (str(KEY_REGISTRY_ID), str(AUDIT_TRAIL_ID), str(ERASURES_ID))
_INDEXED_BYTES: Final = tuple(s.encode() for s in INDEXED)
_decode = json.JSONDecoder().decode
_ENVELOPE_KEY: Final = b',"envelope":"'
# Bytes read at a time when a bundle is opened: larger blocks are fresh memory
# each time, whose page faults cost more than the reading (a 676 MB bundle's
# scan took 0.32 s with 1 MB blocks, 0.73 s with 4 MB ones).
_SCAN_BLOCK: Final = 1 << 20


class BundleRows:
    """The lookups of `LogRows`, from the bundle: the indexed streams' events
    by version, notification id = log position + 1, and the checkpoints."""

    def __init__(self, indexed: dict[tuple[str, int], Row], checkpoints: list[CheckpointRow]):
        self._indexed = indexed
        self._checkpoints = checkpoints

    def row_by_stream(self, stream: str, version: int) -> Row | None:
        if stream not in INDEXED:
            raise LookupError(f"stream {stream} is not indexed in a bundle")
        return self._indexed.get((stream, version))

    def position_of(self, notification_id: int) -> int:
        return notification_id - 1

    def checkpoint_rows(self) -> list[CheckpointRow]:
        return list(self._checkpoints)


@dataclass
class ChunkFacts:
    """What one chunk's lines say that other chunks must agree with."""

    currencies: StreamCurrencies = field(default_factory=StreamCurrencies)
    profiles: set[tuple[str, str]] = field(default_factory=set)
    indexed: list[int] = field(default_factory=list)  # positions of INDEXED streams' events
    rewritten: list[int] = field(default_factory=list)  # lines not as the ledger writes them
    # For the settling process (a chunk it asked the digest of, with no finding and
    # every line as the ledger writes it): every line's envelope bytes as
    # verified, so it need not read and decode the lines again (no digest then).
    envelopes: list[bytes] | None = None


class BundleLog:
    """A `LogSource` over a whole-log bundle."""

    locates_roots = False  # no Merkle rows: a root says only that something differs
    parallel = True
    settlement_steps = SETTLEMENT_STEPS

    def __init__(self, bundle: Bundle, progress: Callable[[int], None] | None = None) -> None:
        self.bundle = bundle
        self.path = bundle.directory / EVENTS
        self.transcoder = ledger_transcoder()
        self._offsets = array("q")
        indexed = self._scan(progress)
        self._indexed_positions = {row[0] - 1 for row in indexed.values()}
        self.rows = BundleRows(indexed, [(c, n) for c, n, _ in bundle.checkpoints()])
        self._currencies: dict[str, object] = {}  # each stream's, from its opening event
        self._indexed_seen: set[int] = set()
        self._rewritten: set[int] = set()

    @property
    def count(self) -> int:
        return len(self._offsets) - 1

    def _scan(self, progress: Callable[[int], None] | None) -> dict[tuple[str, int], Row]:
        """Line offsets, and the events of the indexed streams (checked lines).
        The file is read in blocks, each searched in C for newlines (no line
        object made) and for the indexed streams' ids."""
        offsets = self._offsets
        offsets.append(0)
        append = offsets.append
        found: dict[int, bytes] = {}  # a candidate line's offset -> the line
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            raise VerificationError(f"bundle file {EVENTS} cannot be read: {exc.strerror}") from exc
        with handle:
            carry, base = b"", 0  # the start of a line the last block cut; its offset
            while read := handle.read(_SCAN_BLOCK):
                block = carry + read
                find = block.find
                at = find(b"\n")
                while at >= 0:
                    append(base + at + 1)  # where the next line starts
                    at = find(b"\n", at + 1)
                whole = block.rfind(b"\n") + 1  # the block's whole lines end there
                for needle in _INDEXED_BYTES:
                    hit = find(needle, 0, whole)
                    while hit >= 0:
                        start, stop = block.rfind(b"\n", 0, hit) + 1, find(b"\n", hit) + 1
                        found[base + start] = block[start:stop]
                        hit = find(needle, stop, whole)
                carry, base = block[whole:], base + whole
            if carry:  # a last line with no newline
                append(base + len(carry))
                if any(needle in carry for needle in _INDEXED_BYTES):
                    found[base] = carry
        candidates = [(bisect_left(offsets, start) + 1, found[start]) for start in sorted(found)]
        indexed: dict[tuple[str, int], Row] = {}
        for number, raw in candidates:
            try:
                event, _ = _line_event(raw, number, number - 1)
            except VerificationError:
                continue  # not indexed: the chunk that reads it names what is wrong, in order
            if event.stream in INDEXED:
                row = (event.position + 1, event.stream, event.version, event.topic, event.envelope)
                indexed[(event.stream, event.version)] = row
        return indexed

    def plan(
        self,
        sizes: list[int],
        check_signatures: bool,
        chunk_leaves: int,
        times: list[tuple[int, int]],
        start: tuple[int, int] = (0, 0),
    ) -> tuple[int, list[ChunkSpec]]:
        if start != (0, 0):
            raise ConfigError(
                "--resume goes on from a store's saved state: a bundle is verified whole"
            )
        count, specs = self.count, []
        for first in range(0, count, chunk_leaves):
            end = min(first + chunk_leaves, count)
            offset = self._offsets[first]
            specs.append(chunk_spec(first, end, first, end, sizes, check_signatures, times, offset))
        return count, specs

    def start_plan(self, chunk_leaves: int, start: tuple[int, int] = (0, 0)) -> None:
        pass  # a bundle's chunks come from the line offsets it read when it was opened

    def end_plan(self) -> None:
        pass

    def longer_than(self, leaves: int) -> bool:
        return self.count > leaves  # the lines it read when it was opened

    def verify_chunk(self, signer_check: SignerCheck, spec: ChunkSpec) -> ChunkResult:
        return verify_lines(self.path, signer_check, spec)

    def worker_plan(self, keyring_json: str) -> WorkerPlan:
        args = (str(self.path), keyring_json)
        return WorkerPlan(init_worker, args, verify_chunk, self.worker_modules)

    @property
    def worker_modules(self) -> tuple[str, ...]:
        return ("ledger.export.bundle_log",)

    def merge(self, result: ChunkResult) -> Problem | None:
        facts: ChunkFacts = result.facts
        for stream, (currency, position, label) in facts.currencies.assumed.items():
            # A stream never opened is named by its chain (version 1 missing).
            expected = self._currencies.get(stream, currency)
            if currency != expected:
                source = "from the stream's opening event"
                message = currency_problem(label, currency, expected, source)
                return Problem(position, message, located=True)
        self._currencies.update(facts.currencies.opened)
        self.bundle.profiles_used.update(facts.profiles)
        self._indexed_seen.update(facts.indexed)
        self._rewritten.update(facts.rewritten)
        return None

    def merger(self, found: Findings) -> Merge | None:
        return None  # the whole log, in order

    def finish_chunks(self) -> None:
        differ = self._indexed_seen ^ self._indexed_positions
        if differ:
            position = min(differ)
            raise VerificationError(
                f"bundle {EVENTS} line {position + 1} (log position {position}): an event of "
                "the key registry or the audit trail that does not spell its stream id as the "
                "ledger writes it, so it was not read before the log"
            )

    def root_mismatch(self, matched: int, size: int) -> Problem:
        return Problem(
            matched,
            f"the Merkle root of the first {size} events does not match its checkpoint: an "
            f"event at a log position from {matched} to {size - 1} was changed, removed or "
            "inserted (a bundle holds no Merkle leaves of the store's to say which)",
        )

    def first_removed(self, begin: int, end: int) -> Problem | None:
        return None  # no stored leaves to compare with

    def check_proofs(self, checkpoints: list[Checkpoint], trusted: Checkpoint | None) -> None:
        # Every checkpoint's root was recomputed from the events: consistency
        # proofs between them would add nothing, and a bundle has no tree to serve them.
        check_not_rolled_back(checkpoints, trusted)

    def events(self, progress: Any = None, start: tuple[int, int] = (0, 0)) -> Iterator[Event]:
        if start != (0, 0):
            raise ConfigError("a bundle is verified whole")
        return self._events(progress)

    def chunk_events(self, spec: ChunkSpec, verified: ChunkResult) -> Iterator[Event]:
        facts: ChunkFacts = verified.facts
        if facts.envelopes is not None and not verified.problems:
            # Handed over by the worker that verified them: the very bytes verified.
            return self._of_envelopes(enumerate(facts.envelopes, spec.first_leaf))
        if verified.digest is None:
            return self.events_of_chunk(spec)
        # The digest proves these are the lines the chunk verified (or says
        # they changed since), so their envelopes are not opened again.
        with self.path.open("rb") as handle:
            handle.seek(spec.offset)
            lines = [handle.readline() for _ in range(spec.first_leaf, spec.last_id)]
        if lines_digest(lines) != verified.digest:
            raise VerificationError(
                f"bundle {EVENTS} lines {spec.first_leaf + 1} to {spec.last_id} changed while "
                "they were being verified: someone is writing to the bundle"
            )
        found = {problem.position for problem in verified.problems}
        return self._verified(enumerate(lines, spec.first_leaf), found)

    def events_of_chunk(self, spec: ChunkSpec) -> Iterator[Event]:
        with self.path.open("rb") as handle:
            handle.seek(spec.offset)
            lines = (handle.readline() for _ in range(spec.first_leaf, spec.last_id))
            yield from self._decoded(enumerate(lines, spec.first_leaf))

    def _events(self, progress: Any) -> Iterator[Event]:
        """Every event in log order, from its envelope (the chunks already checked
        each line against its envelope). A line as the ledger writes it has its
        envelope right after `,"envelope":"`, the first place that text can be
        (a JSON string holds no bare quote); any other line is parsed, as the
        chunk that checked it parsed it."""
        with self.path.open("rb") as handle:
            for event in self._decoded(enumerate(handle)):
                yield event
                if progress and event[0] % 1000 == 999:
                    progress(1000)

    def _verified(self, lines: Iterable[tuple[int, bytes]], found: set[int]) -> Iterator[Event]:
        """The events of lines a chunk has just verified, byte for byte these
        lines, read as `log_events.verified_events` reads a store's verified
        rows: the envelope not opened again, its stream, type and version read
        off the canonical header (`stream_type_version`), the payload after
        the signature, the signing time's digits at their fixed offset. A line
        the chunk made a finding of or read no further than (every line from
        its first finding on), one not as the ledger writes it, and a release
        0.1 envelope are read as `_decoded` reads them."""
        cut = min(found, default=None)
        rewritten = self._rewritten
        for position, raw in lines:
            event = None
            if (cut is None or position < cut) and position not in rewritten:
                event = self._verified_line(position, raw)
            if event is None:
                yield from self._decoded([(position, raw)])
            else:
                yield event

    def _verified_line(self, position: int, raw: bytes) -> Event | None:
        try:
            start = raw.index(_ENVELOPE_KEY) + len(_ENVELOPE_KEY)
            state = base64.b64decode(raw[start : raw.index(b'"', start)])
        except (TypeError, ValueError):
            return None  # `_decoded` reads it, or passes over it as it always did
        return self._verified_envelope(position, state)

    def _verified_envelope(self, position: int, state: bytes) -> Event | None:
        """The event of envelope bytes a chunk verified, its envelope not opened
        again; None for one the fast reading does not take (a v1 envelope)."""
        prefix, at = ENVELOPE_PREFIX.size, ENVELOPE_PREFIX.size + SIGNED_AT_OFFSET
        try:
            if state[:4] != MAGIC:
                return None
            header_end = prefix + int.from_bytes(state[4:prefix], "big")
            stream, version, topic = stream_type_version(state[prefix:header_end].decode())
            payload = self.transcoder.decode(state[header_end + 64 :])
            signed_at = int(state[at : state.index(b",", at)])
        except (TypeError, ValueError, AttributeError):
            return None
        return position, stream, version, topic, payload, signed_at

    def _of_envelopes(self, envelopes: Iterable[tuple[int, bytes]]) -> Iterator[Event]:
        """The events of a chunk's envelopes as its worker verified them (no
        line in it had a finding or was written otherwise than the ledger does)."""
        for position, state in envelopes:
            event = self._verified_envelope(position, state)
            if event is None:
                event = self._opened(position, state)
            if event is not None:
                yield event

    def _decoded(self, lines: Iterable[tuple[int, bytes]]) -> Iterator[Event]:
        b64decode, rewritten = base64.b64decode, self._rewritten
        for position, raw in lines:
            try:
                if position in rewritten:
                    state = b64decode(_decode(raw.decode("utf-8"))["envelope"])
                else:
                    start = raw.index(_ENVELOPE_KEY) + len(_ENVELOPE_KEY)
                    state = b64decode(raw[start : raw.index(b'"', start)])
            except (ValueError, KeyError, TypeError, AttributeError):
                continue  # an unreadable line: its chunk's check made it a finding
            event = self._opened(position, state)
            if event is not None:
                yield event

    def _opened(self, position: int, state: bytes) -> Event | None:
        """The event of envelope bytes, the envelope opened; None if it cannot be."""
        try:
            envelope = open_envelope(state, stream="bundle", version=position)
            payload = self.transcoder.decode(envelope.payload)
        except (VerificationError, ValueError, KeyError, TypeError, AttributeError):
            return None  # an unreadable envelope: its chunk's check made it a finding
        return (
            position,
            envelope.stream,
            envelope.version,
            envelope.event_type,
            payload,
            envelope.signed_at,
        )


def _line_event(raw: bytes, number: int, position: int) -> tuple[BundleEvent, object]:
    """Line `number` of events.jsonl, checked, which must hold log position `position`."""
    fast = canonical_event(raw, number)  # as the ledger writes it: no JSON parsed
    if fast is not None and fast[0].position == position:
        return fast
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise VerificationError(f"bundle {EVENTS} line {number} is not UTF-8 text") from None
    try:
        record = _decode(line)
    except ValueError:
        raise VerificationError(f"bundle {EVENTS} line {number} is not JSON") from None
    event, currency = checked_event(line, record, number)
    if event.position != position:
        raise VerificationError(
            f"bundle {event.label}: expected log position {position} next: the bundle "
            "holds the whole log, so an event is missing, repeated or out of order"
        )
    return event, currency


def verify_lines(path: Path, signer_check: SignerCheck, spec: ChunkSpec) -> ChunkResult:
    """One chunk of events.jsonl: each line checked, then verified as a store row
    (with the cyclic collector off, as a store's chunk is: its thousands of
    events and rows hold no cycle)."""
    with no_cycle_collection():
        return _verify_lines(path, signer_check, spec)


def _verify_lines(path: Path, signer_check: SignerCheck, spec: ChunkSpec) -> ChunkResult:
    rows: list[Row] = []
    facts = ChunkFacts()
    problem = None
    # The lines as read, for their digest: wanted only if the settling process
    # must read them again (a finding, a line written otherwise), known at the end.
    lines: list[bytes] | None = [] if spec.digest else None
    with path.open("rb") as handle:
        handle.seek(spec.offset)
        for position in range(spec.first_leaf, spec.last_id):
            raw = handle.readline()
            if lines is not None:
                lines.append(raw)
            if problem is not None:  # what follows a bad line cannot be told apart:
                rows.append(_unread(position, raw))  # its place kept in the tree only
                continue
            try:
                event, currency = _line_event(raw, position + 1, position)
                facts.currencies.check(event, currency)
            except VerificationError as exc:
                problem = Problem(position, str(exc), located=True)
                rows.append(_unread(position, raw))
                continue
            if opens_round(event):
                facts.profiles.add(round_profile(event))
            if event.stream in INDEXED:
                facts.indexed.append(position)
            if not event.canonical:
                facts.rewritten.append(position)
            rows.append((position + 1, event.stream, event.version, event.topic, event.envelope))
    result = verify_rows(spec, rows, signer_check)
    if problem is not None:  # the bad line's own problem, not the placeholders'
        result.problems = [p for p in result.problems if p.position < problem.position]
        result.problems.append(problem)
    if lines is not None:
        if problem is None and not facts.rewritten and not result.problems:
            facts.envelopes = [row[4] for row in rows]  # the settling process reads these
        else:
            result.digest = lines_digest(lines)  # it reads the lines again, proven by this
    result.facts = facts
    result.rows = len(rows)
    return result


def lines_digest(lines: Iterable[bytes]) -> str:
    """SHA-256 over a chunk's lines as read: the settling process's proof that the
    lines it reads again are the ones the chunk verified."""
    digest = hashlib.sha256()
    deque(map(digest.update, lines), maxlen=0)
    return digest.hexdigest()


def _unread(position: int, raw: bytes) -> Row:
    """A line not read as an event: a row of its bytes, so that the chunk keeps
    its leaves (the merge goes on; the line's problem is the finding)."""
    return (position + 1, None, position, "?", raw)  # type: ignore[return-value]


# Worker-process state, set once per process by `init_worker`.
_worker: tuple[Path, SignerCheck] | None = None


def init_worker(path: str, keyring_json: str) -> None:
    global _worker
    _worker = (Path(path), SignerCheck(Keyring.from_json(keyring_json)))


def verify_chunk(spec: ChunkSpec) -> ChunkResult:
    assert _worker is not None, "init_worker not called"
    return verify_lines(*_worker, spec)
