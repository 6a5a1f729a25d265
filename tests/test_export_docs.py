"""docs/export.md's worked example runs as written: its Python blocks, in
order, verify one real event's signature, its inclusion proof and the
checkpoint's signature (each block asserts; a wrong byte raises)."""

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
    assert out[0].startswith("20000 minor units staked")
    assert out[1] == "log position 65 is in the tree of size 89"
    assert out[2].startswith("the checkpoint of size 89 is signed by")


def test_the_worked_example_fails_on_a_changed_byte() -> None:
    first = blocks()[0]
    # One letter of the envelope's base64 changed (in its header): the example refuses it.
    edited = first.replace('"TFNFMgFxeyJrZXlfaWQiOiJkYmFl', '"TFNFMgFxeyJrZXlfaWQiOiJkYmFm', 1)
    assert edited != first
    with pytest.raises(Exception):  # noqa: B017 - an assertion or InvalidSignature
        exec(compile(edited, str(DOC), "exec"), {})
