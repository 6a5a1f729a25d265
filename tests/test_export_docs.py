"""docs/export.md's worked example runs as written: its Python blocks, in
order, verify one real event's signature, its inclusion proof and the
checkpoint's signature, a C2SP signed note (each block asserts; a wrong
byte raises)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parent.parent / "docs" / "export.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_the_worked_example_verifies(capsys: pytest.CaptureFixture[str]) -> None:
    code = blocks()
    assert len(code) == 3
    namespace: dict[str, object] = {}
    for block in code:
        exec(compile(block, str(DOC), "exec"), namespace)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("1000000 minor units staked")
    assert out[1] == "log position 28 is in the tree of size 82"
    # The note verifier key `ledger keys list` printed for that key: checkpoint+b4969d31+...
    assert out[2] == "the checkpoint of size 82 is signed by checkpoint+b4969d31"


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
