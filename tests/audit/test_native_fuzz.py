"""Hostile rows and arguments for the verifier's C fast path (`ledger/crypto/_native.c`).

A deterministic corpus (fixed seeds, no clock) of what an attacker with
database rights, or with the node key, could store in a row: envelopes cut at
every length, header lengths that lie, headers re-signed with odd text in
every field (non-canonical digits, NULs, bytes that are not UTF-8, deep JSON
nesting), payloads near 2**16 bytes, versions near 2**31, 2**53 and 2**63,
and columns of every odd Python type a driver or a caller could hand over.
Each row is verified with the C path and without it, and:

- the two verdicts are the same, word for word (so the C code never passes a
  row the Python path fails, nor the reverse);
- the C code was handed the row (it is not a corpus the Python loop alone saw);
- a row the full path refuses on its own (`open_envelope`, `check_row`) is a
  finding at its position, whichever path ran: a fast path never passes what
  the full path would refuse.

`native.scan`'s arguments are fuzzed too (negative, huge and mistyped numbers,
malformed caches, callbacks that raise or change the lists under it): it
raises a clean error or stops, and never reads outside what it was given.
tests/audit/test_native_sanitized.py runs this file again against a build of the C
code under AddressSanitizer and UndefinedBehaviorSanitizer.
"""

from __future__ import annotations

import hashlib
import random
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.audit.log import chunk_walk as chunks_module
from ledger.audit.log.chunk_walk import verify_rows
from ledger.audit.log.chunks import ChunkSpec
from ledger.crypto import canonical
from ledger.crypto.canonical import ENVELOPE_DOMAIN
from ledger.crypto.envelope import (
    PREV_OFFSET,
    SIGNED_AT_OFFSET,
    SignerCheck,
    assemble,
    check_row,
    open_envelope,
)
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.native import native
from ledger.crypto.roles import Role
from ledger.crypto.signing import InMemorySigner, sign_open_address, verify_signature
from ledger.errors import VerificationError
from ledger.store.merkle_log import stream_of
from tests.audit.test_native_fastpath import _world, needs_native, outcome
from tests.conftest import PASSPHRASE, new_store

pytestmark = needs_native

SEED = 37  # the byte edits are drawn from random.Random(SEED); hypothesis is derandomized


@dataclass(frozen=True)
class World:
    chunks: list[tuple[ChunkSpec, list[Any]]]
    check: SignerCheck
    signer: InMemorySigner  # the node key: rows re-signed as an attacker holding it would


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    workdir = tmp_path_factory.mktemp("native-fuzz")
    with new_store(request.param, workdir) as store:
        for chunks, check in _world(store, workdir):
            keys = KeyDirectory(workdir / "keys")
            yield World(chunks, check, keys.signer(Role.LEDGER_NODE, PASSPHRASE))


# --- the targets: rows the C path is handed -------------------------------------------


@dataclass(frozen=True)
class Target:
    chunk: int
    row: int  # >= 1: the chunk's first row takes the full path, which learns the key
    earlier: int | None  # the row before it in its stream inside the chunk, if any


def targets(world: World) -> list[Target]:
    """In each of the first two chunks: a stream's first row here (its `prev` read
    from the envelope) and a row following its stream's previous one."""
    found = []
    for number, (_, rows) in enumerate(world.chunks[:2]):
        seen: dict[object, int] = {}
        first = following = None
        for index, row in enumerate(rows):
            if index >= 1 and row[1] not in seen and first is None:
                first = Target(number, index, None)
            if index >= 1 and row[1] in seen and seen[row[1]] >= 1 and following is None:
                following = Target(number, index, seen[row[1]])
            seen[row[1]] = index
        assert first is not None and following is not None
        found += [first, following]
    return found


# --- judging one altered chunk both ways ------------------------------------------------


class ScanRecorder:
    """`ledger.crypto.native` as chunks.py sees it, noting each run `scan` makes."""

    def __init__(self, module: Any) -> None:
        self._module = module
        self.runs: list[tuple[int, int, int | None]] = []  # (index, end, first not passed)

    def scan(self, rows: list[Any], index: int, end: int, *rest: Any) -> int:
        done = None
        try:
            done = self._module.scan(rows, index, end, *rest)
            return done  # type: ignore[no-any-return]
        finally:
            self.runs.append((index, end, done))

    def handed(self, row: int) -> bool:
        """True when a run reached `row` (passed it, stopped at it, or raised on it)."""
        return any(
            index <= row < end and (done is None or done >= row) for index, end, done in self.runs
        )


