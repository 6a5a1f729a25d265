"""The ledger's eventsourcing Application: sealed on write, checked on read."""

from __future__ import annotations

import copy
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.domain import BaseAggregate, DomainEventProtocol
from eventsourcing.persistence import (
    EventStore,
    InfrastructureFactoryError,
    PersistenceError,
    Recording,
    StoredEvent,
)
from eventsourcing.utils import Environment

from ledger.crypto.envelope import SignerCheck, now_micros
from ledger.crypto.keys import Keyring
from ledger.crypto.signing import Signer
from ledger.crypto.validity import key_problem
from ledger.domain.key_registry import KEY_REGISTRY_ID, KeyRegistry
from ledger.errors import ConfigError, KeyStoreError, StoreUnavailableError
from ledger.privacy.personal import PersonalData
from ledger.store.config import describe, environment_for
from ledger.store.drivers import first_line, loaded_errors
from ledger.store.merkle_log import MerkleLogTables, stream_of
from ledger.store.recorder_type import SealedRecorder
from ledger.store.recorders import RequestIndexRow, Row
from ledger.store.sealing import SealedEventStore, SealingMapper

_STORE_ERRORS: tuple[type[BaseException], ...] = (
    PersistenceError,
    InfrastructureFactoryError,
    sqlite3.Error,
    OSError,
)


def store_errors() -> tuple[type[BaseException], ...]:
    """What a store that cannot be reached or opened raises, across both drivers
    (psycopg's only once it is imported: only then can they be raised)."""
    return _STORE_ERRORS + loaded_errors("psycopg:Error", "psycopg_pool:PoolTimeout")


# The PostgreSQL events table is named after the environment's name
# (`ledger_events`); stores written so far use that name, so it stays.
TABLE_PREFIX = "ledger"
# Seconds a writer may sign by a keyring read that long ago (`check_node_key`).
SIGNER_RECHECK = 1.0


class StoreEnvironment(Environment):
    """Exactly the settings the store URL gave, looked up by their plain names.

    eventsourcing's own Environment also reads every `<APP NAME>_<SETTING>` and
    plain `SQLITE_DBNAME`/`POSTGRES_*` variable of the process, so a stray
    `LEDGER_SQLITE_DBNAME` would redirect a store given by URL. Here nothing
    but the URL (and the caller's explicit overrides) decides.
    """

    def create_keys(self, key: str) -> list[str]:
        return [key]


