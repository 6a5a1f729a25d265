"""Idempotency: one aggregate per outside request id, saved with the command's
own events. A retry finds it and gets the first result back; two copies of
the same request racing conflict on it, and only one is ever recorded."""

from __future__ import annotations

from typing import Any, ClassVar
from uuid import NAMESPACE_URL, UUID, uuid5

from eventsourcing.domain import Aggregate, event

from ledger.domain.copying import PlainCopy

REQUEST_NAMESPACE = uuid5(NAMESPACE_URL, "casino-ledger/request")


def request_uuid(request_id: str) -> UUID:
    return uuid5(REQUEST_NAMESPACE, request_id)


class Request(PlainCopy, Aggregate):
    class Event(Aggregate.Event):  # declared: the events below are used as written, not rebuilt
        pass

    class Completed(Aggregate.Created, Event):
        class_version: ClassVar[int] = 1
        request_id: str
        command: str
        fingerprint: str
        result: Any

    @staticmethod
    def create_id(request_id: str, **_: Any) -> UUID:
        return request_uuid(request_id)

    @event(Completed)
    def __init__(self, request_id: str, command: str, fingerprint: str, result: Any) -> None:
        self.request_id = request_id
        self.command = command
        self.fingerprint = fingerprint
        self.result = result
