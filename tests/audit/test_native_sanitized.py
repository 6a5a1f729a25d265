"""The verifier's C fast path held to memory safety: `ledger/crypto/_native.c`
built with AddressSanitizer and UndefinedBehaviorSanitizer, and the
differential tests and the hostile-row corpus (tests/audit/test_native_fastpath.py,
tests/audit/test_native_fuzz.py) run against that build with no report.

The build goes to a temporary directory (never the source tree) and is run in
a fresh interpreter: the ASan runtime preloaded (it must come before every
other library), Python's own allocator off (PYTHONMALLOC=malloc: every object,
a row's bytes included, is then a malloc block with poisoned edges, so a read
one byte past a row is caught), leaks not reported (the interpreter keeps
memory for its life on purpose), and the first report fatal. The plugin
`tests.native_build_plugin` makes that build the one `ledger.crypto.native`
loads. A second test shows the harness can fail: copies of the source with a
bug put in on purpose (a length check dropped, a digit bound loosened, the
header's end unchecked) are caught by the same corpus.

docs/verify-performance.md ("Held to memory safety") says how to run it by
hand; the last test holds those steps to this file's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "ledger" / "crypto" / "_native.c"
DIFFERENTIAL = ["tests/audit/test_native_fastpath.py", "tests/audit/test_native_fuzz.py"]
SANITIZE = [
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
    "-O1",
    "-g",
]
# The interpreter's settings: the ASan runtime preloaded besides (its path is gcc's).
SANITIZER_ENV = {
    "PYTHONMALLOC": "malloc",
    "ASAN_OPTIONS": "detect_leaks=0",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}
PYTEST = ["-m", "pytest", "-p", "tests.native_build_plugin", "-n", "0", "--capture=sys"]
REPORTS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")
DOC = ROOT / "docs" / "verify-performance.md"


def toolchain() -> tuple[str, str]:
    """gcc and its ASan runtime (Debian's gcc brings libasan and libubsan along);
    where they are missing the test skips, except under CI, where it fails."""
    compiler = shutil.which("gcc")
    runtime = ""
    if compiler:
        asked = [compiler, "-print-file-name=libasan.so"]
        runtime = subprocess.run(asked, capture_output=True, text=True, check=False).stdout.strip()
    if not compiler or not Path(runtime).is_absolute() or not Path(runtime).exists():
        if os.environ.get("CI") != "true":
            pytest.skip("no gcc with AddressSanitizer here (tools/bootstrap.py installs it)")
        pytest.fail("gcc or its AddressSanitizer runtime is missing")
    return compiler, runtime


def build(compiler: str, source: Path, directory: Path) -> Path:
    """`source` compiled with the sanitizers into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    built = directory / f"_native{sysconfig.get_config_var('EXT_SUFFIX')}"
    include = sysconfig.get_paths()["include"]
    warnings = ["-Wall", "-Wextra", "-Wno-unused-parameter"]
    command = [compiler, "-shared", "-fPIC", *SANITIZE, *warnings, f"-I{include}"]
    compiled = subprocess.run(
        [*command, str(source), "-lcrypto", "-o", str(built)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert compiled.returncode == 0, compiled.stderr
    return built


def sanitized_run(runtime: str, built: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """pytest `arguments` in a fresh interpreter whose C fast path is `built`.

    `--capture=sys`: a report is written to file descriptor 2 as the process
    stops, which pytest's default capture would hold in a file nobody reads."""
    environment = {
        **os.environ,
        **SANITIZER_ENV,
        "LEDGER_TEST_NATIVE": str(built),
        "LD_PRELOAD": runtime,
    }
    return subprocess.run(
        [sys.executable, *PYTEST, "-p", "no:cacheprovider", *arguments],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,  # a hang, not a measure: the run takes well under a minute
    )


def reports(run: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in run.stderr.splitlines() if any(r in line for r in REPORTS)]


def test_the_differential_tests_and_the_corpus_run_clean_under_the_sanitizers(
    tmp_path: Path,
) -> None:
    compiler, runtime = toolchain()
    built = build(compiler, SOURCE, tmp_path / "sanitized")
    run = sanitized_run(runtime, built, "-rfEs", *DIFFERENTIAL)
    output = run.stdout + run.stderr
    assert reports(run) == [], output[-6000:]
    assert run.returncode == 0, output[-6000:]
    assert f"native fast path under test: {built}" in run.stdout
    summary = run.stdout.strip().splitlines()[-1]
    assert re.search(r"\b\d\d+ passed\b", summary), summary
    assert not re.search(r"skipped|deselected|xfail|error|failed", summary), summary


# Bugs put in on purpose, each where the corpus reaches it: (what is replaced,
# by what, the tests that reach it, what the run must then say).
INJECTED = {
    "a length check dropped (reads past a truncated row)": (
        "if (size < PREFIX_SIZE || memcmp(data, MAGIC, 4) != 0)",
        "if (memcmp(data, MAGIC, 4) != 0)",
        "cut_at_every_length and sqlite",
        r"ERROR: AddressSanitizer: heap-buffer-overflow[^=]*? in scan \S*_native\.c:\d+",
    ),
    "a digit bound loosened (a signed overflow on 19 digits)": (
        "if (size < 1 || size > 16 ||",
        "if (size < 1 || size > 19 ||",
        "signed_with_the_node_key and sqlite",
        r"_native\.c:\d+:\d+: runtime error: signed integer overflow",
    ),
    "the header's end unchecked (C passes a row Python refuses)": (
        'expect(&cursor, "}", 1) &&\n                  cursor.at == cursor.end))',
        'expect(&cursor, "}", 1)))',
        "signed_with_the_node_key and sqlite",
        r"AssertionError: trailing space \(chunk \d+ row \d+, signatures False\)",
    ),
}


@pytest.mark.parametrize("bug", INJECTED)
def test_a_bug_put_in_a_copy_of_the_source_is_caught(tmp_path: Path, bug: str) -> None:
    """The harness can fail: the same corpus, against a copy of the C code with
    one bug in it, stops with the sanitizer's report naming the line in
    _native.c, or (a check dropped, no memory error) with the differential's."""
    original, injected, selection, expected = INJECTED[bug]
    source = SOURCE.read_text()
    assert source.count(original) == 1, f"the code the bug goes into moved: {original}"
    copy = tmp_path / "_native.c"
    copy.write_text(source.replace(original, injected))
    compiler, runtime = toolchain()
    built = build(compiler, copy, tmp_path / "sanitized")
    run = sanitized_run(runtime, built, "-q", "-k", selection, "tests/audit/test_native_fuzz.py")
    assert run.returncode != 0
    assert re.search(expected, run.stdout + run.stderr), (run.stdout + run.stderr)[-4000:]


def test_the_steps_by_hand_in_the_docs_are_this_files() -> None:
    """docs/verify-performance.md's commands build and run as the test does."""
    section = DOC.read_text().split("### Held to memory safety", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"^```\n(.*?)^```$", section, re.MULTILINE | re.DOTALL)
    assert block is not None
    words = " ".join(block.group(1).replace("\\\n", " ").split())
    assert " ".join(SANITIZE) in words
    assert "-print-file-name=libasan.so" in words and "LD_PRELOAD=" in words
    assert all(f"{name}={value}" in words for name, value in SANITIZER_ENV.items())
    assert " ".join(PYTEST) in words and words.endswith(" ".join(DIFFERENTIAL))
    assert 'sysconfig.get_paths()["include"]' in words and "-lcrypto" in words
