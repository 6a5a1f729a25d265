"""A clone explains itself (issue 20, item 8): nothing in it points to a file
the clone does not have, and a plugin author runs the plugin contract with the
core and one documented extra."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import ledger.plugins.contract

ROOT = Path(__file__).resolve().parents[2]
# The working notes this project was started from live outside the repository:
# their names (spelled in pieces, so this file does not name them itself).
OUTSIDE = re.compile(
    "|".join(
        (
            r"\b" + "RULES" + r"\.md",
            r"\b" + "DESIGN" + r"\.md",
            r"\b" + "STYLE" + r"\.md",
            r"\.\./" + "shared",
            r"\b[Ss]eeds? " + r"00\d",  # the user's source documents, by number
        )
    )
)
TEXT = (".py", ".md", ".toml", ".txt", ".cfg", ".sh", ".yml", ".yaml")


def tracked_text_files() -> list[Path]:
    names = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    return [ROOT / n for n in names if n.endswith(TEXT) or n == ".ci/run"]


def test_no_file_refers_to_a_file_outside_the_repository() -> None:
    files = tracked_text_files()
    assert len(files) > 100  # the listing worked
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not found, "\n".join(found)


def requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_plugin_contract_needs_the_core_and_its_plugin_testing_extra_only() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    allowed = requirement_names(project["dependencies"]) | requirement_names(
        project["optional-dependencies"]["plugin-testing"]
    )
    tree = ast.parse(Path(ledger.plugins.contract.__file__).read_text())
    modules = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
    }
    third_party = modules - set(sys.stdlib_module_names) - {"ledger"}
    assert {"pytest", "hypothesis"} <= third_party
    distributions = packages_distributions()
    for module in third_party:
        names = {d.lower() for d in distributions.get(module, [module])}
        assert names & allowed, f"the contract imports {module}, in no dependency it declares"


def test_each_shipped_plugin_declares_the_extra_for_its_tests() -> None:
    for pyproject in sorted((ROOT / "plugins").glob("*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        assert project["optional-dependencies"]["test"] == ["casino-ledger[plugin-testing]"]
