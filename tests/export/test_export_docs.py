"""docs/export.md's worked example runs as written: its Python blocks, in
order, verify one real event's signature, its inclusion proof and the
checkpoint's signature, a C2SP signed note (each block asserts; a wrong
byte raises); its known answers recompute dice, a deck and a device's
signature over a fact."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "export.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_worked_example_verifies(capsys: pytest.CaptureFixture[str]) -> None:
    code = blocks()
    assert len(code) == 4
    namespace: dict[str, object] = {}
    for block in code[:3]:
        exec(compile(block, str(DOC), "exec"), namespace)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("1000000 minor units staked")
    assert out[1] == "log position 28 is in the tree of size 82"
    # The note verifier key `ledger keys list` printed for that key: checkpoint+b4969d31+...
    assert out[2] == "the checkpoint of size 82 is signed by checkpoint+b4969d31"


def test_the_known_answers_recompute(capsys: pytest.CaptureFixture[str]) -> None:
    """The Known answers' block: dice and a deck recomputed from their seeds,
    and a dealer device's signature over its fact, with the standard library."""
    exec(compile(blocks()[3], str(DOC), "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "top card 49 rank 13 suit 1"
    assert out[1].startswith('the device signed {"action":"act","actor":"seat:2"')


def test_the_known_answers_refuse_a_changed_card() -> None:
    from cryptography.exceptions import InvalidSignature

    edited = blocks()[3].replace('"drawn": [33]', '"drawn": [34]', 1)
    assert edited != blocks()[3]
    with pytest.raises(InvalidSignature):
        exec(compile(edited, str(DOC), "exec"), {})


def test_the_worked_example_fails_on_a_changed_byte() -> None:
    first = blocks()[0]
    # One letter of the envelope's base64 changed (in its header): the example refuses it.
    edited = first.replace('"TFNFMgFxeyJrZXlfaWQiOiIyNTM2', '"TFNFMgFxeyJrZXlfaWQiOiIyNTM3', 1)
    assert edited != first
    with pytest.raises(Exception):  # noqa: B017 - an assertion or InvalidSignature
        exec(compile(edited, str(DOC), "exec"), {})


def test_the_worked_example_refuses_an_edited_checkpoint_time() -> None:
    from cryptography.exceptions import InvalidSignature

    code = blocks()
    edited = code[2].replace("20:42:36.547213", "20:42:37.547213", 1)
    assert edited != code[2]
    namespace: dict[str, object] = {}
    for block in code[:2]:
        exec(compile(block, str(DOC), "exec"), namespace)
    with pytest.raises(InvalidSignature):
        exec(compile(edited, str(DOC), "exec"), namespace)