@contextmanager
def recording_scans() -> Iterator[ScanRecorder]:
    recorder = ScanRecorder(native)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(chunks_module, "native", recorder)
        yield recorder


def verdict(spec: ChunkSpec, rows: list[Any], check: SignerCheck, *, use_native: bool) -> Any:
    """The chunk's result, or the error verify_rows raised (the same error both ways)."""
    try:
        return outcome(verify_rows(spec, list(rows), check, use_native=use_native))
    except Exception as exc:  # e.g. a row that is not 5 columns: both ways raise
        return ("raised", type(exc).__name__, str(exc))


def refused_alone(row: Any) -> bool:
    """True when the full path refuses this row on its own columns and bytes."""
    if not isinstance(row, tuple | list) or len(row) != 5:
        return True  # (any other row makes verify_rows raise)
    _, originator, version, topic, state = row
    if isinstance(state, bytearray | memoryview):
        state = bytes(state)  # as verify_rows reads a driver's buffer
    if originator is None or type(version) is not int or type(topic) is not str:
        return True
    try:
        stream = stream_of(originator)
        envelope = open_envelope(state, stream=stream, version=version)
        check_row(envelope, stream=stream, version=version, topic=topic)
    except VerificationError:
        return True
    return False


def judge(world: World, target: Target, rows: list[Any], case: str, *, signatures: bool) -> None:
    spec = replace(world.chunks[target.chunk][0], check_signatures=signatures)
    with recording_scans() as recorder:
        in_c = verdict(spec, rows, world.check, use_native=True)
    in_python = verdict(spec, rows, world.check, use_native=False)
    where = f"{case} (chunk {target.chunk} row {target.row}, signatures {signatures})"
    assert in_c == in_python, where
    assert recorder.handed(target.row), f"{where}: the C path was never handed the row"
    if refused_alone(rows[target.row]) and in_c[0] != "raised":
        position = spec.first_leaf + target.row
        assert position in [p for p, _, _ in in_c[0]], f"{where}: passed, yet refused alone"


def flagged(world: World, target: Target, rows: list[Any]) -> bool:
    """True when verifying the chunk (C path) finds something at the target row."""
    spec = world.chunks[target.chunk][0]
    problems = verdict(spec, rows, world.check, use_native=True)[0]
    return spec.first_leaf + target.row in [position for position, _, _ in problems]


def rows_to(world: World, target: Target) -> list[Any]:
    """The target's chunk up to the target row: what follows would add nothing
    (the row's effects, its stream's head and its leaf hash, are compared)."""
    return list(world.chunks[target.chunk][1][: target.row + 1])


def with_row(world: World, target: Target, **columns: Any) -> list[Any]:
    """The target row's columns replaced."""
    rows = rows_to(world, target)
    row = list(rows[target.row])
    for name, value in columns.items():
        row[COLUMNS.index(name)] = value
    rows[target.row] = tuple(row)
    return rows


COLUMNS = ("id", "originator", "version", "topic", "state")


def genuine(world: World, target: Target) -> tuple[Any, ...]:
    return tuple(world.chunks[target.chunk][1][target.row])


def split(state: bytes) -> tuple[bytes, bytes, bytes]:
    """A genuine envelope's header, signature and payload."""
    size = int.from_bytes(state[4:6], "big")
    return state[6 : 6 + size], state[6 + size : 6 + size + 64], state[6 + size + 64 :]


def resigned(world: World, header: bytes, payload: bytes) -> bytes:
    """An envelope around any header, signed with the node key (LSE2 prefix, true length)."""
    return assemble(header, world.signer.sign(ENVELOPE_DOMAIN + header), payload)


def field(header: bytes, name: bytes) -> re.Match[bytes]:
    match = re.search(b'"' + name + rb'":("[^"]*"|\d+)', header)
    assert match is not None, name
    return match


def with_field_text(header: bytes, name: bytes, text: bytes) -> bytes:
    """The header with one field's value written as `text` (quotes included)."""
    match = field(header, name)
    return header[: match.start(1)] + text + header[match.end(1) :]


# --- the corpus ------------------------------------------------------------------------


