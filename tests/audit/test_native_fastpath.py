"""The verifier's C fast path (`ledger.crypto.native`) against the same checks
in Python: on every row an attacker could hand it, both give the same chunk
result — the same findings, worded the same, at the same positions, the same
stream links and the same Merkle ranges — at both levels, on both stores.

The C code only ever says "these rows passed"; a row it does not pass goes
back to the Python loop, which words the finding. So any difference here is
a row the C code passed and Python would not, or the reverse."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import replace
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.audit.log.checkpoints import load_checkpoints
from ledger.audit.log.chunk_walk import verify_batches, verify_rows
from ledger.audit.log.chunks import ChunkResult, ChunkSpec
from ledger.audit.log.key_times import checkpoint_times
from ledger.audit.verify import Level, plan_chunks
from ledger.crypto import canonical
from ledger.crypto.envelope import SignerCheck
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.merkle import AlignedLeaves, CompactRange
from ledger.crypto.native import native
from ledger.node import open_node
from ledger.store.application import LedgerApplication
from tests.conftest import PASSPHRASE, new_store
from tests.demo_table import Table

CHUNK = 16  # small chunks: many edges, streams crossing them, checkpoints inside them


def test_the_c_fast_path_is_built_where_ci_runs() -> None:
    """CI (and the README's set-up) builds it; elsewhere the Python path is complete."""
    if native is None and os.environ.get("CI") != "true":
        pytest.skip("no C fast path on this machine: verify runs its Python path")
    assert native is not None, "setup.py did not build ledger.crypto._native"


needs_native = pytest.mark.skipif(
    native is None and os.environ.get("CI") != "true", reason="no C fast path built here"
)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[tuple[ChunkSpec, list[Any]]], SignerCheck]]:
    """A log of interleaved streams under several checkpoints, cut into chunks."""
    workdir = tmp_path_factory.mktemp("native")
    with new_store(request.param, workdir) as store:
        yield from _world(store, workdir)


