"""The README's examples run (issue 8, item 6): every ```sh and ```python block,
in document order, in one empty directory, with LEDGER_PASSPHRASE set and the
virtualenv's `ledger` on the PATH. Blocks fenced without a language are
synopses and sample output; the two set-up commands at the top are checked
against the jobs tools/bootstrap.py knows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest import PG_URL, drop_pg_schema, require_postgres

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
RUN = {"sh": "sh", "bash": "sh", "console": "sh", "python": "python"}
README_PG = "postgresql://postgres@127.0.0.1:5432/test"


def blocks() -> list[tuple[str, str]]:
    return [(lang, body) for lang, body in FENCE.findall(README.read_text())]


def test_every_runnable_block_runs(tmp_path: Path) -> None:
    require_postgres()
    schema = f"readme_{uuid.uuid4().hex[:12]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEDGER_")}
    env |= {
        "LEDGER_PASSPHRASE": "readme passphrase",
        "LEDGER_PROGRESS_INTERVAL": "off",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
    }
    ran = {"sh": 0, "python": 0}
    try:
        for lang, body in blocks():
            kind = RUN.get(lang)
            if kind is None:
                continue
            # The PostgreSQL example runs in a schema of its own (and on the
            # tests' server when LEDGER_TEST_PG_URL points elsewhere).
            body = body.replace("schema=readme_floor1", f"schema={schema}")
            body = body.replace(README_PG, PG_URL)
            if kind == "sh":
                command = ["bash", "-euo", "pipefail", "-c", body]
            else:
                command = [sys.executable, "-c", body]
            result = subprocess.run(
                command,
                cwd=tmp_path,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert result.returncode == 0, f"README block failed:\n{body}\n{result.stderr}"
            assert "Traceback" not in result.stderr, result.stderr
            ran[kind] += 1
    finally:
        drop_pg_schema(schema)
    assert ran["sh"] >= 5 and ran["python"] >= 2, ran


def test_the_setup_commands_name_real_jobs() -> None:
    lang, first = blocks()[0]
    assert lang == ""
    jobs = re.findall(r"^python3 tools/bootstrap.py (\w+)", first, re.MULTILINE)
    assert jobs == ["simulate", "test"]
    source = (ROOT / "tools" / "bootstrap.py").read_text()
    for job in jobs:
        assert f'job == "{job}"' in source


@pytest.mark.parametrize("name", ["docs/rules.md", "docs/design.md"])
def test_linked_docs_exist(name: str) -> None:
    assert f"]({name})" in README.read_text()
    assert (ROOT / name).is_file()


def test_no_links_outside_the_repository() -> None:
    text = README.read_text()
    assert "../shared" not in text and "](RULES.md)" not in text
    assert "issue #4" not in text
