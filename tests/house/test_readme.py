"""The README's examples run (issue 8, item 6), and the reference pages' it
points to (issue 19, item 5): every ```sh and ```python block, the README's
first, then each page's in `PAGES` order, in one empty directory, with LEDGER_PASSPHRASE set and the
virtualenv's `ledger` on the PATH. Blocks fenced without a language are
synopses and sample output; the two set-up commands at the top are checked
against the jobs tools/bootstrap.py knows, and the exit codes, the Layout
block and the command synopses against the code."""

from __future__ import annotations

import argparse
import ast
import io
import os
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.cli.main import build_parser, main
from ledger.errors import (
    CannotReDeriveError,
    InvalidCommandError,
    LedgerError,
    VerificationError,
)
from tests.cli.test_cli_pipes import flip_first_event
from tests.conftest import PG_URL, drop_pg_schema, require_postgres
from tests.doc_pages import FENCE, RUN, run_block, user_env

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
CLI_DOC = DOCS / "cli.md"  # settings, commands, exit codes
LAYOUT_DOC = DOCS / "layout.md"
# The pages the README's reference moved to, in the README's old order: their
# examples go on from the state the earlier ones left.
PAGES = [
    README,
    *(
        DOCS / name
        for name in (
            "cli.md",
            "python-api.md",
            "http.md",
            "games.md",
            "auditing.md",
            "security.md",
            "operations.md",
            "performance.md",
            "layout.md",
        )
    ),
]
FRONT_PAGE_BYTES = 12 * 1024
README_PG = "postgresql://postgres@127.0.0.1:5432/test"


def blocks() -> list[tuple[str, str]]:
    return [(lang, body) for page in PAGES for lang, body in FENCE.findall(page.read_text())]


def test_every_runnable_block_runs(tmp_path: Path) -> None:
    require_postgres()
    schema = f"readme_{uuid.uuid4().hex[:12]}"
    env = user_env("readme passphrase")
    ran = {"sh": 0, "python": 0}
    try:
        for lang, body in blocks():
            # The PostgreSQL example runs in a schema of its own (and on the
            # tests' server when LEDGER_TEST_PG_URL points elsewhere).
            body = body.replace("schema=readme_floor1", f"schema={schema}")
            body = body.replace(README_PG, PG_URL)
            if run_block(lang, body, tmp_path, env) is not None:
                ran[RUN[lang]] += 1
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


def test_no_page_names_an_issue_by_number() -> None:
    """Links outside the repository are tests/house/test_self_contained.py's."""
    for page in PAGES:
        assert "issue #4" not in page.read_text(), page


def test_the_readme_is_a_front_page_whose_links_lead_somewhere() -> None:
    """At most 12 KB (what it is, the two commands, a first session, where to
    read on), and every page it or a reference page links to is there."""
    assert len(README.read_bytes()) <= FRONT_PAGE_BYTES
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#:]+\.md)(?:#[^)]*)?\)", page.read_text()):
            assert (page.parent / target).is_file(), f"{page.name} links to missing {target}"
    listed = set(re.findall(r"\]\(docs/([^)#]+\.md)\)", README.read_text()))
    assert {p.name for p in PAGES[1:]} <= listed


# The exit codes (issue 8, item 4; issue 9 gave "cannot re-derive" its own code).


def documented_exit_codes() -> dict[int, str]:
    """docs/cli.md's "Exit codes:" list: code -> what it means."""
    text = " ".join(CLI_DOC.read_text().split())
    found = re.search(r"Exit codes: (.*?)\. Errors are one line", text)
    assert found, "no 'Exit codes:' paragraph in docs/cli.md"
    listed = [re.fullmatch(r"(\d+) (.+)", item) for item in found.group(1).split("; ")]
    assert all(listed), found.group(1)
    return {int(item.group(1)): item.group(2) for item in listed if item}


def code_for(meaning: str) -> int:
    """The one documented code whose meaning starts with `meaning`."""
    (code,) = [c for c, text in documented_exit_codes().items() if text.startswith(meaning)]
    return code