def _world(
    store: str, workdir: Path
) -> Iterator[tuple[list[tuple[ChunkSpec, list[Any]]], SignerCheck]]:
    keys = KeyDirectory(workdir / "keys")
    keys.create_node_keys(PASSPHRASE)
    # Checkpoints of 7 where the loop signs them, none of a background anchor's.
    node = open_node(
        store, str(keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=0
    )
    try:
        tables = [Table(name=f"T{n}", dealer="D1") for n in range(4)]
        for turn in range(8):
            for number, table in enumerate(tables):
                for throw in range(1 + (turn + number) % 3):
                    table.throw_dice([1 + (turn + number + throw) % 6, 2, 3])
                node.app.save(table)
            if turn % 2:
                node.checkpointer(batch_size=7).catch_up()
        node.checkpointer(batch_size=7).catch_up()
    finally:
        node.close()
    keyring = keys.keyring()
    app = LedgerApplication(store, keyring=keyring, create=False)
    try:
        checkpoints = load_checkpoints(app.tables, keyring, None)
        times = checkpoint_times(checkpoints)  # each chunk's covering checkpoints: time bounds
        sizes = [size for size, _ in times]
        _, specs = plan_chunks(app, sizes, Level.SIGNATURES, CHUNK, times)
        chunks = [(spec, app.tables.rows_between(spec.after_id, spec.last_id)) for spec in specs]
    finally:
        app.close()
    yield chunks, SignerCheck(keyring)


def both_ways(spec: ChunkSpec, rows: list[Any], check: SignerCheck) -> tuple[Any, Any]:
    return (
        outcome(verify_rows(spec, list(rows), check, use_native=True)),
        outcome(verify_rows(spec, list(rows), check, use_native=False)),
    )


def outcome(result: ChunkResult) -> tuple[Any, ...]:
    return (
        [(p.position, p.message, p.stream) for p in result.problems],
        result.firsts,
        result.lasts,
        result.leaves,
        result.at_size,
    )


@needs_native
def test_an_untouched_log_passes_the_same_both_ways(world: Any) -> None:
    chunks, check = world
    assert len(chunks) >= 4 and all(spec.covering for spec, _ in chunks)
    for spec, rows in chunks:
        for signatures in (False, True):
            spec = replace(spec, check_signatures=signatures)
            in_c, in_python = both_ways(spec, rows, check)
            assert in_c == in_python
            assert in_c[0] == []  # and nothing is wrong with it


def _flip(data: bytes, index: int, mask: int) -> bytes:
    index %= len(data)
    return data[:index] + bytes([data[index] ^ mask]) + data[index + 1 :]


MUTATIONS = [
    "flip",  # one byte of the envelope: header, signature or payload
    "flip-header-field",  # one byte inside the header's signed fields
    "truncate",
    "stream",  # the row's stream column
    "version",
    "topic",
    "state-type",
    "swap",  # two rows of the chunk exchanged
    "drop",  # a row missing
    "duplicate",  # a row replayed over the next one
    "re-sealed",  # the payload altered and its hash in the header fixed up
]


def mutate(rows: list[Any], data: st.DataObject) -> list[Any]:
    rows = [list(row) for row in rows]
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        at = data.draw(st.integers(0, len(rows) - 1), label="row")
        kind = data.draw(st.sampled_from(MUTATIONS), label="kind")
        row = rows[at]
        state = row[4] if isinstance(row[4], bytes) else b""
        if kind == "flip" and state:
            row[4] = _flip(
                state, data.draw(st.integers(0, len(state) - 1)), data.draw(st.integers(1, 255))
            )
        elif kind == "flip-header-field" and len(state) > 200:
            row[4] = _flip(
                state, data.draw(st.integers(6, 200)), data.draw(st.sampled_from([1, 2, 32, 64]))
            )
        elif kind == "truncate":
            row[4] = state[: data.draw(st.integers(0, max(0, len(state) - 1)))]
        elif kind == "stream":
            own = str(row[1]).replace("-", "")
            row[1] = data.draw(
                st.sampled_from(
                    [
                        None,
                        rows[(at + 1) % len(rows)][1],
                        "x" * 32,
                        'a"b',
                        own.upper(),  # the same UUID's hex in capitals: the same stream
                        own[:16] + own[16:].upper(),
                        "0x" + own[2:],  # 32 characters UUID() reads as int syntax
                        "é" * 32,
                    ]
                )
            )
        elif kind == "version":
            row[2] = data.draw(st.sampled_from([None, 0, -1, 1, 2, 1 << 60, "7", True, 2.0]))
        elif kind == "topic":
            row[3] = data.draw(
                st.sampled_from([None, rows[(at + 1) % len(rows)][3], "é", 'q"t', b"t"])
            )
        elif kind == "state-type":
            row[4] = data.draw(st.sampled_from([None, bytearray(state), state.decode("latin-1")]))
        elif kind == "swap" and len(rows) > 1:
            other = data.draw(st.integers(0, len(rows) - 1))
            rows[at], rows[other] = rows[other], rows[at]
        elif kind == "drop" and len(rows) > 1:
            del rows[at]
        elif kind == "duplicate" and at + 1 < len(rows):  # (a chunk never grows: planning
            rows[at + 1] = list(row)  # counts its rows, so a copy takes another's place)
        elif kind == "re-sealed" and len(state) > 300:
            size = int.from_bytes(state[4:6], "big")
            payload = _flip(state[6 + size + 64 :] or b"{}", 0, 1)
            digest = hashlib.sha256(payload).hexdigest().encode()
            header = state[6 : 6 + size]
            start = header.find(b'"payload_sha256":"') + 18
            header = header[:start] + digest + header[start + 64 :]
            row[4] = state[:6] + header + state[6 + size : 6 + size + 64] + payload
    return [tuple(row) for row in rows]


@needs_native
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_every_altered_row_is_judged_the_same_both_ways(world: Any, data: st.DataObject) -> None:
    chunks, check = world
    spec, rows = chunks[data.draw(st.integers(0, len(chunks) - 1), label="chunk")]
    spec = replace(spec, check_signatures=data.draw(st.booleans(), label="signatures"))
    altered = mutate(rows, data)
    in_c, in_python = both_ways(spec, altered, check)
    assert in_c == in_python


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_rows_checked_in_batches_give_the_result_of_the_whole_chunk(
    world: Any, data: st.DataObject
) -> None:
    """A chunk is read and checked a batch at a time: wherever the batches are
    cut (inside a run the C path takes, at a checkpoint inside the chunk, at a
    bad row the Python loop words), the result is that of all the rows at once."""
    chunks, check = world
    spec, rows = chunks[data.draw(st.integers(0, len(chunks) - 1), label="chunk")]
    spec = replace(spec, check_signatures=data.draw(st.booleans(), label="signatures"))
    if data.draw(st.booleans(), label="altered"):
        rows = mutate(rows, data)
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(rows) - 1))), label="cuts"))
    edges = [0, *(cut for cut in cuts if cut < len(rows)), len(rows)]
    batches = [list(rows[begin:end]) for begin, end in pairwise(edges)]
    for use_native in (True, False) if native is not None else (False,):
        whole = outcome(verify_rows(spec, list(rows), check, use_native=use_native))
        assert outcome(verify_batches(spec, batches, check, use_native=use_native)) == whole