class LedgerApplication(Application[UUID]):
    """Stores sealed events in the store named by `store` (a URL)."""

    # A name whose environment prefix no user setting (LEDGER_*) uses.
    name = "CasinoLedgerStore"
    is_snapshotting_enabled = False

    def __init__(
        self,
        store: str,
        *,
        keyring: Keyring,
        signer: Signer | None = None,
        env: dict[str, str] | None = None,
        create: bool = True,
        keyring_source: Callable[[], Keyring] | None = None,
        clock: Callable[[], int] | None = None,
        personal: PersonalData | None = None,
    ) -> None:
        self.store_url = store
        # The node's personal-data keys (`ledger.node.open_node` gives them): the
        # casino seals owners and dealers with them; None records none.
        self.personal = personal
        self._clock = clock  # signing time in µs (None: the system clock)
        self._keyring = keyring
        self._keyring_source = keyring_source
        self._signer = signer
        self._signing_cache: tuple[float, Keyring] | None = None
        # A cache of aggregates (fast-forwarded from the store on every get, and
        # deep-copied out) saves re-reading and re-verifying whole streams: a
        # wallet's history grows with every round it plays.
        probe_store(store, create=create, make_schema=create)
        settings = (
            {"AGGREGATE_CACHE_MAXSIZE": "10000", "AGGREGATE_CACHE_FASTFORWARD": "y"}
            | environment_for(store, create=create)
            | (env or {})
        )
        try:
            super().__init__(settings)
        except store_errors() as exc:
            raise StoreUnavailableError(
                f"cannot open store {describe(store)}: {first_line(exc)}"
            ) from exc
        self.tables = MerkleLogTables(self.sealed_recorder)
        # Called with the number of events after each committed save (the anchor).
        self.on_recorded: list[Callable[[int], None]] = []
        if not create:
            try:
                self.tables.tail()
            except store_errors() as exc:
                self.close()
                raise StoreUnavailableError(
                    f"no ledger in store {describe(store)}: {first_line(exc)}"
                ) from exc

    def construct_env(self, name: str, env: Any = None) -> Environment:
        # Never os.environ: the URL's settings win over every variable.
        return StoreEnvironment(TABLE_PREFIX, dict(env or {}))

    @property
    def can_sign(self) -> bool:
        """Whether this application seals new events (it was given a ledger-node key)."""
        return self._signer is not None

    def current_keyring(self) -> Keyring:
        """The keyring as it is now (keys added since opening included, when the
        node was opened from a keys directory). Envelopes on read are checked
        against the keyring the node opened with."""
        return self._keyring_source() if self._keyring_source else self._keyring

    def signing_keyring(self, max_age: float = 0.0) -> Keyring:
        """The keyring writers sign by: `current_keyring` with every revocation the
        log's key registry holds (recorded through any node), read again once
        it is older than `max_age` seconds."""
        now = time.monotonic()
        cached = self._signing_cache
        if cached is not None and now - cached[0] <= max_age:
            return cached[1]
        keyring = self.current_keyring()
        try:
            registry: Any = self.repository.get(KEY_REGISTRY_ID)
        except AggregateNotFoundError:
            pass
        else:
            assert isinstance(registry, KeyRegistry)
            keyring = keyring.with_revocations(registry.revoked)
        self._signing_cache = (now, keyring)
        return keyring

    def check_node_key(self) -> None:
        """Refuse to seal anything with a ledger-node key that may not sign now
        (expired, or revoked in the keyring or the log: `ledger.crypto.validity`);
        a revocation takes effect within `SIGNER_RECHECK` seconds."""
        if self._signer is None:
            return
        record = self.signing_keyring(SIGNER_RECHECK).get(self._signer.key_id)
        if record is None:
            raise KeyStoreError(
                f"the ledger-node key {self._signer.key_id[:16]} is not in the keyring: "
                "nothing was written"
            )
        problem = key_problem(record, now_micros() if self._clock is None else self._clock())
        if problem is not None:
            raise KeyStoreError(
                f"ledger-node key {record.name} may not sign now: {problem}; nothing was "
                "written (create another ledger-node key and `ledger keys use` it)"
            )

    def save(self, *objs: Any, **kwargs: Any) -> list[Recording[UUID]]:
        """eventsourcing's `save` (the event store seals what it puts), once the
        node key may sign; then the aggregate cache and the listeners hear of it."""
        self.check_node_key()
        recordings = super().save(*objs, **kwargs)
        self._cache_saved([obj for obj in objs if isinstance(obj, BaseAggregate)])
        self._tell_listeners(recordings)
        return recordings

    def record_events(
        self, events: list[Any], requests: Sequence[RequestIndexRow] = ()
    ) -> list[Recording[UUID]]:
        """Save `events` (already collected from their aggregates, in this order)
        in one transaction, with `requests`' index rows (each request id to the
        event that records it): the command runner's batch. They go straight to the
        event store's `put`, where `save` ends: `save` first checks each object
        against eventsourcing's runtime protocols (about 18 µs an event on
        Python 3.11), which a batch of hundreds of events would pay for nothing.
        The aggregates are the runner's own; the repository's cache
        fast-forwards to them when read."""
        self.check_node_key()
        recordings = self.events.put(events, requests=requests)
        self._tell_listeners(recordings)
        return recordings

    def decode_row(self, row: Row) -> DomainEventProtocol[UUID]:
        """The domain event of one raw row, its envelope checked against the row,
        its signer and its signature (as every read checks it)."""
        _, stream, version, topic, state = row
        return self.mapper.to_domain_event(
            StoredEvent(UUID(stream_of(stream)), version, topic, bytes(state))
        )

    def _cache_saved(self, aggregates: list[BaseAggregate[UUID]]) -> None:
        """Refresh the aggregate cache with what was just committed.

        The cache fast-forwards on every get by reading and checking the events
        after the version it holds; without this it would re-read, re-open and
        re-decode the events this node has just sealed. A copy of each saved
        aggregate the cache already holds replaces it (the aggregate is exactly
        what its committed events make it: they were made by its own methods).
        Every get still fast-forwards from there, so events other writers
        committed since are read and checked as before.
        """
        cache = self.repository.cache
        if cache is None or not self.repository.fastforward:
            return
        for aggregate in aggregates:
            try:
                cache.get(aggregate.id)
            except KeyError:
                continue  # not cached: read from the store when first wanted
            cache.put(aggregate.id, copy.deepcopy(aggregate))

    def _tell_listeners(self, recordings: list[Recording[UUID]]) -> None:
        for listener in self.on_recorded:
            listener(len(recordings))

    @property
    def sealed_recorder(self) -> SealedRecorder:
        return self.recorder  # type: ignore[return-value]

    def construct_mapper(self) -> SealingMapper:
        mapper = SealingMapper(
            transcoder=self.construct_transcoder(),
            compressor=self.factory.compressor(),
            cipher=self.factory.cipher(),
        )
        mapper.configure(self._signer, SignerCheck(self._keyring), self._clock)
        return mapper

    def construct_event_store(self) -> EventStore[UUID]:
        assert isinstance(self.mapper, SealingMapper)
        return SealedEventStore(self.mapper, self.recorder)

    def construct_snapshot_store(self) -> EventStore[UUID]:
        raise ConfigError("snapshots are not sealed yet; the ledger runs without them")

    def close(self) -> None:
        super().close()

    def __enter__(self) -> LedgerApplication:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def probe_store(store: str, *, create: bool = True, make_schema: bool = False) -> None:
    """Fail now, with one clear line, if `store` is malformed or unreachable.

    On PostgreSQL this is a direct connection, so a missing database or server
    is named at once (the pool would wait out its timeout and say less). A
    `?schema=` that does not exist is refused unless `create` (writers create
    it when they open it, as they create the tables; readers never create anything).
    """
    settings = environment_for(store, create=create)
    if "POSTGRES_HOST" not in settings:
        return  # SQLite: environment_for already checked the directory and file
    import psycopg  # only here, on PostgreSQL (ledger.store.drivers)
    import psycopg.sql

    schema = settings["POSTGRES_SCHEMA"]
    try:
        with psycopg.connect(
            host=settings["POSTGRES_HOST"],
            port=settings["POSTGRES_PORT"],
            user=settings["POSTGRES_USER"],
            password=settings["POSTGRES_PASSWORD"] or None,
            dbname=settings["POSTGRES_DBNAME"],
            connect_timeout=int(settings["POSTGRES_CONNECT_TIMEOUT"]),
            target_session_attrs=settings["POSTGRES_TARGET_SESSION_ATTRS"],
            autocommit=True,
        ) as connection:
            found = connection.execute(
                "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)
            ).fetchone()
            if found is None and not create:
                raise ConfigError(
                    f"schema {schema!r} does not exist in store {describe(store)}: "
                    "a writer (`ledger simulate`) creates it, or check the URL"
                )
            if found is None and make_schema:
                # The name passed config.py's identifier check; quoted all the same.
                connection.execute(
                    psycopg.sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(
                        psycopg.sql.Identifier(schema)
                    )
                )
    except psycopg.Error as exc:
        raise StoreUnavailableError(
            f"cannot open store {describe(store)}: {first_line(exc)}"
        ) from exc
