"""A property test: whatever an attacker does to one checkpoint row, `ledger
verify` exits 1 with one line naming a checkpoint, never a traceback; on both
stores. (Event rows: tests/audit/test_verify_fuzz.py.)"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.cli.main import main
from tests.attacker import Attacker
from tests.audit.test_verify_fuzz import Recorded, recorded
from tests.verdict import verdict

__all__ = ["recorded"]  # the fixture: one recorded ledger per backend for this module

# A character of the note replaced, the size column moved, the note emptied.
MUTATIONS = ["character", "size-column", "empty-note"]
PRINTABLE = [chr(c) for c in range(0x20, 0x7F)] + ["\n"]


def mutate(attacker: Attacker, data: st.DataObject) -> None:
    rows = attacker.sql("SELECT tree_size, note FROM ledger_checkpoints ORDER BY tree_size")
    assert len(rows) >= 2
    size, note = data.draw(st.sampled_from(rows), label="checkpoint")
    kind = data.draw(st.sampled_from(MUTATIONS), label="mutation")
    if kind == "character":
        index = data.draw(st.integers(0, len(note) - 1), label="index")
        new = data.draw(st.sampled_from(PRINTABLE).filter(lambda c: c != note[index]), label="c")
        value: object = note[:index] + new + note[index + 1 :]
        attacker.sql("UPDATE ledger_checkpoints SET note = ? WHERE tree_size = ?", (value, size))
    elif kind == "size-column":
        taken = {r[0] for r in rows}
        moved = data.draw(
            st.integers(1, 10 * max(taken)).filter(lambda s: s not in taken), label="size"
        )
        attacker.sql(
            "UPDATE ledger_checkpoints SET tree_size = ? WHERE tree_size = ?", (moved, size)
        )
    else:
        attacker.sql("UPDATE ledger_checkpoints SET note = ? WHERE tree_size = ?", ("", size))


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_any_checkpoint_row_mutation_is_one_line_naming_a_checkpoint(
    backend: str,
    data: st.DataObject,
    recorded: Recorded,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with recorded.copy(backend, tmp_path_factory.mktemp("fuzz-checkpoints")) as (store, _):
        attacker = Attacker(store)
        try:
            mutate(attacker, data)
        finally:
            attacker.close()
        capsys.readouterr()
        keys = recorded.keys.path
        code = main(["--store", store, "--keys", str(keys), "verify", "--workers", "1"])
        out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code == 1, out + err
    lines = verdict(code, out, err).strip().splitlines()
    assert len(lines) == 1, out + err
    assert "checkpoint" in lines[0], lines[0]
