"""Helpers shared by the casino tests: a casino on a node, the events it
recorded (read back through the sealed mapper), and an operator key."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import Notification

from ledger.casino import Casino
from ledger.crypto.keys import Role
from ledger.crypto.signing import Signer
from ledger.devices import DealerDevice
from ledger.domain.round_records import Limits
from ledger.node import Node
from ledger.store.application import LedgerApplication
from tests.coin_game import COIN_GAMES
from tests.conftest import PASSPHRASE

LIMITS: Limits = {"min_bet": 10, "max_bet": 500, "max_round": 800}
HEADS: dict[str, Any] = {"on": "heads"}
TAILS: dict[str, Any] = {"on": "tails"}


def casino_on(node: Node) -> Casino:
    return Casino(node.app, COIN_GAMES)


def event_count(app: LedgerApplication) -> int:
    return app.tables.event_count()[0]


def notifications(app: LedgerApplication, after: int = 0) -> list[Notification]:
    """Every notification after id `after`, in log order."""
    found: list[Notification] = []
    while batch := app.recorder.select_notifications(
        start=after, limit=500, inclusive_of_start=False
    ):
        found += batch
        after = batch[-1].id
    return found


def domain_events(
    app: LedgerApplication, after: int = 0
) -> list[tuple[int, DomainEventProtocol[UUID]]]:
    """(notification id, domain event) for every event after id `after`."""
    return [(n.id, app.mapper.to_domain_event(n)) for n in notifications(app, after)]


def operator_signer(node: Node, name: str = "operator-1") -> Signer:
    """An operator key in the node's key directory (created on first use)."""
    if not any(record.name == name for record in node.keys.keyring()):
        node.keys.create(name, Role.OPERATOR, PASSPHRASE)
    return node.keys.signer(Role.OPERATOR, PASSPHRASE)


_DEVICES: dict[str, DealerDevice] = {}


def dealer_device(node: Node, name: str = "dealer-device-1") -> DealerDevice:
    """A dealer device whose key is in the node's key directory (made on first use)."""
    found = _DEVICES.get(f"{node.keys.path}/{name}")
    if found is None:
        if not any(record.name == name for record in node.keys.keyring()):
            node.keys.create(name, Role.DEALER_DEVICE, PASSPHRASE)
            node.keyring = node.keys.keyring()  # verify_store(node.keyring) knows it too
        found = DealerDevice(node.keys.signer(Role.DEALER_DEVICE, PASSPHRASE))
        _DEVICES[f"{node.keys.path}/{name}"] = found
    return found


def seen(node: Node, casino: Casino, round_id: str, outcome: dict[str, Any]) -> dict[str, Any]:
    """A dealer device's signed report of `outcome` as the round's next throw."""
    return dealer_device(node).throw(round_id, casino.round(round_id).draws, outcome)


def seen_faulty(node: Node, casino: Casino, round_id: str, reason: str) -> dict[str, Any]:
    """A dealer device's signed report of a faulty throw as the round's next throw."""
    return dealer_device(node).fault(round_id, casino.round(round_id).draws, reason)


def table_of(
    casino: Casino,
    game: str,
    limits: Limits,
    *,
    kind: str = "physical",
    currency: str = "EUR",
    name: str = "T1",
    request_id: str = "table",
) -> str:
    """A table the way most tests open one: physical, EUR, named T1."""
    return casino.open_table(
        request_id=request_id,
        name=name,
        game=game,
        kind=kind,
        currency=currency,
        limits=limits,
    )
