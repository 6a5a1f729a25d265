"""The node a mirror copies: its event feed and its newest checkpoint, read
over its HTTP API (docs/http.md) with an auditor's token.

Only transport lives here: what the source sends is the attacker's and is
checked by the mirror (`ledger.mirror.copy`), never here. The standard
library's client is enough (one GET at a time, JSON answers), so a mirror
needs no HTTP package beyond the ledger's own.
"""

from __future__ import annotations

import base64
import binascii
import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

from ledger import outbound
from ledger.errors import ConfigError, StoreUnavailableError, VerificationError

PAGE = 1000  # the feed's largest page (`ledger.http.feed.MAX_LIMIT`)


@dataclass(frozen=True)
class FeedEvent:
    """One record of the feed, as the source claims it (nothing checked yet)."""

    position: int
    stream: str
    version: int
    envelope: bytes


class SourceAnswered(StoreUnavailableError):
    """The source answered a request with an HTTP error status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class Source:
    """A ledger node's HTTP API: `base` is its root URL (`http://host:port`).
    Each request must be answered in full within `timeout` seconds."""

    def __init__(self, base: str, token: str, timeout: float = 60.0) -> None:
        parsed = urllib.parse.urlsplit(base)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigError(
                f"--from {base!r} is not an http(s) URL of a ledger node (http://HOST:PORT)"
            )
        self.base = base.rstrip("/")
        self.token = token
        self.timeout = timeout

    def _get(self, path: str, **params: object) -> Any:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        url = f"{self.base}/v1{path}" + (f"?{query}" if query else "")
        try:
            answer = outbound.request(
                "GET",
                url,
                deadline=self.timeout,
                headers={"Authorization": f"Bearer {self.token}", "Accept": "application/json"},
            )
        except OSError as exc:
            raise StoreUnavailableError(f"cannot reach the source {self.base}: {exc}") from None
        if answer.status != 200:
            detail = answer.body[:300].decode(errors="replace").strip()
            raise SourceAnswered(
                f"the source {self.base} answered {answer.status} to GET /v1{path}: {detail}",
                answer.status,
            )
        try:
            return json.loads(answer.body)
        except ValueError:
            raise VerificationError(
                f"the source {self.base} sent GET /v1{path} an answer that is not JSON"
            ) from None

    def checkpoints(self, after: int, limit: int = PAGE) -> list[str]:
        """The notes of the source's checkpoints of sizes above `after`, by size
        (the source's claim: each is verified with the events it covers)."""
        page = self._get("/checkpoints", after=after, limit=min(limit, PAGE))
        listed = page.get("checkpoints") if isinstance(page, dict) else None
        if not isinstance(listed, list):
            raise VerificationError(f"the source {self.base} sent a checkpoint list with none")
        notes = [entry.get("note") if isinstance(entry, dict) else None for entry in listed]
        if not all(isinstance(note, str) for note in notes):
            raise VerificationError(f"the source {self.base} sent a checkpoint with no note")
        return notes  # type: ignore[return-value]

    def newest_checkpoint(self) -> str | None:
        """The source's newest checkpoint note (None: it has none yet)."""
        try:
            found = self._get("/checkpoints/newest")
        except SourceAnswered as exc:
            if exc.status == 404:  # "no checkpoint yet"
                return None
            raise
        note = found.get("note") if isinstance(found, dict) else None
        if not isinstance(note, str):
            raise VerificationError(f"the source {self.base} sent a checkpoint with no note")
        return note

    def events(self, after: int | None, limit: int) -> list[FeedEvent]:
        """Up to `limit` (at most a page) records after log position `after`."""
        page = self._get("/events", after=after, limit=min(limit, PAGE))
        records = page.get("events") if isinstance(page, dict) else None
        if not isinstance(records, list):
            raise VerificationError(f"the source {self.base} sent a feed page with no events")
        return [self._event(record) for record in records]

    def _event(self, record: object) -> FeedEvent:
        bad = VerificationError(
            f"the source {self.base} sent a feed record that is not one "
            "(position, stream, version and base64 envelope)"
        )
        if not isinstance(record, dict):
            raise bad
        position, stream = record.get("position"), record.get("stream")
        version, envelope = record.get("version"), record.get("envelope")
        if type(position) is not int or type(stream) is not str or type(version) is not int:
            raise bad
        if type(envelope) is not str:
            raise bad
        try:
            raw = base64.b64decode(envelope, validate=True)
        except binascii.Error:
            raise bad from None
        return FeedEvent(position, stream, version, raw)
