"""docs/mirror.md's examples run, one after the other in one empty directory
(as tests/house/test_readme.py runs the reference pages'), and every test its
table of attacks names exists."""

from __future__ import annotations

import re
from pathlib import Path

from tests.doc_pages import blocks, run_block, user_env
from tests.ports import free_port

PAGE = Path(__file__).resolve().parents[2] / "docs" / "mirror.md"


def test_every_runnable_block_of_the_mirror_page_runs(tmp_path: Path) -> None:
    env = user_env("mirror passphrase")
    ports = {"8790": str(free_port()), "8791": str(free_port())}  # beside other tests' servers
    outputs = []
    for lang, body in blocks(PAGE):
        assert lang in ("sh", ""), lang
        for documented, used in ports.items():
            body = body.replace(documented, used)
        out = run_block(lang, body, tmp_path, env)
        if out is not None:
            outputs.append(out)
    assert len(outputs) == 2
    first, later = re.findall(r"^mirror: \+(\d+) events, holding (\d+)", outputs[0], re.M)
    assert int(first[0]) == int(first[1]) > 0 and int(later[1]) == int(first[1]) + int(later[0])
    assert outputs[1].startswith("OK:") and "OK (bundle, the whole log)" in outputs[1]
    assert f"{later[1]} events under the copy's newest checkpoint" in outputs[1]


def test_every_attack_the_page_lists_is_a_test() -> None:
    named = re.findall(r"`(test_\w+)`", PAGE.read_text())
    source = (PAGE.parent.parent / "tests" / "mirror" / "test_mirror.py").read_text()
    assert len(named) >= 9
    for name in named:
        assert f"def {name}(" in source, name
