"""Every error the ledger and its shipped games raise is held to the catalogue
of error codes (issue 41, item 4): each construction of a `LedgerError` class
in `ledger/` and `plugins/` names a code of `ledger.error_codes` (`code="..."`)
or relies on its class's default, which is one. `InvalidCommandError`'s own
default names no reason, so every direct `InvalidCommandError(...)` gives its
code. A code's status is the one its class answers with over HTTP, and a
literal `param` is the one the catalogue names for the code."""

from __future__ import annotations

import ast
import functools
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ledger.error_codes import ANY_FIELD, CATALOGUE, CODES
from ledger.errors import InvalidCommandError, LedgerError
from ledger.http.errors import STATUS_CODES, status_of_kind

ROOT = Path(__file__).resolve().parents[2]
# The shipped code: the plugins' own tests raise errors on purpose, not for users.
SOURCES = sorted(
    path
    for path in [*(ROOT / "ledger").rglob("*.py"), *(ROOT / "plugins").rglob("*.py")]
    if "tests" not in path.relative_to(ROOT).parts
)


@dataclass(frozen=True)
class Site:
    where: str  # file:line
    kind: type[LedgerError]
    code: ast.expr | None
    param: ast.expr | None


def module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = relative.parts
    if parts[0] == "plugins":  # each plugin is its own distribution: its package is the root
        parts = parts[2:]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def base_names(node: ast.ClassDef) -> set[str]:
    return {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}


@functools.cache
def error_classes() -> dict[str, type[LedgerError]]:
    """Every `LedgerError` class defined in the sources, by name: found by its
    bases, then imported, so its default code is read, not guessed."""
    defined = [
        (path, node)
        for path in SOURCES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    ]
    names = {"LedgerError"}
    while True:
        more = {node.name for _, node in defined if base_names(node) & names} - names
        if not more:
            break
        names |= more
    found: dict[str, type[LedgerError]] = {}
    for path, node in defined:
        if node.name in names:
            value = getattr(importlib.import_module(module_name(path)), node.name)
            assert issubclass(value, LedgerError), value
            found[node.name] = value
    return found


def sites_in(source: str, where: str, classes: dict[str, type[LedgerError]]) -> Iterator[Site]:
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        if name not in classes:
            continue
        keywords = {k.arg: k.value for k in node.keywords}
        yield Site(
            f"{where}:{node.lineno}", classes[name], keywords.get("code"), keywords.get("param")
        )


def passed_on(code: ast.expr) -> bool:
    """A code handed on unchanged: another error's (`cause.code`) or a parameter's."""
    return (isinstance(code, ast.Attribute) and code.attr == "code") or (
        isinstance(code, ast.Name) and code.id == "code"
    )


def problems_of(site: Site) -> Iterator[str]:
    code = site.code
    if code is None:
        if site.kind is InvalidCommandError:
            yield f"{site.where}: InvalidCommandError without a code="
        elif site.kind.code not in CODES:
            name, default = site.kind.__name__, site.kind.code
            yield f"{site.where}: {name}'s default code {default!r} is not in the catalogue"
        return
    if passed_on(code):
        return
    written = literals(code)
    if written is None:
        yield f"{site.where}: code= is not a literal string"
        return
    for value in written:
        entry = CODES.get(value)
        if entry is None:
            yield f"{site.where}: code {value!r} is not in the catalogue"
            continue
        if entry.status != status_of_kind(site.kind):
            yield (
                f"{site.where}: code {value!r} answers {entry.status}, but a "
                f"{site.kind.__name__} answers {status_of_kind(site.kind)}"
            )
        param = site.param
        if isinstance(param, ast.Constant) and entry.param not in (ANY_FIELD, param.value):
            yield f"{site.where}: code {value!r} names param {entry.param!r}, not {param.value!r}"


def literals(code: ast.expr) -> list[str] | None:
    """The codes a `code=` expression may give: a string, or either branch of
    `a if test else b` (None when it is anything else)."""
    if isinstance(code, ast.Constant) and isinstance(code.value, str):
        return [code.value]
    if isinstance(code, ast.IfExp):
        body, orelse = literals(code.body), literals(code.orelse)
        return None if body is None or orelse is None else body + orelse
    return None


def all_sites() -> list[Site]:
    classes = error_classes()
    return [
        site
        for path in SOURCES
        for site in sites_in(path.read_text(), str(path.relative_to(ROOT)), classes)
    ]


def test_every_raised_error_is_held_to_the_catalogue() -> None:
    sites = all_sites()
    # The scan reads the real sources: the bet refusals the catalogue opens with are among them.
    assert len(sites) > 600
    problems = [problem for site in sites for problem in problems_of(site)]
    assert not problems, "\n".join(problems)


def test_the_scan_finds_a_site_without_a_code_and_a_code_not_in_the_catalogue() -> None:
    classes = error_classes()
    source = (
        "raise InvalidCommandError('no code')\n"
        "raise InvalidCommandError('made up', code='made_up')\n"
        "raise NotFoundError('wrong status', code='stake_over_limit')\n"
        "raise InvalidCommandError('wrong field', code='stake_over_limit', param='bet')\n"
        "raise InvalidCommandError('fine', code='stake_over_limit', param='stake')\n"
        "raise VerificationError('a class default')\n"
        "raise InvalidCommandError('either', code='round_settled' if x else 'made_up')\n"
        "raise InvalidCommandError('computed', code=pick())\n"
    )
    problems = [p for site in sites_in(source, "x.py", classes) for p in problems_of(site)]
    assert problems == [
        "x.py:1: InvalidCommandError without a code=",
        "x.py:2: code 'made_up' is not in the catalogue",
        "x.py:3: code 'stake_over_limit' answers 400, but a NotFoundError answers 404",
        "x.py:4: code 'stake_over_limit' names param 'stake', not 'bet'",
        "x.py:7: code 'made_up' is not in the catalogue",
        "x.py:8: code= is not a literal string",
    ]


def test_every_error_class_and_status_has_a_code_in_the_catalogue() -> None:
    classes = error_classes()
    assert {"InvalidCommandError", "VerificationError", "ProjectionError"} <= set(classes)
    unknown = {name: cls.code for name, cls in classes.items() if cls.code not in CODES}
    assert not unknown
    assert set(STATUS_CODES.values()) <= set(CODES)
    for status, code in STATUS_CODES.items():
        assert CODES[code].status == status


def test_the_catalogue_is_stable_snake_case_with_one_entry_a_code() -> None:
    codes = [entry.code for entry in CATALOGUE]
    assert len(codes) == len(set(codes))
    for code in codes:
        assert code.isascii() and code.replace("_", "").isalnum() and code == code.lower(), code
    for entry in CATALOGUE:
        assert 400 <= entry.status < 600 and entry.meaning, entry
