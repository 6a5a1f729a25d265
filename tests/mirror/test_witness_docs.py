"""docs/witnesses.md's examples run, in order, in one empty directory (as
tests/house/test_readme.py runs the README's): a simulated casino, a witness served
over HTTP, a cosigned checkpoint, the auditor's policy check, and the
cosignature checked by hand."""

from __future__ import annotations

from pathlib import Path

from tests.doc_pages import blocks, run_block, user_env
from tests.ports import free_port

PAGE = Path(__file__).resolve().parents[2] / "docs" / "witnesses.md"


def test_the_witness_page_runs(tmp_path: Path) -> None:
    env = user_env("docs passphrase")
    port = str(free_port())
    outputs = []
    for lang, body in blocks(PAGE):
        out = run_block(lang, body.replace("8100", port), tmp_path, env)
        if out is not None:
            outputs.append(out)
    assert len(outputs) == 4
    assert outputs[1].strip().splitlines()[-1] == "2"  # the log's line and the witness's
    assert "1 of 1 witnesses cosigned it (quorum 1): valid: witness.example/w1+" in outputs[2]
    assert outputs[2].strip().endswith("no refused submission")
    assert outputs[3].startswith("cosigned by witness.example/w1 at ")
