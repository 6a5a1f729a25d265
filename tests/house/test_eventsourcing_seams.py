"""The ledger uses eventsourcing through its public extension points only, which
is what lets pyproject.toml accept any 9.x release: nothing in `ledger/`
overrides, calls or reads a private member (one leading underscore) of the
library's classes, or imports a private name from it."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap
from pathlib import Path

import eventsourcing

import ledger

LEDGER = Path(ledger.__file__).parent
# Set on every class by Python itself (abc, typing), not the library's API.
MACHINERY = {"_abc_impl", "_is_protocol", "_is_runtime_protocol"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _ledger_classes() -> list[type]:
    found: dict[str, type] = {}
    for module_info in pkgutil.walk_packages([str(LEDGER)], "ledger."):
        module = importlib.import_module(module_info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__:
                found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return list(found.values())


def _library_privates(cls: type) -> set[str]:
    """The private members eventsourcing's classes in `cls`'s MRO define."""
    names: set[str] = set()
    for base in cls.__mro__:
        if base.__module__.split(".")[0] == "eventsourcing":
            names |= {name for name in vars(base) if _private(name)}
    return names - MACHINERY


def _names_used_on_self(cls: type) -> set[str]:
    """Attributes `cls`'s own code reads or calls on `self` or `super()`."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    used: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        target = node.value
        on_self = isinstance(target, ast.Name) and target.id == "self"
        on_super = (
            isinstance(target, ast.Call)
            and isinstance(target.func, ast.Name)
            and target.func.id == "super"
        )
        if on_self or on_super:
            used.add(node.attr)
    return used


def test_no_subclass_overrides_or_uses_a_private_member_of_eventsourcing() -> None:
    problems = []
    subclasses = [c for c in _ledger_classes() if _library_privates(c)]
    assert subclasses, "expected the store's subclasses of eventsourcing classes"
    for cls in subclasses:
        private = _library_privates(cls)
        where = f"{cls.__module__}.{cls.__qualname__}"
        problems += [f"{where} overrides {n}" for n in sorted(private & set(vars(cls)))]
        problems += [f"{where} uses {n}" for n in sorted(private & _names_used_on_self(cls))]
    assert not problems, "private eventsourcing members:\n" + "\n".join(problems)


def test_no_private_name_of_eventsourcing_is_reached_from_outside() -> None:
    """`x._name` anywhere in ledger/ where `_name` is private in eventsourcing and
    not a name the ledger defines itself (an attribute of its own classes)."""
    library: set[str] = set()
    for path in Path(eventsourcing.__file__).parent.rglob("*.py"):
        if "tests" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _private(node.name):
                library.add(node.name)
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                library.add(node.attr)
    own: set[str] = set()
    reached: list[tuple[str, int, str]] = []
    imported: list[str] = []
    for path in sorted(LEDGER.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                own.add(node.name)
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                if isinstance(node.ctx, ast.Store):
                    own.add(node.attr)
                elif node.attr in library:
                    reached.append((str(path.relative_to(LEDGER)), node.lineno, node.attr))
            elif (
                isinstance(node, ast.ImportFrom)
                and (node.module or "").split(".")[0] == "eventsourcing"
                and any(_private(alias.name) for alias in node.names)
            ):
                imported.append(f"{path.relative_to(LEDGER)}:{node.lineno}")
    outside = [f"{path}:{line} .{name}" for path, line, name in reached if name not in own]
    assert not outside, "private eventsourcing members reached:\n" + "\n".join(outside)
    assert not imported, "private eventsourcing names imported at " + ", ".join(imported)
