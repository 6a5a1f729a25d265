"""One event as an auditor's program reads it: the export format's event record.

Reusable by anything that serves events "in the export format" (the bundle
writer, a feed). A record carries the exact stored envelope bytes and, beside
them, what they say decoded into plain JSON by fixed rules (docs/export.md):

- ids: every UUID lowercase and hyphenated (eventsourcing stores some as bare
  hex inside `{"_type_": "uuid_hex", ...}` wrappers: unwrapped and hyphenated);
- times: ISO 8601 text as stored (`datetime_iso` wrappers unwrapped);
- event types: the signed topic without its Python module (`Round.BetPlaced`);
- money: integers in minor units, with the currency of the event's stream.

Everything decoded is a function of the envelope bytes alone, so a verifier
re-derives it and a record whose decoded part disagrees with its bytes is named.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct
from collections.abc import Mapping
from typing import Any, Final
from uuid import UUID

from ledger.crypto.envelope import ENVELOPE_PREFIX, MAGIC, MAGIC_V1
from ledger.errors import VerificationError

SCHEMA_VERSION: Final = 1
_SIGNATURE_SIZE: Final = 64
_decode_json = json.JSONDecoder().decode


def type_name(topic: str) -> str:
    """The stable event-type name: the signed topic's class part, no module path
    (`ledger.domain.round:Round.BetPlaced` -> `Round.BetPlaced`)."""
    return topic.partition(":")[2] or topic


def _unwrap(obj: dict[str, Any]) -> Any:
    """json object_hook: eventsourcing's typed wrappers as plain JSON values."""
    if len(obj) == 2 and "_type_" in obj and "_data_" in obj:
        kind, data = obj["_type_"], obj["_data_"]
        if kind == "uuid_hex" and type(data) is str:
            return str(UUID(hex=data))
        if kind in ("datetime_iso", "decimal_str") and type(data) is str:
            return data
        raise ValueError(f"unknown stored type {kind!r}")
    return obj


def decode_payload(payload: bytes) -> dict[str, Any]:
    """The payload bytes as plain JSON (see the module doc); eventsourcing's
    `originator_topic` (a Python class path) is left out."""
    decoded = json.loads(payload, object_hook=_unwrap)
    if type(decoded) is not dict:
        raise ValueError("payload is not a JSON object")
    decoded.pop("originator_topic", None)
    return decoded


def split_envelope(state: bytes) -> tuple[bytes, bytes, bytes, bytes]:
    """(magic, header, signature, payload) of stored envelope bytes, or ValueError."""
    try:
        magic, size = ENVELOPE_PREFIX.unpack_from(state)
    except struct.error:
        raise ValueError("truncated envelope") from None
    if magic not in (MAGIC, MAGIC_V1):
        raise ValueError("bad magic")
    start = ENVELOPE_PREFIX.size
    header = state[start : start + size]
    signature = state[start + size : start + size + _SIGNATURE_SIZE]
    if len(header) != size or len(signature) != _SIGNATURE_SIZE:
        raise ValueError("truncated envelope")
    return magic, header, signature, state[start + size + _SIGNATURE_SIZE :]


def event_record(position: int, state: bytes, currency: str | None) -> dict[str, Any]:
    """The export record of the event at log `position` with stored bytes `state`.

    `currency` is the currency of the event's stream (its opening event's), None
    for streams without money. Raises `VerificationError` when the bytes are not
    an envelope the format can describe."""
    try:
        _, header, _, payload = split_envelope(state)
        fields = _decode_json(header.decode())
        stream, version, topic = fields["stream"], fields["version"], type_name(fields["type"])
        decoded = decode_payload(payload)
    except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise _undescribable(exc, position) from exc
    return {
        "position": position,
        "stream": stream,
        "version": version,
        "type": topic,
        "currency": currency,
        "envelope": base64.b64encode(state).decode(),
        "header": fields,
        "payload": decoded,
    }


