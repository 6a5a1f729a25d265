"""`tools/suite_costs.py`, which lists the suite's slowest tests with their CPU
(docs/operations.md's table): the plugin counts a test's own CPU and its
reaped children's apart, and the report lists the tests slowest first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.house.tool_modules import ROOT, tool

suite_costs = tool("suite_costs")

TESTS = """
import subprocess, sys, time

def busy(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass

def test_computes():
    busy(0.3)

def test_starts_a_process():
    subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.3\\n"
                    "while time.process_time() < end: pass"], check=True)

def test_waits():
    time.sleep(0.6)
"""


def test_each_test_s_cpu_is_counted_where_it_was_spent(tmp_path: Path) -> None:
    (tmp_path / "test_three.py").write_text(TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the project's settings
    rows_directory = tmp_path / "rows"
    rows_directory.mkdir()
    env = dict(os.environ, **{suite_costs.ROWS_ENV: str(rows_directory)})
    env["PYTHONPATH"] = str(ROOT / "tools")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "suite_costs", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {row["test"].split("::")[1]: row for row in suite_costs.read_rows(rows_directory)}
    assert set(rows) == {"test_computes", "test_starts_a_process", "test_waits"}
    computes, starts, waits = (rows[name] for name in sorted(rows))
    assert computes["cpu_own"] >= 0.25 and computes["cpu_children"] < 0.1
    assert starts["cpu_children"] >= 0.25  # the process it started and reaped
    assert waits["wall"] >= 0.55 and waits["cpu_own"] + waits["cpu_children"] < 0.2
    listed = suite_costs.report(list(rows.values()), top=2)
    lines = listed.splitlines()
    header = next(n for n, line in enumerate(lines) if line.startswith("The slowest 2 tests"))
    slowest = lines[header + 1 : header + 3]
    assert "test_waits" in slowest[0] and "test_waits" not in slowest[1]
    assert "3 tests" in listed and "test_three.py" in listed
