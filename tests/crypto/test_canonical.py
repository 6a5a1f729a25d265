"""Canonical bytes: the fast path is RFC 8785; domain prefixes are distinct."""

from __future__ import annotations

import json

import pytest
import rfc8785
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rfc8785 import CanonicalizationError

from ledger.crypto import canonical as canonical_module
from ledger.crypto.canonical import (
    ACTOR_FACT_DOMAIN,
    CHECKPOINT_DOMAIN,
    ENVELOPE_DOMAIN,
    canonical,
    canonical_flat,
    json_problem,
)

SAFE = 2**53 - 1  # RFC 8785 (I-JSON) integers: |n| <= 2**53 - 1

ascii_text = st.text(alphabet=st.characters(max_codepoint=0x7F))
any_text = st.text()  # every code point except lone surrogates
values = st.one_of(
    ascii_text,
    any_text,
    st.integers(min_value=-SAFE, max_value=SAFE),
)
flat_dicts = st.dictionaries(st.one_of(ascii_text, any_text), values, max_size=12)


@settings(max_examples=1000, deadline=None)
@given(flat_dicts)
@example({"a": "é"})
@example({"é": 1, "e": 2, "z": 3})
@example({"\U0001f3b2": "dice", "\uff61": "halfwidth"})  # UTF-16 vs code point order
@example({"ctl": "\x00\x08\t\n\x0c\r\x1f\x7f", "q": '"\\/'})
@example({"min": -SAFE, "max": SAFE, "zero": 0, "neg0": -0})
@example({})
def test_canonical_flat_is_rfc8785(fields: dict[str, str | int]) -> None:
    expected = bytes(rfc8785.dumps(fields))
    assert canonical(fields) == expected
    assert canonical_flat(fields) == expected


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(ascii_text, st.one_of(ascii_text, st.integers(-SAFE, SAFE))))
def test_canonical_flat_ascii_is_valid_json_of_the_same_dict(fields: dict[str, str | int]) -> None:
    data = canonical_flat(fields)
    assert data.isascii()
    assert json.loads(data) == fields


def test_non_ascii_text_is_utf8_not_escaped() -> None:
    # RFC 8785 writes non-ASCII characters as UTF-8, never as \\u escapes.
    assert canonical_flat({"dealer": "Zoë"}) == '{"dealer":"Zoë"}'.encode()
    assert canonical_flat({"dealer": "Zoë"}) == canonical({"dealer": "Zoë"})


def test_canonical_flat_sorts_keys_and_has_no_whitespace() -> None:
    fields = {"version": 2, "stream": "s", "key_id": "k", "prev": "00", "type": "t"}
    assert (
        canonical_flat(fields) == b'{"key_id":"k","prev":"00","stream":"s","type":"t","version":2}'
    )


DOMAINS = [ENVELOPE_DOMAIN, CHECKPOINT_DOMAIN, ACTOR_FACT_DOMAIN]


def test_domain_prefixes_are_distinct() -> None:
    assert len(set(DOMAINS)) == len(DOMAINS)
    # No prefix is a prefix of another: a message under one domain can never
    # parse as a message under another.
    for a in DOMAINS:
        for b in DOMAINS:
            if a is not b:
                assert not b.startswith(a)


@pytest.mark.parametrize("domain", DOMAINS)
def test_domain_prefix_ends_in_its_only_newline(domain: bytes) -> None:
    assert isinstance(domain, bytes)
    assert domain.endswith(b"\n")
    assert domain.count(b"\n") == 1
    assert domain.isascii()
    assert domain.startswith(b"casino-ledger/")
    assert domain.rstrip(b"\n").rsplit(b"/", 1)[1].startswith(b"v")


def test_every_domain_constant_in_the_module_is_covered() -> None:
    found = {
        value
        for name, value in vars(canonical_module).items()
        if name.endswith("_DOMAIN") and isinstance(value, bytes)
    }
    assert found == set(DOMAINS)


@given(
    key_id=st.text(alphabet="0123456789abcdef", min_size=64, max_size=64),
    stream=st.one_of(st.uuids().map(str), st.text(max_size=40)),
    event_type=st.text(max_size=60),
    version=st.integers(min_value=1, max_value=2**53 - 1),
    signed_at=st.one_of(st.none(), st.integers(min_value=0, max_value=2**53 - 1)),
)
def test_header_bytes_is_the_canonical_encoding(
    key_id: str, stream: str, event_type: str, version: int, signed_at: int | None
) -> None:
    from ledger.crypto.envelope import SIGNED_AT_OFFSET, header_bytes

    digest, prev = "ab" * 32, "cd" * 32
    fields: dict[str, str | int] = {
        "key_id": key_id,
        "payload_sha256": digest,
        "prev": prev,
        "stream": stream,
        "type": event_type,
        "version": version,
    }
    if signed_at is not None:  # v2; v1 headers (None) have no signing time
        fields["signed_at"] = signed_at
    header = header_bytes(key_id, digest, prev, signed_at, stream, event_type, version)
    assert header == canonical(fields)
    if signed_at is not None:  # the verifier's fast path reads it at a fixed offset
        assert header[SIGNED_AT_OFFSET:].startswith(b"%d," % signed_at)


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from(["\ud800"])),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(max_size=4) | st.integers(0, 3), children, max_size=4)
    ),
    max_leaves=20,
)


@given(_json_values)
def test_json_problem_agrees_with_the_canonical_encoder(value: object) -> None:
    """The cheap type walk plugins' results go through refuses exactly what
    RFC 8785 encoding refuses (floats aside: the walk refuses every float)."""
    try:
        canonical({"value": value})
        encodable = True
    except (CanonicalizationError, ValueError, TypeError):
        encodable = False
    assert (json_problem(value) is None) == encodable


def test_json_problem_refuses_floats() -> None:
    assert json_problem({"stake": 1.5}) == "a float is not plain JSON"
    assert json_problem({"ok": [1, "x", None, True, {"a": 2**53 - 1}]}) is None


json_trees = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**60), max_value=2**60),  # past ±2**53 too: refused alike
        ascii_text,
        any_text,
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.dictionaries(st.one_of(ascii_text, any_text), children, max_size=5),
    ),
    max_leaves=40,
)


# 200 trees of up to 40 leaves (600 cost the suite 8 s of CPU, nearly all of it
# Hypothesis drawing them); the known edge cases are the explicit examples.
@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.one_of(ascii_text, any_text), json_trees, max_size=6))
@example({"a": [{"b": {"c": [1, True, None, "x"]}}], "A": []})
@example({"nested": {"\U0001f3b2": 1, "\uff61": 2}})  # UTF-16 vs code point order, nested
@example({"ctl": ["\x00\x08\t\n\x0c\r\x1f\x7f", '"\\/'], "n": [-SAFE, SAFE, 0]})
@example({"big": [2**53]})
@example({"tuple": (1, 2), "float": 1.5})  # not the plain subset: rfc8785 encodes them
def test_canonical_of_nested_json_is_rfc8785(fields: dict[str, object]) -> None:
    try:
        expected = bytes(rfc8785.dumps(fields))
    except CanonicalizationError:
        with pytest.raises(CanonicalizationError):
            canonical(fields)
        return
    assert canonical(fields) == expected
