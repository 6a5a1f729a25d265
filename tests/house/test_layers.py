"""Layers that only point down (issue 20, item 2): `ledger/`'s packages
import only packages of a lower layer, and no file imports itself through
others. Every import counts, a lazy one inside a function or one for type
checking only included: each is a dependency a reader has to follow."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

LEDGER = Path(__file__).resolve().parents[2] / "ledger"

# Lowest first; a package may import the packages of the layers below its own.
LAYERS: tuple[frozenset[str], ...] = tuple(
    frozenset(layer.split())
    for layer in (
        "errors error_codes",
        "inputs outbound",  # what a user names (paths, JSON files); requests to peers
        "crypto domain",  # signatures and canonical bytes; the aggregates
        "privacy",  # personal values sealed per data subject, their keys
        # the sealed event store; the games contract; a device's report; a witness (C2SP)
        "store games devices witness",
        "rng plugins node projections revocation erasure",
        "casino audit",  # the write path; verification
        "simulation export",
        "archive",  # finished rounds moved into a verified archive
        "history retention",  # a player's history proven complete; retention as policy
        "report http mirror publish",  # the HTTP API; a regulator's copy; a broker's stream
        "cli",
    )
)
LAYER_OF = {package: number for number, layer in enumerate(LAYERS) for package in layer}


def module_of(path: Path) -> str:
    parts = path.relative_to(LEDGER.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_of(path): path for path in LEDGER.rglob("*.py")}


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imported(module: str) -> Iterator[str]:
    """The ledger modules `module` imports (`from package import submodule`
    names the submodule, not the package's `__init__`)."""
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = [f"{node.module}.{alias.name}" for alias in node.names]
            names = subs if all(s in MODULES for s in subs) else [node.module, *subs]
        else:
            continue
        for name in names:
            while name and name not in MODULES:  # a name inside a module: the module
                name = name.rpartition(".")[0]
            if name and name != module:
                yield name


@functools.cache
def graph() -> dict[str, set[str]]:
    """Each ledger module's ledger imports (read when a test first asks: not by
    every test process as it collects the suite)."""
    return {module: set(imported(module)) for module in MODULES}


def test_every_package_has_a_layer() -> None:
    packages = {package_of(m) for m in MODULES} - {"__init__"}
    assert packages == set(LAYER_OF), packages ^ set(LAYER_OF)


def test_packages_import_only_the_layers_below_them() -> None:
    upward = sorted(
        f"{source} -> {target}"
        for source, targets in graph().items()
        for target in targets
        if package_of(source) != package_of(target)
        and "__init__" not in (package_of(source), package_of(target))
        and LAYER_OF[package_of(target)] >= LAYER_OF[package_of(source)]
    )
    assert not upward, "imports that do not point down:\n" + "\n".join(upward)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_file_imports_itself_through_others() -> None:
    assert not cycles(graph())


def test_the_checks_see_a_cycle_and_an_upward_import() -> None:
    """The checks can fail: a made-up cycle is found, and the graph holds the
    downward imports the layers allow (the test reads real imports)."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    imports = graph()
    assert "ledger.crypto.canonical" in imports["ledger.crypto.envelope"] | {
        t for m in imports["ledger.crypto.envelope"] for t in imports[m]
    }
    assert "ledger.errors" in imports["ledger.domain.round"]
