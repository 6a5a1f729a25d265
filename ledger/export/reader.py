"""Reading a bundle back, trusting nothing in it: every file and line is
checked for form, and every event record's decoded part is re-derived from
its envelope bytes. Any problem is a `VerificationError` naming the file,
the line and (for events) the log position."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Keyring
from ledger.domain import stored_names
from ledger.errors import ConfigError, KeyStoreError, VerificationError
from ledger.export.bundle_files import (
    CHECKPOINTS,
    CONSISTENCY,
    EVENTS,
    FORMAT,
    GAMES,
    KEYRING,
    MANIFEST,
    PROOFS,
)
from ledger.export.records import (
    SCHEMA_VERSION,
    decode_payload,
    event_line,
    event_line_of,
    event_record,
    split_envelope,
    stream_currency,
)
from ledger.plugins.registry import rules_hash

_decode = json.JSONDecoder().decode
ROUND_OPENED_TOPIC = ":Round.Opened"


@dataclass(frozen=True)
class BundleEvent:
    position: int
    stream: str
    version: int
    topic: str  # the signed header's type (the store's topic column)
    envelope: bytes
    label: str  # "events.jsonl line N (log position P)"
    canonical: bool = True  # the line is exactly what the ledger writes for it

    @cached_property
    def payload(self) -> dict[str, Any]:
        """The payload the envelope's bytes decode to: what the record's own
        `payload` was checked to be (decoded only where it is read)."""
        return decode_payload(split_envelope(self.envelope)[3])

    def payload_value(self, key: str) -> Any:
        """`payload.get(key)`, read with the plain JSON parser when the value
        is a string, number, boolean or null: only objects can be the stored
        wrappers `payload` unwraps, so such a value reads the same either way,
        at a fraction of the cost (a stream's opening event is a third of a
        log's; its currency is all its worker reads of it)."""
        if "payload" not in self.__dict__:
            plain = self._plain_payload
            if type(plain) is dict:
                value = plain.get(key)
                if not isinstance(value, (dict, list)):
                    return value
        return self.payload.get(key)

    @cached_property
    def _plain_payload(self) -> Any:
        """The payload as the plain JSON parser reads it (parsed once: a round's
        opening is read for its currency, game and rules hash)."""
        return json.loads(split_envelope(self.envelope)[3])


def _raw_lines(path: Path) -> Iterator[tuple[int, str, Any]]:
    """(line number, text, parsed JSON) of a JSON Lines file, or a named error."""
    try:
        handle = path.open("r", encoding="utf-8")
    except OSError as exc:
        raise VerificationError(f"bundle file {path.name} cannot be read: {exc.strerror}") from exc
    with handle:
        try:
            for number, line in enumerate(handle, 1):
                try:
                    yield number, line, _decode(line)
                except ValueError:
                    raise VerificationError(
                        f"bundle {path.name} line {number} is not JSON"
                    ) from None
        except UnicodeDecodeError:
            raise VerificationError(f"bundle {path.name} is not UTF-8 text") from None


def _lines(path: Path) -> Iterator[tuple[int, Any]]:
    for number, _, value in _raw_lines(path):
        yield number, value


def _object(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise VerificationError(f"bundle file {path.name} cannot be read: {exc.strerror}") from exc
    except (ValueError, UnicodeDecodeError):
        raise VerificationError(f"bundle {path.name} is not JSON") from None
    if type(data) is not dict:
        raise VerificationError(f"bundle {path.name} is not a JSON object")
    return data


class Bundle:
    """A bundle directory, read file by file (events are streamed)."""

    def __init__(self, directory: Path) -> None:
        if not directory.is_dir():  # nothing to verify: bad input, not a failed check
            raise ConfigError(f"bundle {directory} is not a directory")
        self.directory = directory
        if not (directory / MANIFEST).exists():  # not a bundle at all: bad input too
            raise ConfigError(
                f"{directory} holds no {MANIFEST}: it is not an export bundle "
                "(`ledger export DIR` writes one)"
            )
        self.manifest = _object(directory / MANIFEST)
        if self.manifest.get("format") != FORMAT:
            raise VerificationError(f"bundle {MANIFEST}: format is not {FORMAT!r}")
        if self.manifest.get("schema_version") != SCHEMA_VERSION:
            raise VerificationError(
                f"bundle {MANIFEST}: schema_version {self.manifest.get('schema_version')!r} is "
                f"not {SCHEMA_VERSION}, the version this ledger reads"
            )
        selection = self.manifest.get("selection")
        kind = selection.get("kind") if type(selection) is dict else None
        if kind not in ("all", "round", "range"):
            raise VerificationError(f"bundle {MANIFEST}: selection kind {kind!r} is unknown")
        self.kind: str = kind
        self.round_id = selection.get("round") if type(selection) is dict else None
        # (game, rules hash) of every round opened in the events read so far.
        self.profiles_used: set[tuple[str, str]] = set()

    @property
    def whole_log(self) -> bool:
        return self.kind == "all"

    def keyring(self) -> Keyring:
        path = self.directory / KEYRING
        advice = "the bundle is damaged: verify it with your own copy (--keyring FILE)"
        try:
            return Keyring.from_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"bundle {self.directory} holds no {KEYRING}: {advice}") from None
        except OSError as exc:
            raise ConfigError(f"cannot read bundle {KEYRING}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"bundle {KEYRING} is not UTF-8 text: {advice}") from None
        except KeyStoreError as exc:
            raise ConfigError(f"bundle {KEYRING} is not a keyring ({exc}): {advice}") from None

    def checkpoints(self) -> list[tuple[object, object, str]]:
        """(tree_size column, note text, label) of every exported checkpoint."""
        found = []
        for number, record in _lines(self.directory / CHECKPOINTS):
            label = f"{CHECKPOINTS} line {number}"
            if type(record) is not dict or set(record) != {"tree_size", "note"}:
                raise VerificationError(f"bundle {label}: not a checkpoint record")
            found.append((record["tree_size"], record["note"], label))
        return found

    def games(self) -> list[dict[str, Any]]:
        """Every game profile record, its rules checked against its rules hash."""
        games = []
        for number, record in _lines(self.directory / GAMES):
            label = f"bundle {GAMES} line {number}"
            if type(record) is not dict or type(record.get("rules_hash")) is not str:
                raise VerificationError(f"{label}: not a game profile record")
            rules = record.get("rules")
            if rules is not None:
                if type(rules) is not dict:
                    raise VerificationError(f"{label}: rules are not a JSON object")
                if rules_hash(rules) != record["rules_hash"]:
                    raise VerificationError(
                        f"{label}: the rules of {record.get('game')!r} do not hash to its "
                        f"rules hash {record['rules_hash'][:12]}"
                    )
            games.append(record)
        return games

    def proofs(self) -> Iterator[tuple[int, int, list[bytes], str]]:
        """(position, tree size, audit path, label) of each inclusion proof, in order."""
        for number, record in _lines(self.directory / PROOFS):
            label = f"{PROOFS} line {number}"
            if (
                type(record) is not dict
                or type(record.get("position")) is not int
                or type(record.get("tree_size")) is not int
                or type(record.get("proof")) is not list
            ):
                raise VerificationError(f"bundle {label}: not an inclusion proof record")
            yield record["position"], record["tree_size"], _hashes(record["proof"], label), label

    def consistency(self) -> list[tuple[int, int, list[bytes], str]] | None:
        """(old size, new size, proof, label) of each consistency proof; None when the
        bundle has no consistency.jsonl (written before the file existed)."""
        path = self.directory / CONSISTENCY
        if not path.exists():
            return None
        found = []
        for number, record in _lines(path):
            label = f"{CONSISTENCY} line {number}"
            if (
                type(record) is not dict
                or set(record) != {"from_size", "to_size", "proof"}
                or type(record["from_size"]) is not int
                or type(record["to_size"]) is not int
                or type(record["proof"]) is not list
            ):
                raise VerificationError(f"bundle {label}: not a consistency proof record")
            found.append(
                (record["from_size"], record["to_size"], _hashes(record["proof"], label), label)
            )
        return found

    def events(self) -> Iterator[BundleEvent]:
        """Every event record, checked against its own envelope bytes."""
        currencies = StreamCurrencies()
        used = self.profiles_used
        for number, line, record in _raw_lines(self.directory / EVENTS):
            event, currency = checked_event(line, record, number)
            currencies.check(event, currency)
            if opens_round(event):
                used.add(round_profile(event))
            yield event


def _hashes(encoded: list[Any], label: str) -> list[bytes]:
    try:
        return [base64.b64decode(p, validate=True) for p in encoded]
    except (binascii.Error, ValueError, TypeError):
        raise VerificationError(f"bundle {label}: a proof hash is not base64") from None


def opens_round(event: BundleEvent) -> bool:
    return event.version == 1 and event.topic.endswith(ROUND_OPENED_TOPIC)


def round_profile(event: BundleEvent) -> tuple[str, str]:
    """(game, rules hash) a round's opening event pins (its game under the key
    its class version stored it under: `ledger.domain.stored_names`)."""
    version = event.payload_value("class_version")
    game = stored_names.stored_key(stored_names.ROUND_OPENED, version, "game")
    return str(event.payload_value(game)), str(event.payload_value("rules_hash"))


class StreamCurrencies:
    """Every record of a stream must carry one currency: the one its opening
    event implies, or (for a stream opened before what is read here) the one
    its first record read says."""

    def __init__(self) -> None:
        self.opened: dict[str, object] = {}  # streams opened here
        # Streams first seen past their opening: (currency, position, label) of that sighting.
        self.assumed: dict[str, tuple[object, int, str]] = {}

    def check(self, event: BundleEvent, currency: object) -> None:
        stream = event.stream
        if event.version == 1:
            self.opened[stream] = stream_currency({"currency": event.payload_value("currency")})
        if stream in self.opened:
            expected, source = self.opened[stream], "from the stream's opening event"
        elif stream in self.assumed:
            expected, source = self.assumed[stream][0], "as its earlier records say"
        else:
            self.assumed[stream] = (currency, event.position, event.label)
            return
        if currency != expected:
            raise VerificationError(currency_problem(event.label, currency, expected, source))


def currency_problem(label: str, currency: object, expected: object, source: str) -> str:
    return f"bundle {label}: currency {currency!r} is not its stream's ({expected!r}, {source})"


def checked_event(line: str, record: Any, number: int) -> tuple[BundleEvent, object]:
    """One event record checked against its envelope bytes: the event and the
    currency the record states (checked against its stream by `StreamCurrencies`)."""
    label = f"{EVENTS} line {number}"
    if type(record) is not dict or type(record.get("position")) is not int:
        raise VerificationError(f"bundle {label}: not an event record")
    position = record["position"]
    label = f"{label} (log position {position})"
    try:
        envelope = base64.b64decode(record["envelope"], validate=True)
    except (KeyError, binascii.Error, ValueError, TypeError):
        raise VerificationError(f"bundle {label}: envelope is not base64") from None
    currency = record.get("currency")
    try:
        # The line exactly as the ledger writes it from these bytes (the fast
        # path: `event_line` is held to `event_record` by a test), or else the
        # same JSON value as the record the envelope decodes to.
        canonical = event_line(position, envelope, currency) == line
        if not canonical:
            expected = event_record(position, envelope, currency)
            if record != expected:
                field = next(
                    (k for k in expected if record.get(k) != expected[k]),
                    next(iter(set(record) - set(expected)), "?"),
                )
                raise VerificationError(f"its {field!r} disagrees with its envelope bytes")
    except VerificationError as exc:
        raise VerificationError(f"bundle {label}: {exc}") from None
    event = BundleEvent(
        position, record["stream"], record["version"], record["header"]["type"], envelope, label,
        canonical,
    )  # fmt: skip
    return event, currency


# A line as the ledger writes it, up to its envelope's base64: what
# `canonical_event` needs to render the whole line again (no quote or
# backslash inside a string: anything else is parsed by `checked_event`).
_CANONICAL_HEAD = re.compile(
    rb'\{"position":(0|[1-9][0-9]*),"stream":"[^"\\]*","version":[0-9]+,"type":"[^"\\]*",'
    rb'"currency":(null|"[^"\\]*"),"envelope":"'
)


def canonical_event(raw: bytes, number: int) -> tuple[BundleEvent, object] | None:
    """The event of line `number` when the line is byte for byte what the
    ledger writes for its position, envelope and currency (`event_line`), read
    without parsing it as JSON; else None (`checked_event` then says what, if
    anything, is wrong with it)."""
    match = _CANONICAL_HEAD.match(raw)
    if match is None:
        return None
    position_digits, currency_text = match.groups()
    position = int(position_digits)
    currency = None if currency_text == b"null" else currency_text[1:-1].decode("utf-8", "replace")
    start = match.end()
    try:
        # Up to the next quote, decoded in binascii's strict mode (base64's
        # alphabet and padding only), then held to canonical base64, and the
        # whole line to the ledger's, by the line rendered again.
        envelope = binascii.a2b_base64(raw[start : raw.index(b'"', start)], strict_mode=True)
        line, stream, version, topic = event_line_of(position, envelope, currency)
    except (VerificationError, binascii.Error, ValueError):
        return None
    if line.encode() != raw:
        return None
    label = f"{EVENTS} line {number} (log position {position})"
    return BundleEvent(position, stream, version, topic, envelope, label), currency


def parse_checkpoint(note: object, label: str) -> Checkpoint:
    try:
        return Checkpoint.from_note(note)
    except VerificationError as exc:
        raise VerificationError(f"bundle {label}: {exc}") from None