def truncations(state: bytes) -> Iterator[tuple[str, bytes]]:
    for size in range(len(state)):
        yield f"cut to {size} bytes", state[:size]


def header_lengths(state: bytes) -> Iterator[tuple[str, bytes]]:
    true_size = int.from_bytes(state[4:6], "big")
    lengths = {0, 1, 2, 5, PREV_OFFSET + 63, PREV_OFFSET + 64, SIGNED_AT_OFFSET - 1}
    lengths |= {SIGNED_AT_OFFSET, SIGNED_AT_OFFSET + 1, true_size - 1, true_size + 1}
    lengths |= {len(state) - 6 - 65, len(state) - 6 - 64, len(state) - 6 - 63, len(state) - 6}
    lengths |= {len(state) - 5, 0x7FFF, 0x8000, 0xFFFE, 0xFFFF}
    for length in sorted(lengths):
        yield f"header length {length}", state[:4] + length.to_bytes(2, "big") + state[6:]


def prefixes(state: bytes) -> Iterator[tuple[str, bytes]]:
    for magic in (b"LSE1", b"LSE3", b"lse2", b"\x00LSE", b"LSE\x00"):
        yield f"magic {magic!r}", magic + state[4:]
    for whole in (b"", b"L", b"LSE", b"LSE2", b"LSE2\x00", b"LSE2\xff\xff", b"\x00" * 6):
        yield f"envelope {whole!r}", whole
    yield "prefix and signature only", b"LSE2\x00\x00" + bytes(64)
    yield "a maximal length and nothing after it", b"LSE2\xff\xff" + bytes(64)


BYTE_VALUES = (0x00, 0xFF, 0x80, 0xC3, 0xED, ord('"'), ord("\\"), ord(","), ord("0"), ord(" "))


def byte_edits(state: bytes, rng: random.Random) -> Iterator[tuple[str, bytes]]:
    """Single bytes overwritten, half of them inside the header (NULs, bytes that
    are not UTF-8, quotes, commas, digits)."""
    header_end = 6 + int.from_bytes(state[4:6], "big")
    for _ in range(48):
        at = rng.randrange(header_end) if rng.random() < 0.5 else rng.randrange(len(state))
        value = rng.choice(BYTE_VALUES)
        yield f"byte {at} = {value:#x}", state[:at] + bytes([value]) + state[at + 1 :]


SIGNED_AT_TEXTS = [
    b"", b"0", b"00", b"01", b"-1", b"-0", b"+1", b" 1", b"1 ", b"1.0", b"1e3", b"1_0",
    b"\x00", b"\xff", b"\xd9\xa1",  # an Arabic-Indic digit one, in UTF-8
    b"9007199254740991", b"9007199254740992", b"18446744073709551616", b"9" * 17, b"9" * 19,
    b"9" * 40, b"null", b'"1"', b"[1]",
]  # fmt: skip
VERSION_TEXTS = [
    b"0", b"-1", b"01", b"-0", b"1.0", b"1e0", b" 1", b"\x001", b"2147483648",
    b"9007199254740992", b"9223372036854775807", b"9223372036854775808", b"9" * 40,
]  # fmt: skip


def hostile_headers(header: bytes) -> Iterator[tuple[str, bytes]]:
    """Headers an attacker holding the node key could sign: every field's text
    made odd in a way canonical JSON never writes, and headers that are not a
    header at all."""
    for text in SIGNED_AT_TEXTS:
        yield f"signed_at {text!r}", with_field_text(header, b"signed_at", text)
    for text in VERSION_TEXTS:
        yield f"version {text!r}", with_field_text(header, b"version", text)
    for name in (b"stream", b"type", b"key_id", b"payload_sha256", b"prev"):
        value = field(header, name).group(1)[1:-1]
        odd = {
            "capitals": value.upper(),
            "a NUL": value + b"\x00",
            "not UTF-8": value[:-1] + b"\xff",
            "half a UTF-8 character": value + b"\xc3",
            "a lone surrogate": value + b"\xed\xa0\x80",
            "an escape": value[:-1] + b"\\u00" + value[-1:].hex().encode(),
            "a quote escaped": value + b'\\"',
            "one character short": value[:-1],
            "one character long": value + value[-1:],
            "empty": b"",
        }
        for label, text in odd.items():
            yield f"{name.decode()} {label}", with_field_text(header, name, b'"' + text + b'"')
    yield "trailing space", header + b" "
    yield "leading space", b" " + header
    yield "a NUL after it", header + b"\x00"
    yield "no closing brace", header[:-1]
    yield "an extra field", header[:-1] + b',"z":1}'
    yield "a field twice", header[:-1] + b',"version":' + field(header, b"version").group(1) + b"}"
    yield "empty", b""
    yield "an empty object", b"{}"
    yield "JSON null", b"null"
    yield "arrays nested 32,000 deep", b"[" * 32000 + b"]" * 32000
    yield "objects nested 8,000 deep", b'{"a":' * 8000 + b"1" + b"}" * 8000
    yield "65,535 bytes of digits", b"9" * 0xFFFF


