"""Sealing on the way in, checking on the way out.

`SealingMapper` wraps every stored event in a signed envelope and checks the
envelope of every event it reads. `SealedEventStore` supplies what a single
event cannot know: the hash of the previous envelope in its stream (sealing)
and that the events read form an unbroken chain (reading).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from uuid import UUID

from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import (
    EventStore,
    Mapper,
    Notification,
    Recording,
    StoredEvent,
)

from ledger.crypto.canonical import ENVELOPE_DOMAIN
from ledger.crypto.envelope import (
    GENESIS_HASH,
    Envelope,
    SignerCheck,
    assemble,
    check_row,
    envelope_header,
    now_micros,
    open_envelope,
    where,
)
from ledger.crypto.merkle import hash_leaf
from ledger.crypto.signing import Signer
from ledger.errors import VerificationError
from ledger.store.merkle_log import stream_of
from ledger.store.sealed_rows import SealedRow

PrevHash = Callable[[UUID | str, int], bytes]
SEALED_HERE_CACHE = 100_000
PARALLEL_SIGNATURES = 16  # events in a batch from which half are signed on a second thread


class SealingMapper(Mapper[UUID]):
    """An eventsourcing `Mapper` whose stored state is a signed envelope."""

    signer: Signer | None = None
    signer_check: SignerCheck | None = None
    clock: Callable[[], int]

    def configure(
        self,
        signer: Signer | None,
        signer_check: SignerCheck,
        clock: Callable[[], int] | None = None,
    ) -> None:
        """`clock` gives the signing time in µs since the epoch (tests inject one)."""
        self.signer = signer
        self.signer_check = signer_check
        self.clock = clock or now_micros
        # Envelopes this node sealed itself, by entry hash -> signature: reading
        # one back (the aggregate cache fast-forwards after every save) needs no
        # second Ed25519 verify when header and signature are byte-identical to
        # what we signed. Anything else read is verified in full.
        self._sealed_here: OrderedDict[bytes, bytes] = OrderedDict()
        # The rows it sealed, by SHA-256 of their stored bytes -> (entry hash,
        # stream, version, type): the checkpointer hashes a row byte-identical to
        # one of them without parsing its envelope again.
        self._sealed_rows: OrderedDict[bytes, tuple[bytes, str, int, str]] = OrderedDict()
        self._signing: ThreadPoolExecutor | None = None  # a second signer thread, when worth it
        # Told of every batch's rows as they are sealed (`ledger serve`'s
        # processes tell its anchor process: `ledger.store.sealed_rows`).
        self.on_sealed: Callable[[list[SealedRow]], None] | None = None

    def seal_events(
        self, domain_events: Sequence[DomainEventProtocol[UUID]], prev_hash: PrevHash
    ) -> tuple[list[StoredEvent], dict[UUID | str, tuple[int, bytes]]]:
        """Seal a batch in order; return the stored events and each stream's new head.

        Headers (and so the chain) are made in order; the signatures, which
        nothing else depends on, are made after, half of a large batch on a
        second thread when the signer allows it (libsodium signs without the
        GIL, so the two halves take two cores)."""
        signer = self.signer
        if signer is None:
            raise VerificationError("this ledger was opened read-only: no signing key")
        heads: dict[UUID | str, tuple[int, bytes]] = {}
        made: list[tuple[StoredEvent, bytes, bytes]] = []  # (plain event, header, entry hash)
        signed_at = self.clock()  # one signing time per batch: they are signed together
        for event in domain_events:
            plain = super().to_stored_event(event)
            version = plain.originator_version
            head = heads.get(plain.originator_id)
            previous = (
                head[1]
                if head is not None and head[0] == version - 1
                else prev_hash(plain.originator_id, version)
            )
            header = envelope_header(
                stream=stream_of(plain.originator_id),
                version=version,
                event_type=plain.topic,
                prev_hash=previous,
                payload=plain.state,
                key_id=signer.key_id,
                signed_at=signed_at,
            )
            entry_hash = hash_leaf(header)
            heads[plain.originator_id] = (version, entry_hash)
            made.append((plain, header, entry_hash))
        signatures = self._sign_all(signer, [ENVELOPE_DOMAIN + h for _, h, _ in made])
        stored_events = []
        sealed: list[SealedRow] = []
        for (plain, header, entry_hash), signature in zip(made, signatures, strict=True):
            state = assemble(header, signature, plain.state)
            version = plain.originator_version
            self._remember_sealed(entry_hash, state, len(plain.state))
            sealed.append(
                self._remember_row(state, entry_hash, plain.originator_id, version, plain.topic)
            )
            stored_events.append(StoredEvent(plain.originator_id, version, plain.topic, state))
        if self.on_sealed is not None:
            self.on_sealed(sealed)
        return stored_events, heads

    def _sign_all(self, signer: Signer, messages: list[bytes]) -> list[bytes]:
        if len(messages) < PARALLEL_SIGNATURES or not getattr(signer, "thread_safe", False):
            return [signer.sign(m) for m in messages]
        if self._signing is None:
            self._signing = ThreadPoolExecutor(1, thread_name_prefix="ledger-sign")
        half = len(messages) // 2
        later = self._signing.submit(lambda: [signer.sign(m) for m in messages[half:]])
        return [signer.sign(m) for m in messages[:half]] + later.result()

    def _remember_sealed(self, entry_hash: bytes, state: bytes, payload_size: int) -> None:
        end = len(state) - payload_size  # the signature sits just before the payload
        self._sealed_here[entry_hash] = state[end - 64 : end]
        if len(self._sealed_here) > SEALED_HERE_CACHE:
            self._sealed_here.popitem(last=False)

    def _remember_row(
        self, state: bytes, entry_hash: bytes, stream: UUID | str, version: int, topic: str
    ) -> SealedRow:
        row = (hashlib.sha256(state).digest(), entry_hash, stream_of(stream), version, topic)
        self.remember_rows((row,))
        return row

    def remember_rows(self, rows: Iterable[SealedRow]) -> None:
        """Take `rows` as sealed here: what this process sealed, or (`ledger
        serve`'s anchor process) what the node's other processes told it they
        sealed (`ledger.store.sealed_rows`)."""
        for key, entry_hash, stream, version, topic in rows:
            self._sealed_rows[key] = (entry_hash, stream, version, topic)
        while len(self._sealed_rows) > SEALED_HERE_CACHE:
            self._sealed_rows.popitem(last=False)

    def sealed_entry_hash(
        self, state: bytes, stream: str, version: int, topic: str
    ) -> bytes | None:
        """The entry hash of a row this node sealed, when the row (its bytes and
        columns) is exactly what it sealed; None otherwise (check it in full)."""
        found = self._sealed_rows.get(hashlib.sha256(state).digest())
        if found is None or found[1:] != (stream, version, topic):
            return None
        return found[0]

    def signed_here(self, entry_hash: bytes) -> bytes | None:
        """The signature this node made over `entry_hash`'s header, if it sealed it."""
        return self._sealed_here.get(entry_hash)

    def to_stored_event(self, domain_event: DomainEventProtocol[UUID]) -> StoredEvent:
        raise NotImplementedError("sealing needs the stream's chain: use SealedEventStore.put")

    def open(self, stored_event: StoredEvent) -> Envelope:
        """Parse and check an envelope against its row, signer and signature."""
        assert self.signer_check is not None, "mapper not configured"
        stream = stream_of(stored_event.originator_id)
        version = stored_event.originator_version
        envelope = open_envelope(stored_event.state, stream=stream, version=version)
        check_row(envelope, stream=stream, version=version, topic=stored_event.topic)
        if self._sealed_here.get(envelope.entry_hash) == envelope.signature:
            self.signer_check.check_signer(envelope, stream=stream, version=version)
        else:
            self.signer_check.check_signature(envelope, stream=stream, version=version)
            self.signer_check.check_validity(envelope, stream=stream, version=version)
        return envelope

    def to_domain_event(self, stored_event: StoredEvent) -> DomainEventProtocol[UUID]:
        envelope = self.open(stored_event)
        return self.decode(stored_event, envelope.payload)

    def decode(self, row: StoredEvent, payload: bytes) -> DomainEventProtocol[UUID]:
        """The domain event of `row` whose envelope (already checked) carries `payload`."""
        return super().to_domain_event(
            StoredEvent(row.originator_id, row.originator_version, row.topic, payload)
        )


class SealedEventStore(EventStore[UUID]):
    """An `EventStore` that chains each stream and checks the chain on reads."""

    mapper: SealingMapper

    def __init__(self, mapper: SealingMapper, recorder: Any, head_cache_size: int = 100_000):
        super().__init__(mapper, recorder)
        # Entry hashes of recent envelopes (read or written), by stream and
        # version: the hash a save chains to, and the anchor of a fast-forward
        # read (the aggregate cache reads from the version it holds, usually
        # older than the head). Saves a read and an envelope check per save and
        # per get on hot streams. Only committed, checked envelopes go in, so an
        # entry is never wrong.
        self._hashes: OrderedDict[tuple[UUID | str, int], bytes] = OrderedDict()
        self._hash_cache_size = head_cache_size

    def _remember(self, stream: UUID | str, version: int, entry_hash: bytes) -> None:
        key = (stream, version)
        self._hashes[key] = entry_hash
        self._hashes.move_to_end(key)
        if len(self._hashes) > self._hash_cache_size:
            self._hashes.popitem(last=False)

    def _prev_hash(self, stream: UUID | str, version: int) -> bytes:
        if version == 1:
            return GENESIS_HASH
        known = self._hashes.get((stream, version - 1))
        if known is not None:
            return known
        previous = list(self.recorder.select_events(stream, gt=version - 2, lte=version - 1))
        if not previous:
            # Nothing to chain to: the insert will conflict or the caller skipped
            # a version; either way the store refuses it below.
            raise VerificationError(
                "previous event is missing", where=where(stream_of(stream), version - 1)
            )
        return self.mapper.open(previous[0]).entry_hash

    def put(
        self, domain_events: Sequence[DomainEventProtocol[UUID]], **kwargs: Any
    ) -> list[Recording[UUID]]:
        stored_events, heads = self.mapper.seal_events(domain_events, self._prev_hash)
        notification_ids = self.recorder.insert_events(stored_events, **kwargs)
        for stream, (version, entry_hash) in heads.items():
            self._remember(stream, version, entry_hash)
        if not notification_ids:
            return []
        return [
            Recording(
                event,
                Notification(
                    id=n_id,
                    originator_id=s.originator_id,
                    originator_version=s.originator_version,
                    topic=s.topic,
                    state=s.state,
                ),
            )
            for event, s, n_id in zip(domain_events, stored_events, notification_ids, strict=True)
        ]

    def follow(
        self, stream: UUID, version: int, topic: str, state: bytes
    ) -> DomainEventProtocol[UUID] | None:
        """One row read from the log, checked as any read is (envelope against the
        row, signer, signature, and chained to the stream's previous event), as
        its domain event; None when that previous event's hash is not known here
        (read the stream instead)."""
        expected = GENESIS_HASH if version == 1 else self._hashes.get((stream, version - 1))
        if expected is None:
            return None
        stored = StoredEvent(stream, version, topic, state)
        envelope = self.mapper.open(stored)
        if envelope.prev_hash != expected:
            raise VerificationError(
                "chain broken: previous-envelope hash does not match the stream's "
                "previous event (an event is missing, reordered or replaced)",
                where=where(stream_of(stream), version),
            )
        self._remember(stream, version, envelope.entry_hash)
        return self.mapper.decode(stored, envelope.payload)

    def get(
        self,
        originator_id: UUID,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Iterator[DomainEventProtocol[UUID]]:
        stored = self.recorder.select_events(
            originator_id=originator_id, gt=gt, lte=lte, desc=desc, limit=limit
        )
        return self._checked(originator_id, list(stored), gt=gt, desc=desc)

    def _checked(
        self, stream: UUID, stored: list[StoredEvent], *, gt: int | None, desc: bool
    ) -> Iterator[DomainEventProtocol[UUID]]:
        ordered = list(reversed(stored)) if desc else stored
        opened = [self.mapper.open(s) for s in ordered]
        if opened and not desc:
            # Anchor the first event read to its predecessor (or the genesis).
            first = ordered[0].originator_version
            expected = GENESIS_HASH if first == 1 else self._prev_hash(stream, first)
            if gt is not None and first != gt + 1:
                raise VerificationError(
                    f"version {gt + 1} is missing", where=where(stream_of(stream), gt + 1)
                )
        else:
            expected = opened[0].prev_hash if opened else GENESIS_HASH
        for event, envelope in zip(ordered, opened, strict=True):
            if envelope.prev_hash != expected:
                raise VerificationError(
                    "chain broken: previous-envelope hash does not match the stream's "
                    "previous event (an event is missing, reordered or replaced)",
                    where=where(stream_of(stream), event.originator_version),
                )
            expected = envelope.entry_hash
        if opened and not desc:
            last = ordered[-1]
            self._remember(stream, last.originator_version, opened[-1].entry_hash)
        events = [self.mapper.decode(s, e.payload) for s, e in zip(ordered, opened, strict=True)]
        return iter(reversed(events) if desc else events)
