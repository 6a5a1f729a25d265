"""The plugin author's API is `ledger.plugins.__all__` (issue 39, item 4): every
name in it resolves, docs/plugins.md names each, and the shipped plugins (and
the test plugins built as outsiders would) import nothing else from the core."""

from __future__ import annotations

import ast
from pathlib import Path

import ledger.plugins

ROOT = Path(__file__).resolve().parents[2]
# What a plugin's own tests may use besides the API: the contract tests, the host's loader, the CLI.
TESTING = {"ledger.plugins.contract", "ledger.plugins.manager", "ledger.cli.main"}


def core_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every import from the `ledger` package in `path`."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "ledger" or node.module.startswith("ledger."):
                found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name.split(".")[0] == "ledger"]
    return found


def plugin_files(tests: bool) -> list[Path]:
    roots = [*ROOT.glob("plugins/*"), *ROOT.glob("tests/plugins/*")]
    files = [f for root in roots for f in root.rglob("*.py")]
    return sorted(f for f in files if ("tests" in f.relative_to(ROOT).parts[2:]) == tests)


def test_every_exported_name_resolves_and_is_documented() -> None:
    names = ledger.plugins.__all__
    assert len(set(names)) == len(names)
    docs = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    for name in names:
        assert getattr(ledger.plugins, name) is not None
        assert f"`{name}`" in docs, f"docs/plugins.md does not name {name}"


def test_plugins_import_only_the_author_s_api() -> None:
    package_files = plugin_files(tests=False)
    assert len(package_files) >= 10  # both shipped plugins and the test plugins were read
    outside = [
        f"{path.relative_to(ROOT)}: {module} {name}"
        for path in package_files
        for module, name in core_imports(path)
        if module != "ledger.plugins" or name not in ledger.plugins.__all__
    ]
    assert outside == []


def test_plugin_tests_import_the_api_and_the_testing_kit_only() -> None:
    test_files = plugin_files(tests=True)
    assert test_files
    outside = [
        f"{path.relative_to(ROOT)}: {module} {name}"
        for path in test_files
        for module, name in core_imports(path)
        if not (module == "ledger.plugins" and name in ledger.plugins.__all__)
        and module not in TESTING
    ]
    assert outside == []


def test_the_plugins_are_loaded_in_one_place_a_front() -> None:
    """The wiring once (issue 39, item 4): the CLI's commands load the plugins
    through `ledger.cli.common.loaded_plugins`, the Python API through its opened
    ledger; every lower layer takes the games as an argument."""
    loaders = {
        "ledger/plugins/manager.py",  # where it is defined
        "ledger/cli/common.py",  # the commands'
        "ledger/casino/opened.py",  # an opened ledger's (the Python API, the HTTP service)
        "ledger/plugins/contract.py",  # the contract tests a plugin author runs
    }
    calling = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "ledger").rglob("*.py")
        if "get_plugin_manager(" in path.read_text(encoding="utf-8")
    }
    assert calling <= loaders, calling - loaders
    assert "ledger/cli/common.py" in calling