def hostile_payloads(header: bytes) -> Iterator[tuple[str, bytes]]:
    """Payloads of odd shapes and sizes, the header's hash fixed up to match:
    these rows are valid (the verifier reads no payload), both paths pass them."""
    yield "an empty payload", b""
    yield "a payload of NULs", bytes(1000)
    yield "a payload that is not UTF-8", b"\xff\xfe" * 500
    yield "arrays nested 100,000 deep", b"[" * 100_000 + b"]" * 100_000
    for total in (0xFFFF, 0x10000, 0x10001, 1 << 20):  # whole envelope sizes
        yield f"an envelope of {total} bytes", b"x" * max(0, total - 6 - len(header) - 64)


def sealed_payload(world: World, header: bytes, payload: bytes) -> bytes:
    """An envelope around `payload`, its hash in the header, signed with the node key."""
    digest = hashlib.sha256(payload).hexdigest().encode()
    return resigned(
        world, with_field_text(header, b"payload_sha256", b'"' + digest + b'"'), payload
    )


class BytesSub(bytes):
    pass


class IntSub(int):
    pass


class StrSub(str):
    pass


class TupleSub(tuple):  # type: ignore[type-arg]
    pass


class UUIDSub(uuid.UUID):
    pass


def odd_states(state: bytes) -> list[tuple[str, object]]:
    return [
        ("NULL", None),
        ("text", state.decode("latin-1")),
        ("a bytearray", bytearray(state)),
        ("a memoryview", memoryview(state)),
        ("a bytes subclass", BytesSub(state)),
        ("an integer", 0),
        ("a list of its bytes", list(state[:8])),
    ]


def odd_versions(version: int) -> list[tuple[str, object]]:
    numbers = [version - 1, version + 1, 0, -1, 2**16, 2**31 - 1, 2**31, 2**53 - 1, 2**53]
    numbers += [2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10**40, 2**1000]
    return [
        ("NULL", None),
        ("text", str(version)),
        ("a float", float(version)),
        ("True", True),
        ("an int subclass", IntSub(version)),
        *((f"{number}", number) for number in numbers),
    ]


def odd_topics(topic: str) -> list[tuple[str, object]]:
    return [
        ("NULL", None),
        ("bytes", topic.encode()),
        ("a str subclass", StrSub(topic)),
        ("empty", ""),
        ("capitals", topic.upper()),
        ("non-ASCII", topic + "é"),
        ("a quote", topic + '"'),
        ("a backslash", topic + "\\"),
        ("a NUL", topic + "\x00"),
        ("a lone surrogate", topic + "\ud800"),
        ("70,000 characters", "t" * 70_000),
    ]


def odd_originators(originator: object) -> list[tuple[str, object]]:
    hex_id = str(originator).replace("-", "")
    as_uuid = uuid.UUID(hex=hex_id)
    odd_uuid, odd_int_uuid = uuid.UUID(int=1), uuid.UUID(hex=hex_id)
    object.__setattr__(odd_uuid, "int", -1)  # a UUID whose int no UUID() would accept
    object.__setattr__(odd_int_uuid, "int", IntSub(as_uuid.int))  # str() still reads it
    return [
        ("NULL", None),
        ("0", 0),
        ("-1", -1),
        ("2**63", 2**63),
        ("its 128-bit int", as_uuid.int),
        ("a float", 1.5),
        ("its 16 bytes", as_uuid.bytes),
        ("its hex", hex_id),
        ("its hex in capitals", hex_id.upper()),
        ("a UUID", as_uuid),
        ("a UUID subclass", UUIDSub(hex=hex_id)),
        ("a UUID with a negative int", odd_uuid),
        ("a UUID whose int is an int subclass", odd_int_uuid),
        ("a str subclass", StrSub(hex_id)),
        ("hyphenated", str(as_uuid)),
        ("32 NULs", "\x00" * 32),
        ("32 non-ASCII", "é" * 32),
        ("32 non-hex", "g" * 32),
        ("int syntax", "0x" + hex_id[2:]),
        ("an underscore (int syntax)", hex_id[:4] + "_" + hex_id[5:]),
        ("a space after it", hex_id + " "),
        ("31 digits", hex_id[:31]),
    ]


