"""`stream_of` gives the stream id the envelope signs: its fast path for 32 hex
digits must say exactly what `str(UUID(hex=...))` says, and every other text
be read as before (UUID() takes some 32-character texts that are not 32 hex
digits: "0x", "_", signs and spaces are int syntax)."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from ledger.store.merkle_log import stream_of


def _reference(originator_id: object) -> str:
    """stream_of as it was written before its fast path."""
    if isinstance(originator_id, uuid.UUID):
        return str(originator_id)
    text = str(originator_id)
    if len(text) == 32:
        try:
            return str(uuid.UUID(hex=text))
        except ValueError:
            pass
    return text


_ALPHABET = "0123456789abcdefABCDEFxX_+- {}:urnid\u0660"


@given(st.text(alphabet=_ALPHABET, min_size=28, max_size=36))
def test_stream_of_reads_every_text_as_uuid_does(text: str) -> None:
    assert stream_of(text) == _reference(text)


@given(st.uuids())
def test_stream_of_hyphenates_hex_ids_and_keeps_uuids(value: uuid.UUID) -> None:
    assert stream_of(value.hex) == stream_of(value.hex.upper()) == str(value)
    assert stream_of(value) == str(value)


def test_texts_uuid_takes_that_are_not_hex_digits() -> None:
    for text in ["0x" + "1" * 30, "1" * 15 + "_" + "1" * 16, " " + "a" * 31, "+" + "b" * 31]:
        assert stream_of(text) == _reference(text)
    assert stream_of("0x" + "1" * 30) == str(uuid.UUID(int=int("1" * 30, 16)))
    assert stream_of("not-a-uuid") == "not-a-uuid"
