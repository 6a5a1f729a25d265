"""Idempotency: one aggregate per outside request id, saved with the command's
own events. A retry finds it and gets the first result back; two copies of
the same request racing conflict on it, and only one is ever recorded.

It also says who asked for the command (`asked_by`: the authenticated session,
`{"token": id, "role": role}` as `ledger.domain.asked_by` checks it; None for
the node's own, from the CLI or the Python API), signed with its events."""

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
        """Version 2 added `asked_by`; a version 1 record (written before it)
        reads as None: no one was recorded."""

        class_version: ClassVar[int] = 2
        request_id: str
        command: str
        fingerprint: str
        result: Any
        asked_by: dict[str, str] | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["asked_by"] = None

    @staticmethod
    def create_id(request_id: str, **_: Any) -> UUID:
        return request_uuid(request_id)

    @event(Completed)
    def __init__(
        self,
        request_id: str,
        command: str,
        fingerprint: str,
        result: Any,
        asked_by: dict[str, str] | None = None,
    ) -> None:
        self.request_id = request_id
        self.command = command
        self.fingerprint = fingerprint
        self.result = result
        self.asked_by = asked_by