@needs_native
@settings(max_examples=100, deadline=None)
@given(
    leaves=st.lists(st.binary(min_size=32, max_size=32), min_size=1, max_size=70),
    shift=st.integers(0, 3),
)
def test_the_merkle_levels_are_the_same_both_ways(leaves: list[bytes], shift: int) -> None:
    begin = (1 << (len(leaves) - 1).bit_length()) * shift
    in_c = AlignedLeaves(begin, leaves, use_native=True)
    in_python = AlignedLeaves(begin, leaves, use_native=False)
    reference = CompactRange(begin)
    for leaf in leaves:
        reference.append(leaf)
    assert in_c.compact_range() == in_python.compact_range() == reference
    for end in range(begin, begin + len(leaves) + 1):
        assert in_c.compact_range(end) == in_python.compact_range(end)


@needs_native
def test_node_level_refuses_what_is_not_a_hash() -> None:
    assert native is not None
    with pytest.raises(ValueError, match="not 32 bytes"):
        native.node_level([b"x" * 32, b"short"])
    with pytest.raises(TypeError):
        native.node_level((b"x" * 32,))


class Text(str):  # a str subclass: not plain JSON to either walk
    pass


JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**60), 2**60) | st.sampled_from([2**53 - 1, 2**53, -(2**53) + 1, -(2**53)]),
    st.text() | st.sampled_from(["\ud800", "caf\u00e9", "x\udfff"]),
    st.floats(allow_nan=False) | st.builds(Text, st.text(max_size=3)) | st.binary(max_size=3),
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=4), inner, max_size=4)
        | st.dictionaries(st.integers(0, 3), inner, min_size=1, max_size=2)
    ),
    max_leaves=25,
)


@needs_native
@settings(max_examples=400, deadline=None)
@given(value=JSON_VALUES)
def test_the_plain_json_walk_is_the_same_both_ways(value: object) -> None:
    assert native is not None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(canonical, "native", None)
        in_python = canonical.json_problem(value)
    assert native.plain_json(value) == (in_python is None)
    assert canonical.json_problem(value) == in_python  # the same words whichever walks


@needs_native
def test_a_plain_walk_too_deep_for_c_is_walked_in_python() -> None:
    assert native is not None
    deep: list[object] = []
    for _ in range(500):
        deep = [deep]
    assert native.plain_json(deep) is False  # (C stops at 200 levels)
    assert canonical.json_problem(deep) is None
    deep_float: list[object] = [1.5]
    for _ in range(500):
        deep_float = [deep_float]
    assert canonical.json_problem(deep_float) == "a float is not plain JSON"
