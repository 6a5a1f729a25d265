"""An attacker with database rights (or the auditor's kept file) against the C2SP
form of checkpoint notes: every edit is refused with a clear message, on both
stores, and never makes `verify` crash."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ledger.crypto.checkpoint import Checkpoint
from ledger.node import Node
from tests.attacker import Attacker
from tests.audit.test_checkpoint_attacks import attack, by_size, checkpointed, run

NoteEdit = Callable[[str], str]
_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def _lines(note: str) -> list[str]:
    return note.split("\n")


def _with_line(note: str, index: int, value: str) -> str:
    lines = _lines(note)
    lines[index] = value
    return "\n".join(lines)


def _signature_field(note: str) -> str:
    return note.rstrip("\n").rsplit(" ", 1)[1]


def _with_signature_field(note: str, field: str) -> str:
    head = note.rstrip("\n").rsplit(" ", 1)[0]
    return f"{head} {field}\n"


def _stray_bits(encoded: str) -> str:
    """The same bytes in a non-canonical spelling: a padding bit set in the last character."""
    data = encoded.rstrip("=")
    last = _ALPHABET[_ALPHABET.index(data[-1]) ^ 1]
    spelled = data[:-1] + last + encoded[len(data) :]
    assert base64.b64decode(spelled) == base64.b64decode(encoded)
    return spelled


def unknown_key(note: str) -> str:
    return note.replace("\u2014 checkpoint ", "\u2014 checkpoint-stranger ")


def key_hash_mismatch(note: str) -> str:
    field = _signature_field(note)
    raw = bytearray(base64.b64decode(field))
    raw[0] ^= 0xFF  # the first key-hash byte
    return _with_signature_field(note, base64.b64encode(raw).decode())


def second_signature_line(note: str) -> str:
    return note + note.rsplit("\n\n", 1)[1]


def trailing_junk(note: str) -> str:
    return note + "junk\n"


def missing_final_newline(note: str) -> str:
    return note[:-1]


def non_canonical_root(note: str) -> str:
    return _with_line(note, 2, _stray_bits(_lines(note)[2]))


def non_canonical_signature(note: str) -> str:
    return _with_signature_field(note, _stray_bits(_signature_field(note)))


def unpadded_root(note: str) -> str:
    return _with_line(note, 2, _lines(note)[2].rstrip("="))


def size_with_leading_zero(note: str) -> str:
    return _with_line(note, 1, "0" + _lines(note)[1])


def size_with_plus(note: str) -> str:
    return _with_line(note, 1, "+" + _lines(note)[1])


def size_in_other_digits(note: str) -> str:
    # int() reads Arabic-Indic digits: the note must not.
    arabic = "".join(chr(0x0660 + int(d)) for d in _lines(note)[1])
    return _with_line(note, 1, arabic)


def size_with_underscore(note: str) -> str:
    size = _lines(note)[1]
    return _with_line(note, 1, f"{size[0]}_{size[1:]}" if len(size) > 1 else f"{size}_0")


def time_edited(note: str) -> str:
    """The time extension line is part of the signed text."""
    time_line = _lines(note)[3]
    return _with_line(note, 3, time_line.replace(time_line[5:9], str(int(time_line[5:9]) + 1)))


def extra_extension_line(note: str) -> str:
    return note.replace("\n\n", "\nwitness x\n\n", 1)


def double_space(note: str) -> str:
    return note.replace("\u2014 ", "\u2014  ", 1)


def downgraded_keeping_accounts(note: str) -> str:
    """The key hash stripped and the key id named, as the old form has it."""
    raw = base64.b64decode(_signature_field(note))
    return note.replace("\u2014 checkpoint ", "\u2014 {key_id} ").replace(
        _signature_field(note), base64.b64encode(raw[4:]).decode()
    )


def downgraded_to_old_form(note: str) -> str:
    """As above, and the accounts line dropped (the old form had four lines): the
    old form's signature is over a prefixed text, so the C2SP signature does
    not verify there."""
    return re.sub(r"\naccounts [^\n]*\n", "\n", downgraded_keeping_accounts(note), count=1)


MALFORMED: dict[str, tuple[NoteEdit, str]] = {
    "second signature line": (
        second_signature_line,
        "signature line 2 repeats an earlier one",
    ),
    "trailing junk": (trailing_junk, "signature line 2 is not"),
    "missing final newline": (missing_final_newline, "does not end in a newline"),
    "non-canonical root": (non_canonical_root, "the root hash is not canonical base64"),
    "unpadded root": (unpadded_root, "the root hash is not valid base64"),
    "non-canonical signature": (non_canonical_signature, "signature line 1 is not canonical"),
    "size with a leading zero": (size_with_leading_zero, "without sign or leading zeros"),
    "size with '+'": (size_with_plus, "without sign or leading zeros"),
    "size in Arabic-Indic digits": (size_in_other_digits, "without sign or leading zeros"),
    "size with '_'": (size_with_underscore, "without sign or leading zeros"),
    "an extra extension line": (extra_extension_line, "the text has 6 lines, not 4 or 5"),
    "downgraded, the accounts line kept": (
        downgraded_keeping_accounts,
        "an old-form checkpoint carries exactly one signature line and 4 lines",
    ),
    "two spaces after the dash": (double_space, "signature line 1 is not"),
}

REFUSED: dict[str, tuple[NoteEdit, str]] = {
    "unknown key": (unknown_key, "signed by unknown key checkpoint-stranger+"),
    "key hash mismatch": (
        key_hash_mismatch,
        "(the keyring's key 'checkpoint' has key hash",
    ),
    "time edited": (time_edited, "bad signature"),
    "downgraded to the old form": (downgraded_to_old_form, "bad signature"),
}


def _edited(node: Node, edit: NoteEdit, note: str) -> str:
    (key,) = [r for r in node.keyring if r.name == "checkpoint"]
    return edit(note).replace("{key_id}", key.key_id)


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_row_is_named(
    node: Node, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    checkpointed(node)
    edit, message = MALFORMED[name]

    def rewrite(a: Attacker) -> None:
        note = _edited(node, edit, a.checkpoint_note(8))
        a.sql("UPDATE ledger_checkpoints SET note = ? WHERE tree_size = 8", (note,))

    attack(node, rewrite)
    code, output = run(node, capsys, "verify", "--level", "integrity")
    assert code == 1, output
    assert "checkpoint row 8: malformed checkpoint: " in output
    assert message in output
    assert len(output.strip().splitlines()) == 1


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_forged_row_is_refused(node: Node, capsys: pytest.CaptureFixture[str], name: str) -> None:
    checkpointed(node)
    edit, message = REFUSED[name]

    def rewrite(a: Attacker) -> None:
        note = _edited(node, edit, a.checkpoint_note(8))
        Checkpoint.from_note(note)  # well formed: only its signature can betray it
        a.sql("UPDATE ledger_checkpoints SET note = ? WHERE tree_size = 8", (note,))

    attack(node, rewrite)
    code, output = run(node, capsys, "verify", "--level", "integrity")
    assert code == 1, output
    assert "checkpoint of size 8: " in output
    assert message in output
    assert len(output.strip().splitlines()) == 1


@pytest.mark.parametrize("name", list(MALFORMED))
def test_a_malformed_kept_checkpoint_is_bad_input(
    node: Node, capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    checkpointed(node)
    edit, message = MALFORMED[name]
    kept = tmp_path / "kept.txt"
    kept.write_text(_edited(node, edit, by_size(node, 16).to_note()))
    code, output = run(node, capsys, "verify", "--trusted", str(kept))
    assert code == 2, output
    assert f"{kept} is not a checkpoint note: malformed checkpoint: " in output
    assert message in output
    assert len(output.strip().splitlines()) == 1


@pytest.mark.parametrize("name", list(REFUSED))
def test_a_forged_kept_checkpoint_is_refused(
    node: Node, capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    checkpointed(node)
    edit, message = REFUSED[name]
    kept = tmp_path / "kept.txt"
    kept.write_text(_edited(node, edit, by_size(node, 16).to_note()))
    code, output = run(node, capsys, "verify", "--trusted", str(kept))
    assert code == 1, output
    assert "checkpoint of size 16: " in output and message in output
    assert len(output.strip().splitlines()) == 1


def test_the_genuine_note_passes_where_the_edits_fail(
    node: Node, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The attacks above fail for their edit, not for the setup."""
    checkpointed(node)
    kept = tmp_path / "kept.txt"
    kept.write_text(by_size(node, 16).to_note())
    code, output = run(node, capsys, "verify", "--level", "integrity", "--trusted", str(kept))
    assert code == 0, output
    assert "consistent with the kept checkpoint of size 16" in output
