"""The ledger's eventsourcing Application: sealed on write, checked on read."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any
from uuid import UUID

import psycopg
import psycopg_pool
from eventsourcing.application import Application
from eventsourcing.persistence import (
    EventStore,
    InfrastructureFactoryError,
    PersistenceError,
    Recording,
)

from ledger.crypto.envelope import SignerCheck
from ledger.crypto.keys import Keyring
from ledger.crypto.signing import Signer
from ledger.errors import ConfigError, StoreUnavailableError
from ledger.store.config import describe, environment_for
from ledger.store.merkle_log import MerkleLogTables
from ledger.store.recorders import SealedRecorder
from ledger.store.sealing import SealedEventStore, SealingMapper

# What a store that cannot be reached or opened raises, across both drivers.
STORE_ERRORS: tuple[type[BaseException], ...] = (
    PersistenceError,
    InfrastructureFactoryError,
    psycopg.Error,
    psycopg_pool.PoolTimeout,
    sqlite3.Error,
    OSError,
)


class LedgerApplication(Application[UUID]):
    """Stores sealed events in the store named by `store` (a URL)."""

    name = "Ledger"
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
    ) -> None:
        self.store_url = store
        self._keyring = keyring
        self._keyring_source = keyring_source
        self._signer = signer
        # A cache of aggregates (fast-forwarded from the store on every get, and
        # deep-copied out) saves re-reading and re-verifying whole streams: a
        # wallet's history grows with every round it plays.
        settings = (
            {"AGGREGATE_CACHE_MAXSIZE": "10000", "AGGREGATE_CACHE_FASTFORWARD": "y"}
            | environment_for(store, create=create)
            | (env or {})
        )
        try:
            super().__init__(settings)
        except STORE_ERRORS as exc:
            raise StoreUnavailableError(
                f"cannot open store {describe(store)}: {_first_line(exc)}"
            ) from exc
        self.tables = MerkleLogTables(self.sealed_recorder)
        # Called with the number of events after each committed save (the anchor).
        self.on_recorded: list[Callable[[int], None]] = []
        if not create:
            try:
                self.tables.tail()
            except STORE_ERRORS as exc:
                self.close()
                raise StoreUnavailableError(
                    f"no ledger in store {describe(store)}: {_first_line(exc)}"
                ) from exc

    def current_keyring(self) -> Keyring:
        """The keyring as it is now (keys added since opening included, when the
        node was opened from a keys directory). Envelopes on read are checked
        against the keyring the node opened with."""
        return self._keyring_source() if self._keyring_source else self._keyring

    def _notify(self, recordings: list[Recording[UUID]]) -> None:
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
        mapper.configure(self._signer, SignerCheck(self._keyring))
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


def probe_store(store: str) -> None:
    """Fail now, with one clear line, if `store` is malformed or unreachable."""
    settings = environment_for(store)
    if settings["PERSISTENCE_MODULE"] != "eventsourcing.postgres":
        return  # SQLite: environment_for already checked the directory
    try:
        psycopg.connect(
            host=settings["POSTGRES_HOST"],
            port=settings["POSTGRES_PORT"],
            user=settings["POSTGRES_USER"],
            password=settings["POSTGRES_PASSWORD"] or None,
            dbname=settings["POSTGRES_DBNAME"],
            connect_timeout=int(settings["POSTGRES_CONNECT_TIMEOUT"]),
        ).close()
    except psycopg.Error as exc:
        raise StoreUnavailableError(
            f"cannot open store {describe(store)}: {_first_line(exc)}"
        ) from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