def odd_shapes(row: tuple[Any, ...]) -> list[tuple[str, object]]:
    return [
        ("four columns", row[:4]),
        ("six columns", (*row, None)),
        ("a list", list(row)),
        ("a tuple subclass", TupleSub(row)),
        ("NULL", None),
    ]


# --- the tests -------------------------------------------------------------------------


def test_an_envelope_cut_at_every_length_is_judged_the_same_both_ways(world: World) -> None:
    for target in targets(world)[:2]:
        state = genuine(world, target)[4]
        for case, cut in truncations(state):
            judge(world, target, with_row(world, target, state=cut), case, signatures=True)


def test_lying_header_lengths_and_prefixes_are_judged_the_same_both_ways(world: World) -> None:
    for target in targets(world):
        state = genuine(world, target)[4]
        for case, altered in [*header_lengths(state), *prefixes(state)]:
            for signatures in (False, True):
                rows = with_row(world, target, state=altered)
                judge(world, target, rows, case, signatures=signatures)


def test_bytes_overwritten_are_judged_the_same_both_ways(world: World) -> None:
    rng = random.Random(SEED)
    for target in targets(world):
        state = genuine(world, target)[4]
        for case, altered in byte_edits(state, rng):
            signatures = rng.random() < 0.5
            rows = with_row(world, target, state=altered)
            judge(world, target, rows, case, signatures=signatures)


def test_odd_headers_signed_with_the_node_key_are_judged_the_same_both_ways(
    world: World,
) -> None:
    for target in targets(world):
        header, _, payload = split(genuine(world, target)[4])
        for case, odd in hostile_headers(header):
            rows = with_row(world, target, state=resigned(world, odd, payload))
            for signatures in (False, True):
                judge(world, target, rows, case, signatures=signatures)


def test_odd_payloads_sealed_with_the_node_key_pass_both_ways(world: World) -> None:
    for target in targets(world):
        header, _, _ = split(genuine(world, target)[4])
        for case, payload in hostile_payloads(header):
            state = sealed_payload(world, header, payload)
            rows = with_row(world, target, state=state)
            judge(world, target, rows, case, signatures=True)
            assert not flagged(world, target, rows), case


def test_a_header_of_65535_bytes_passes_both_ways_and_one_byte_more_does_not(
    world: World,
) -> None:
    """The header's length field is two bytes: a type name long enough to fill
    them is a valid event; one character more cannot be stored truthfully."""
    for target in targets(world):
        header, _, payload = split(genuine(world, target)[4])
        topic = genuine(world, target)[3]
        for room in (0, 1):
            long_topic = topic + "t" * (0xFFFF + room - len(header))
            long_header = with_field_text(header, b"type", b'"' + long_topic.encode() + b'"')
            assert len(long_header) == 0xFFFF + room
            signature = world.signer.sign(ENVELOPE_DOMAIN + long_header)
            size = (len(long_header) % 0x10000).to_bytes(2, "big")
            state = b"LSE2" + size + long_header + signature + payload
            rows = with_row(world, target, topic=long_topic, state=state)
            judge(world, target, rows, f"a header of {len(long_header)} bytes", signatures=True)
            assert flagged(world, target, rows) == (room == 1)


