"""docs/game-reference.md against the code (issue 41, item 1): every name a
plugin imports (`ledger.plugins.__all__`), every hook, every protocol member
and every TypedDict field is on the page with the signature and the type the
code has, read from the code with `inspect` and `typing`; the page's stubs
run as written."""

from __future__ import annotations

import ast
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ledger.plugins
from ledger.plugins import spec
from tests.doc_pages import blocks

PAGE = Path(__file__).resolve().parents[2] / "docs" / "game-reference.md"

# One parameter as compared: name, kind, annotation as spelled, has a default.
Param = tuple[str, str, str | None, bool]


def python_blocks() -> list[str]:
    return [body for lang, body in blocks(PAGE) if lang == "python"]


def documented() -> dict[str, ast.stmt]:
    """The page's top-level definitions, by name (each defined once)."""
    found: dict[str, ast.stmt] = {}
    for body in python_blocks():
        for node in ast.parse(body).body:
            name = _defined_name(node)
            if name is not None:
                assert name not in found, f"the page defines {name} twice"
                found[name] = node
    return found


def _defined_name(node: ast.stmt) -> str | None:
    if isinstance(node, ast.ClassDef | ast.FunctionDef):
        return node.name
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id
    return None


def spelled(annotation: Any) -> str | None:
    """An annotation as source spells it, normalised (the code's modules use
    postponed annotations: strings, or ForwardRefs in a TypedDict)."""
    if annotation is inspect.Parameter.empty or annotation is None:
        return None
    if isinstance(annotation, typing.ForwardRef):
        annotation = annotation.__forward_arg__
    if not isinstance(annotation, str):
        annotation = inspect.formatannotation(annotation)
    return ast.unparse(ast.parse(annotation, mode="eval"))


def code_signature(function: Callable[..., Any]) -> tuple[list[Param], str | None]:
    # Every name the code's annotations use resolves (a hook spec imports the
    # author's types for type checking only: they are `ledger.plugins`' names).
    typing.get_type_hints(function, localns=vars(ledger.plugins))
    signature = inspect.signature(function)
    params = [
        (p.name, p.kind.name, spelled(p.annotation), p.default is not p.empty)
        for p in signature.parameters.values()
        if p.name != "self"
    ]
    return params, spelled(signature.return_annotation)


def doc_signature(node: ast.FunctionDef) -> tuple[list[Param], str | None]:
    a = node.args

    def note(arg: ast.arg) -> str | None:
        return None if arg.annotation is None else ast.unparse(arg.annotation)

    positional = [*a.posonlyargs, *a.args]
    first_default = len(positional) - len(a.defaults)
    params: list[Param] = []
    for i, arg in enumerate(positional):
        kind = "POSITIONAL_ONLY" if arg in a.posonlyargs else "POSITIONAL_OR_KEYWORD"
        params.append((arg.arg, kind, note(arg), i >= first_default))
    if a.vararg:
        params.append((a.vararg.arg, "VAR_POSITIONAL", note(a.vararg), False))
    for arg, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        params.append((arg.arg, "KEYWORD_ONLY", note(arg), default is not None))
    if a.kwarg:
        params.append((a.kwarg.arg, "VAR_KEYWORD", note(a.kwarg), False))
    params = [p for p in params if p[0] != "self"]
    return params, None if node.returns is None else ast.unparse(node.returns)


def doc_members(node: ast.ClassDef) -> dict[str, ast.stmt]:
    members: dict[str, ast.stmt] = {}
    for item in node.body:
        name = _defined_name(item)
        if name is not None:
            members[name] = item
    return members


def doc_class(name: str) -> ast.ClassDef:
    node = documented().get(name)
    assert isinstance(node, ast.ClassDef), f"docs/game-reference.md has no stub of {name}"
    return node


def exported(kind: Callable[[Any], bool]) -> list[str]:
    return [name for name in ledger.plugins.__all__ if kind(getattr(ledger.plugins, name))]


def is_protocol(value: Any) -> bool:
    return inspect.isclass(value) and bool(getattr(value, "_is_protocol", False))


def is_error(value: Any) -> bool:
    return inspect.isclass(value) and issubclass(value, BaseException)


def check_class(name: str, code_members: dict[str, Any]) -> None:
    """`code_members`: each attribute's annotation or each method; the page's
    stub must have exactly these, spelled the same."""
    stub = doc_members(doc_class(name))
    for member, value in code_members.items():
        assert member in stub, f"docs/game-reference.md: {name} has no {member}"
        check_member(f"{name}.{member}", value, stub[member])
    ahead = {f"{name}.{m}" for m in stub} - {f"{name}.{m}" for m in code_members}
    assert not ahead, f"docs/game-reference.md documents what the code lacks: {ahead}"


def check_member(where: str, value: Any, stub: ast.stmt) -> None:
    if callable(value) and not isinstance(value, str):
        assert isinstance(stub, ast.FunctionDef), f"{where} is a method in the code"
        assert doc_signature(stub) == code_signature(value), where
    else:
        assert isinstance(stub, ast.AnnAssign), f"{where} is an attribute in the code"
        assert ast.unparse(stub.annotation) == spelled(value), where


