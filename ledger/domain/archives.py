"""The archive register: the one stream where each archive of the log is recorded.

Its id is fixed (a uuid5 of a well-known name), like the erasure register's.
An archive is recorded after its directory was written and verified, and
before any event leaves the store for it (`ledger.archive`): the event names
the archive, the checkpoint it is verified against and a digest of every
archived event's place (position, row id, stream, version, leaf hash), which
`ledger verify` holds the store's archived-events table to.
"""

from __future__ import annotations

from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

ARCHIVES_ID = uuid5(NAMESPACE_URL, "casino-ledger/archives")
SEALED_TOPIC = "ledger.domain.archives:Archives.Sealed"  # a test holds it to the class


class Archives(Aggregate):
    """The archives of this log, in the order they were sealed."""

    @staticmethod
    def create_id() -> UUID:
        return ARCHIVES_ID

    @event("Created")
    def __init__(self) -> None:
        self.sealed: dict[str, str] = {}  # archive id -> its directory, as recorded

    @event("Sealed")
    def seal(
        self,
        archive: str,
        directory: str,
        horizon: str,
        checkpoint_size: int,
        checkpoint_root: str,
        events: int,
        rounds: int,
        digest: str,
    ) -> None:
        """`digest`: `ledger.store.archived.entries_digest` of the archived events
        (hex); `checkpoint_root`: hex; `horizon`: ISO 8601 with its offset."""
        self.sealed[archive] = directory