def test_columns_of_odd_types_and_values_are_judged_the_same_both_ways(world: World) -> None:
    for target in targets(world):
        row = genuine(world, target)
        _, originator, version, topic, state = row
        columns: list[tuple[str, dict[str, object]]] = [
            *((f"state {case}", {"state": value}) for case, value in odd_states(state)),
            *((f"version {case}", {"version": value}) for case, value in odd_versions(version)),
            *((f"topic {case}", {"topic": value}) for case, value in odd_topics(topic)),
            *(
                (f"stream id {case}", {"originator": value})
                for case, value in odd_originators(originator)
            ),
        ]
        for case, changes in columns:
            for signatures in (False, True):
                judge(
                    world, target, with_row(world, target, **changes), case, signatures=signatures
                )
        for case, shape in odd_shapes(row):
            rows = rows_to(world, target)
            rows[target.row] = shape
            judge(world, target, rows, f"a row that is {case}", signatures=True)


LIMITS = [-(2**63) + 1, -1, 0, 1, 2**31, 2**53 - 1, 2**53, 2**53 + 1, 2**63 - 1, 2**63, 2**64]


def test_versions_near_the_integer_limits_are_judged_the_same_both_ways(world: World) -> None:
    """A row whose stream's previous row (valid or not) stands at version v - 1,
    itself at version v, its header re-signed to say v; a stream's first row
    here too. The full path holds v to 0 <= v < 2**53: both fast paths passed
    such a row after its stream's previous one before (one header comparison,
    with the version the row's own)."""
    for target in targets(world):
        header, _, payload = split(genuine(world, target)[4])
        for version in LIMITS:
            odd = with_field_text(header, b"version", b"%d" % version)
            rows = with_row(world, target, version=version, state=resigned(world, odd, payload))
            if target.earlier is not None:
                earlier = list(rows[target.earlier])
                earlier[2] = version - 1
                rows[target.earlier] = tuple(earlier)
            for signatures in (False, True):
                judge(world, target, rows, f"version {version}", signatures=signatures)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,  # the same examples every run: a CI failure reproduces
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_spliced_bytes_are_judged_the_same_both_ways(world: World, data: st.DataObject) -> None:
    """Any run of bytes cut out of an envelope and any inserted in its place;
    inside the header, also re-signed with the node key and its length fixed up."""
    target = data.draw(st.sampled_from(targets(world)), label="target")
    state = genuine(world, target)[4]
    header, _, payload = split(state)
    inside_header = data.draw(st.booleans(), label="inside the header, re-signed")
    text = header if inside_header else state
    at = data.draw(st.integers(0, len(text)), label="at")
    cut = data.draw(st.integers(0, 16), label="cut")
    inserted = data.draw(
        st.binary(max_size=16) | st.sampled_from([b"\x00", b"\xff", b'"', b",", b"\\u0000"]),
        label="inserted",
    )
    spliced = text[:at] + inserted + text[at + cut :]
    altered = resigned(world, spliced, payload) if inside_header else spliced
    signatures = data.draw(st.booleans(), label="signatures")
    judge(world, target, with_row(world, target, state=altered), "spliced", signatures=signatures)


# --- scan's own arguments --------------------------------------------------------------


@dataclass
class ScanCall:
    """The arguments chunks.py hands `native.scan` for a run of genuine rows."""

    rows: list[Any]
    index: Any = 0
    end: Any = None
    first_leaf: Any = 0
    key: Any = b""
    low: Any = 0
    high: Any = 2**53
    clock: Any = None
    names: Any = None
    name_of: Any = None
    topics: Any = None
    topic_of: Any = None
    lasts: Any = None
    firsts: Any = None
    hashes: Any = None
    verify: Any = None
    public_key: Any = b""
    domain: Any = ENVELOPE_DOMAIN
    uuid_names: Any = None

    def __post_init__(self) -> None:
        self.end = len(self.rows) if self.end is None else self.end
        self.clock = [b"", -1] if self.clock is None else self.clock
        for name in ("names", "topics", "lasts", "firsts", "uuid_names"):
            if getattr(self, name) is None:
                setattr(self, name, {})
        self.hashes = [] if self.hashes is None else self.hashes
        self.name_of = self.name_of or plain_name
        self.topic_of = self.topic_of or (lambda topic: topic.encode())

    def run(self) -> Any:
        assert native is not None
        return native.scan(
            self.rows, self.index, self.end, self.first_leaf, self.key, self.low, self.high,
            self.clock, self.names, self.name_of, self.topics, self.topic_of, self.lasts,
            self.firsts, self.hashes, self.verify, self.public_key, self.domain, self.uuid_names,
        )  # fmt: skip


def plain_name(originator: object) -> tuple[str, bytes]:
    stream = stream_of(originator)
    return stream, stream.encode()


