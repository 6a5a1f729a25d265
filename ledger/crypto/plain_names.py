"""The caches the C scan (`ledger.crypto.native.scan`) reads, and fills through
these callbacks on a miss: a row's stream id column to the stream as the
envelope signs it and its bytes, an event type to its bytes. Plain ones only
(JSON encodes them as themselves): for any other the callback says None, the
C run stops there, and the Python checks say what it is."""

from __future__ import annotations

from collections.abc import Callable

from ledger.crypto.envelope import is_plain


class PlainNames:
    def __init__(self, stream_of: Callable[[object], str]) -> None:
        """`stream_of`: a stream id column's stream, as the envelope signs it."""
        self._stream_of = stream_of
        self.names: dict[object, tuple[str, bytes]] = {}
        self.topics: dict[str, bytes] = {}

    def name(self, key: object) -> tuple[str, bytes] | None:
        """`key`'s stream and its bytes, cached; None when the stream is not plain."""
        stream = self._stream_of(key)
        if not is_plain(stream):
            return None
        named = self.names[key] = (stream, stream.encode())
        return named

    def topic(self, topic: str) -> bytes | None:
        """`topic`'s bytes, cached; None when it is not plain."""
        known = self.topics.get(topic)
        if known is not None:
            return known
        if not is_plain(topic):
            return None
        encoded = self.topics[topic] = topic.encode()
        return encoded