def _undescribable(exc: Exception, position: int) -> VerificationError:
    """Envelope bytes no event record describes, and what is wrong, said plainly."""
    if isinstance(exc, KeyError):
        what = f"its header has no {exc.args[0]!r}"
    elif isinstance(exc, (TypeError, AttributeError)):
        what = "its header is not a JSON object of the envelope's fields"
    else:
        what = str(exc)
    return VerificationError(
        f"its envelope is not one an event record can describe: {what}",
        where=f"log position {position}",
    )


# The fast path of `event_line`: eventsourcing writes compact JSON, so its
# wrappers are recognisable as text (a JSON string cannot hold an unescaped
# quote, so the pattern never matches inside one). Anything else takes the
# reference path (`decode_payload`), and a test holds the two to each other.
_WRAPPER = re.compile(
    rb'\{"_type_":"(?:uuid_hex","_data_":"([0-9a-f]{8})([0-9a-f]{4})([0-9a-f]{4})'
    rb'([0-9a-f]{4})([0-9a-f]{12})"|(?:datetime_iso|decimal_str)","_data_":"([^"\\]*)")\}'
)
_TOPIC = re.compile(rb',"originator_topic":"[^"\\]*"')
_LINE = (
    '{"position":%d,"stream":%s,"version":%d,"type":%s,"currency":%s,'
    '"envelope":"%s","header":%s,"payload":%s}\n'
)
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _plain(match: re.Match[bytes]) -> bytes:
    text = match.group(6)
    if text is None:
        text = b"-".join(match.group(1, 2, 3, 4, 5))
    return b'"' + text + b'"'


def _payload_text(payload: bytes) -> str:
    """`decode_payload(payload)` as JSON text, without building it in Python."""
    text = _WRAPPER.sub(_plain, payload)
    if b'"_type_"' in text or b'"originator_topic"' in _TOPIC.sub(b"", text, count=1):
        return _dumps(decode_payload(payload))
    if not text.startswith(b"{"):
        raise ValueError("payload is not a JSON object")
    return _TOPIC.sub(b"", text, count=1).decode()


_TAIL = re.compile(r',"stream":"([^"\\]*)","type":"([^"\\]*)","version":(\d+)\}$')


def stream_type_version(header: str) -> tuple[str, int, str]:
    """A header's stream, version and type: read from its canonical tail when
    they need no escaping (the usual case), else parsed as JSON."""
    match = _TAIL.search(header)
    if match is not None:
        return match.group(1), int(match.group(3)), match.group(2)
    fields = _decode_json(header)
    if type(fields) is not dict:
        raise ValueError("header is not a JSON object")
    return fields["stream"], fields["version"], fields["type"]


def event_line(position: int, state: bytes, currency: str | None) -> str:
    """`event_record(...)` as one line of JSON Lines (with its newline), built
    from the envelope's own JSON text: what the bundle writer streams."""
    return event_line_of(position, state, currency)[0]


def event_line_of(position: int, state: bytes, currency: str | None) -> tuple[str, str, int, str]:
    """`event_line`, with the header's stream, version and type it was built from."""
    try:
        _, header, _, payload = split_envelope(state)
        header_text = header.decode()
        stream, version, topic = stream_type_version(header_text)
        payload_text = _payload_text(payload)
        line = _LINE % (
            position,
            _dumps(stream),
            version,
            _dumps(type_name(topic)),
            "null" if currency is None else _dumps(currency),
            binascii.b2a_base64(state, newline=False).decode(),
            header_text,
            payload_text,
        )
    except (ValueError, UnicodeDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise _undescribable(exc, position) from exc
    return line, stream, version, topic


def opening_currency(state: bytes) -> str | None:
    """The currency a stream's opening event (its stored bytes) names, if any."""
    payload = split_envelope(state)[3]
    if b'"currency"' not in payload:
        return None
    return stream_currency(decode_payload(payload))


def stream_currency(payload: Mapping[str, Any]) -> str | None:
    """The currency a stream's opening event names (accounts, tables, rounds)."""
    currency = payload.get("currency")
    return currency if type(currency) is str else None