def cli_exit_codes() -> set[int]:
    """Every code the CLI can return: success, each `LedgerError`'s own code, and
    the literal codes ledger/cli/main.py returns (usage errors, a lost store,
    an interrupt)."""
    import ledger.cli.main
    import ledger.projections.base  # ProjectionError, a LedgerError outside ledger.errors

    classes, seen = [LedgerError], set()
    while classes:
        cls = classes.pop()
        seen.add(cls.exit_code)
        classes.extend(cls.__subclasses__())
    tree = ast.parse(Path(ledger.cli.main.__file__).read_text())
    constants = {  # the module's named codes (INTERRUPTED = 130)
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    for node in ast.walk(tree):
        value = (
            node.value
            if isinstance(node, ast.Return)
            else node.args[0]
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "exit"
            and node.args
            else None
        )
        if isinstance(value, ast.Name) and value.id in constants:
            value = constants[value.id]
        if isinstance(value, ast.Constant) and isinstance(value.value, int):
            seen.add(value.value)
    return {0} | seen


def test_the_readme_lists_every_exit_code_the_cli_uses() -> None:
    assert set(documented_exit_codes()) == cli_exit_codes()
    assert code_for("success") == 0
    assert code_for("verification failed") == VerificationError.exit_code
    assert code_for("bad input or setup") == LedgerError.exit_code == InvalidCommandError.exit_code
    assert code_for("could not check: no installed plugin can re-derive a round") == (
        CannotReDeriveError.exit_code
    )
    assert "LEDGER_PLUGINS_BLOCK" in documented_exit_codes()[CannotReDeriveError.exit_code]


def test_the_documented_cases_exit_with_the_documented_codes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("LEDGER_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("LEDGER_PASSPHRASE", "readme passphrase")
    monkeypatch.setenv("LEDGER_PROGRESS_INTERVAL", "off")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))

    def ledger(*argv: str) -> tuple[int, str]:
        code = main(list(argv))
        return code, capsys.readouterr().err

    assert ledger("simulate", "--rounds", "3", "--players", "2", "--tables", "1") == (
        code_for("success"),
        "",
    )
    code, err = ledger("verify", "--level", "everything")
    assert code == code_for("bad input or setup"), err
    code, err = ledger("rounds", "void", str(uuid.UUID(int=7)), "--reason", "x")
    assert code == code_for("bad input or setup"), err

    monkeypatch.setenv("LEDGER_PLUGINS_BLOCK", "taixiu")
    code, err = ledger("verify")
    assert code == code_for("could not check"), err
    assert "taixiu" in err and "LEDGER_PLUGINS_BLOCK" in err
    monkeypatch.delenv("LEDGER_PLUGINS_BLOCK")

    stream = flip_first_event(tmp_path / "ledger.db")
    code, err = ledger("verify")
    assert code == code_for("verification failed"), err
    assert stream in err


# The Layout section (issue 8, item 7): every path exists, nothing is left out.


def layout_paths() -> list[str]:
    section = LAYOUT_DOC.read_text().split("\n## Layout\n", 1)[1]
    block = FENCE.search(section)
    assert block and block.group(1) == ""
    return [line.split()[0] for line in block.group(2).splitlines() if line.strip()]


def test_every_layout_path_exists() -> None:
    missing = [path for path in layout_paths() if not (ROOT / path).exists()]
    assert missing == []
    for path in layout_paths():
        assert path.endswith("/") == (ROOT / path).is_dir(), path


def test_the_layout_lists_every_package_module_and_plugin() -> None:
    listed = set(layout_paths())
    packages = {
        f"ledger/{d.name}/" for d in (ROOT / "ledger").iterdir() if (d / "__init__.py").is_file()
    }
    modules = {
        f"ledger/{f.name}" for f in (ROOT / "ledger").glob("*.py") if f.name != "__init__.py"
    }
    distributions = {
        f"plugins/{d.name}/"
        for d in (ROOT / "plugins").iterdir()
        if (d / "pyproject.toml").is_file()
    }
    assert "ledger/games/" in packages and "plugins/xidach/" in distributions
    assert (packages | modules | distributions) - listed == set()


# The command synopses: each lists exactly the options its command has.


def synopses() -> list[str]:
    """The Commands block's synopses, each with its continuation lines, comments cut."""
    section = CLI_DOC.read_text().split("\n## Commands\n", 1)[1]
    block = FENCE.search(section)
    assert block and block.group(1) == ""
    entries: list[str] = []
    for line in block.group(2).splitlines():
        text = line.split("  #")[0]
        if line.startswith("ledger "):
            entries.append(text)
        else:
            assert line.startswith(" ") and entries, line
            entries[-1] += " " + text
    return entries


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from commands(sub, (*path, name))


def options_of(parser: argparse.ArgumentParser, *, hidden: bool = False) -> set[str]:
    """The command's long options; `hidden`: with those --help leaves out."""
    return {
        option
        for action in parser._actions
        if hidden or action.help != argparse.SUPPRESS
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    }


def test_every_synopsis_lists_exactly_its_commands_options() -> None:
    parsers = dict(commands(build_parser()))
    shown: dict[tuple[str, ...], set[str]] = {path: set() for path in parsers}
    for entry in synopses():
        words = entry.split()[1:]
        path = max(
            (p for p in parsers if tuple(words[: len(p)]) == p), key=len
        )  # the deepest command the synopsis names
        assert path, entry
        options = set(re.findall(r"--[a-z][a-z-]*", entry))
        assert options <= options_of(parsers[path], hidden=True), f"{entry}: not {path}'s"
        shown[path] |= options
    for path, parser in parsers.items():
        if path:
            assert options_of(parser) <= shown[path], f"ledger {' '.join(path)}"