def protocol_members(protocol: type) -> dict[str, Any]:
    members: dict[str, Any] = dict(inspect.get_annotations(protocol))
    for name, value in vars(protocol).items():
        if inspect.isfunction(value) and not name.startswith("_"):
            members[name] = value
    return members


# The tests.


def test_the_page_s_stubs_run_as_written() -> None:
    namespace: dict[str, Any] = {}
    exec(compile("\n".join(python_blocks()), str(PAGE), "exec"), namespace)
    assert namespace["Game"].__name__ == "Game"  # its own stub, beside the imported names


def test_the_page_imports_only_the_author_s_api() -> None:
    (imports,) = [
        node
        for body in python_blocks()
        for node in ast.parse(body).body
        if isinstance(node, ast.ImportFrom) and node.module == "ledger.plugins"
    ]
    names = [alias.name for alias in imports.names]
    assert set(names) <= set(ledger.plugins.__all__)


def test_every_exported_name_is_on_the_page() -> None:
    text = PAGE.read_text(encoding="utf-8")
    stubs = documented()
    for name in ledger.plugins.__all__:
        assert f"`{name}`" in text or name in stubs, f"docs/game-reference.md omits {name}"


def test_every_hook_is_documented_with_its_signature() -> None:
    hooks = {name: value for name, value in vars(spec).items() if name.startswith("ledger_")}
    assert set(hooks) == {"ledger_register_games", "ledger_game_from_rules"}
    stubs = {name: node for name, node in documented().items() if name.startswith("ledger_")}
    assert set(stubs) == set(hooks), set(stubs) ^ set(hooks)
    for name, hook in hooks.items():
        node = stubs[name]
        assert isinstance(node, ast.FunctionDef)
        assert doc_signature(node) == code_signature(hook), name


def test_every_protocol_is_documented_member_by_member() -> None:
    protocols = exported(is_protocol)
    assert {"Game", "ExactPaytable", "BetFamilies", "SimulatedPlay", "SimulatedRound"} <= set(
        protocols
    )
    for name in protocols:
        check_class(name, protocol_members(getattr(ledger.plugins, name)))


def test_every_typed_dict_is_documented_field_by_field() -> None:
    typed = exported(typing.is_typeddict)
    assert {"Step", "BetView", "RecordedAction", "Draw", "DrawRange"} <= set(typed)
    for name in typed:
        cls = getattr(ledger.plugins, name)
        typing.get_type_hints(cls)  # each field's type resolves
        check_class(name, dict(cls.__annotations__))


def test_every_constant_is_documented_with_its_value() -> None:
    constants = exported(lambda v: isinstance(v, int | str))
    assert "SETTLEMENT_API" in constants and "DECK_SIZE" in constants
    stubs = documented()
    for name in constants:
        node = stubs.get(name)
        assert isinstance(node, ast.AnnAssign) and node.value is not None, name
        assert ast.literal_eval(node.value) == getattr(ledger.plugins, name), name


def test_every_function_and_the_registry_are_documented_with_their_signatures() -> None:
    stubs = documented()
    for name in exported(inspect.isfunction):
        node = stubs.get(name)
        assert isinstance(node, ast.FunctionDef), f"no stub of {name}"
        assert doc_signature(node) == code_signature(getattr(ledger.plugins, name)), name
    registry = ledger.plugins.GameRegistry
    public = {
        name: value
        for name, value in vars(registry).items()
        if inspect.isfunction(value) and not name.startswith("_")
    }
    assert "add" in public
    check_class("GameRegistry", public)


def test_every_error_a_game_raises_is_documented_with_how_it_is_made() -> None:
    errors = exported(is_error)
    assert set(errors) == {"ConfigError", "InvalidCommandError", "PluginError"}
    for name in errors:
        cls = getattr(ledger.plugins, name)
        members: dict[str, Any] = {}
        # A constructor of the ledger's own (not Exception's) is documented.
        if getattr(cls.__init__, "__module__", None) == "ledger.errors":
            members["__init__"] = cls.__init__
        for klass in cls.__mro__:
            if klass.__module__ == "ledger.errors":
                for attr, note in inspect.get_annotations(klass).items():
                    members.setdefault(attr, note)
        check_class(name, members)


def test_what_a_contract_test_class_sets_is_on_the_page() -> None:
    from ledger.plugins.contract import GameContract

    text = PAGE.read_text(encoding="utf-8")
    settings = [
        name
        for name in vars(GameContract)
        if not name.startswith(("_", "test_")) and not callable(getattr(GameContract, name))
    ]
    settings += list(inspect.get_annotations(GameContract))
    assert {"plugin", "plugin_name", "action_args"} <= set(settings)
    for name in settings:
        assert f"`{name}`" in text, f"docs/game-reference.md does not say what {name} is"