def genuine_call(world: World, **changes: Any) -> ScanCall:
    """A call that passes every row of the first chunk (the very first event's
    `prev` is the genesis hash, read from its envelope)."""
    _, rows = world.chunks[0]
    header, _, _ = split(rows[0][4])
    key = field(header, b"key_id").group(1)[1:-1]
    arguments: dict[str, Any] = {"index": 0, "key": key, "public_key": world.signer.public_key}
    return ScanCall(list(rows), **{**arguments, **changes})


ODD_ARGUMENTS: dict[str, list[Any]] = {
    "index": [-1, -(2**63), 2**63, 10**6, "1", 1.0, None],
    "end": [-1, 0, 2**63, -(2**63), 10**6, "9"],
    "first_leaf": [-1, 2**63 - 1, 2**63, 2**100, -(2**100), "0", 0.5, None],
    "low": [2**100, -(2**100), "0", None],
    "high": [2**100, -(2**100), "9"],
    "clock": [
        [b"x", 2**70], [None, -1], [b""], [b"", -1, 3], (b"", -1), [bytearray(), -1],
        [b"", "x"], [b"", 2**63], [b"1" * 40, 1], [BytesSub(b""), -1], [b"9" * 16, 2**53 + 7],
    ],
    "key": ["key", b"", b"k" * 70_000, bytearray(b"k"), None],
    "names": [None, []],
    "topics": [[]],
    "name_of": [lambda o: None, lambda o: 5, lambda o: (), lambda o: 1 / 0, None],
    "topic_of": [lambda t: None, lambda t: "t", lambda t: 1 / 0],
    "lasts": [[], {"x": None}],
    "firsts": [[]],
    "hashes": [{}, ()],
    "verify": [0, 2**64, -(2**64), "verify", lambda *a: None, lambda *a: 1 / 0,
               lambda *a: "yes", lambda *a: FalseOnAsk(), verify_signature],
    "public_key": [None, "k" * 32, b"k" * 31, b"k" * 33, BytesSub(b"k" * 32)],
    "domain": [None, "domain", bytearray(b"d"), b""],
    "uuid_names": [None, []],
}  # fmt: skip


def odd_named() -> list[object]:
    """Cached names of odd forms (scan takes what the caller cached as is)."""
    return [None, ("s",), (1, b"s"), ("s", "s"), (StrSub("s"), b"s"), ("s", BytesSub(b"s"))]


def odd_heads() -> list[object]:
    """A stream's head of an odd form (chunks.py only ever stores (int, 32 bytes))."""
    hash_ = bytes(32)
    return [
        (IntSub(1), hash_), ("1", hash_), (1, b"short"), (2**64, hash_), [1, hash_],
        (1, hash_, 3), (2**63 - 1, hash_), (ThrowsOnIndex(), b""),
    ]  # fmt: skip


def odd_calls(world: World) -> Iterator[tuple[str, Callable[[], ScanCall]]]:
    """Each a fresh call (a case may empty the lists it was given)."""
    for name, values in ODD_ARGUMENTS.items():
        for value in values:
            yield f"{name} = {value!r:.60}", lambda n=name, v=value: genuine_call(world, **{n: v})
    rows = world.chunks[0][1]
    originator, topic, stream = rows[1][1], rows[1][3], stream_of(rows[1][1])
    for named in odd_named():
        yield f"names[...] = {named!r}", lambda n=named: genuine_call(world, names={originator: n})
        if isinstance(originator, uuid.UUID):  # how scan caches a UUID stream id
            yield (
                f"uuid_names[...] = {named!r}",
                lambda n=named: genuine_call(world, uuid_names={originator.int: n}),
            )
    for cached in (None, "s", BytesSub(b"s")):
        yield f"topics[...] = {cached!r}", lambda c=cached: genuine_call(world, topics={topic: c})
    for head in odd_heads():
        yield f"lasts[...] = {head!r:.40}", lambda h=head: genuine_call(world, lasts={stream: h})
    for what in ("rows", "clock", "lasts", "names", "hashes", "firsts"):
        for via in ("verify", "name_of", "topic_of"):
            yield f"{via} empties {what}", lambda w=what, v=via: emptying(world, w, v)


def emptying(world: World, what: str, via: str) -> ScanCall:
    """A call whose callback empties one of the lists or dicts scan is walking.

    Each row's stream id is made a str subclass, so scan asks `name_of` for it."""
    call = genuine_call(world)
    if via == "name_of":
        call.rows = [(row[0], StrSub(str(row[1])), *row[2:]) for row in call.rows]
    emptied = getattr(call, what)

    def after_emptying(result: Any) -> Any:
        emptied.clear()
        return result

    if via == "verify":
        call.verify = lambda *args: after_emptying(True)
    elif via == "name_of":
        call.name_of = lambda originator: after_emptying(plain_name(str(originator)))
    else:
        call.topic_of = lambda topic: after_emptying(topic.encode())
    return call


class FalseOnAsk:
    def __bool__(self) -> bool:
        raise ValueError("no truth here")


class ThrowsOnIndex:
    def __index__(self) -> int:
        raise ValueError("no index here")


CLEAN_ERRORS = (TypeError, ValueError, OverflowError, ZeroDivisionError, IndexError)


def test_scan_given_odd_arguments_raises_a_clean_error_or_stops(world: World) -> None:
    """Never a crash, a SystemError (an error set with a result), or a read past
    what it was given (the sanitized run checks that part); when it returns, it
    returns a row index inside the run and leaves the clock a [digits, time]."""
    for case, make in odd_calls(world):
        call = make()
        size = len(call.rows)
        try:
            done = call.run()
        except CLEAN_ERRORS:
            continue
        assert type(done) is int and call.index <= done <= max(call.index, size), case
        assert len(call.hashes) <= size and len(call.clock) == 2, case
        assert type(call.clock[0]) is bytes and type(call.clock[1]) is int, case


def test_scan_passes_the_genuine_run_it_is_given(world: World) -> None:
    """The baseline the odd calls above alter: every row passes, with the
    signatures checked by libsodium's own entry point, by a Python call, or not."""
    for verify in (None, sign_open_address(), verify_signature):
        call = genuine_call(world, verify=verify)
        assert call.run() == len(call.rows) == len(call.hashes)


def test_scan_refuses_a_start_before_the_rows() -> None:
    """It read the word before the list's items (a heap read out of bounds)."""
    assert native is not None
    for index in (-1, -(2**62)):
        with pytest.raises(ValueError, match="index"):
            ScanCall([(1, "s", 1, "t", b"")], index=index, end=1).run()


def test_scan_writes_a_streams_first_position_exactly_past_2_63(world: World) -> None:
    """first_leaf + index: a signed 64-bit overflow in C before (undefined
    behaviour; in practice a negative position); now Python's own integers."""
    for first_leaf in (2**63 - 1, 2**64, 2**62):
        call = genuine_call(world, first_leaf=first_leaf)
        assert call.run() == len(call.rows)
        rows = call.rows
        expected = {}
        for index, row in enumerate(rows):
            expected.setdefault(stream_of(row[1]), first_leaf + index)
        assert {stream: first[0] for stream, first in call.firsts.items()} == expected


# --- the plain-JSON walk ---------------------------------------------------------------


def nested(depth: int, leaf: object, kind: str) -> object:
    """`leaf` inside `depth` containers (objects, arrays, tuples, or in turn)."""
    value = leaf
    for level in range(depth):
        shape = kind if kind != "mixed" else ("object", "array", "tuple")[level % 3]
        value = {"k": value} if shape == "object" else [value] if shape == "array" else (value,)
    return value


def test_the_plain_json_walk_on_deep_and_odd_values_never_passes_what_python_refuses() -> None:
    assert native is not None
    leaves: list[object] = [None, 1, 2**53, -(2**53), 1.5, "é", "\ud800", b"x", StrSub("s"),
                            IntSub(1), {1: 2}, {StrSub("k"): 1}, True]  # fmt: skip
    for depth in (0, 1, 199, 200, 201, 1000, 5000):
        for kind in ("object", "array", "tuple", "mixed"):
            for leaf in leaves:
                value = nested(depth, leaf, kind)
                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(canonical, "native", None)
                    in_python = canonical.json_problem(value)
                in_c = native.plain_json(value)
                if in_c:
                    assert in_python is None, (depth, kind, leaf)
                if depth <= 200:  # (deeper, C leaves it to Python)
                    assert in_c == (in_python is None), (depth, kind, leaf)
