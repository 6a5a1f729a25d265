"""Sizes a reader can hold (issue 39, item 5): no module of `ledger/` over 600
lines, no function over 80. Split along real seams when one grows past them."""

from __future__ import annotations

import ast
from pathlib import Path

LEDGER = Path(__file__).resolve().parents[2] / "ledger"
MODULE_LINES = 600
FUNCTION_LINES = 80


def test_no_module_over_600_lines_and_no_function_over_80() -> None:
    modules = sorted(LEDGER.rglob("*.py"))
    assert len(modules) > 100
    long_modules, long_functions = [], []
    for path in modules:
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(LEDGER.parent)
        if text.count("\n") > MODULE_LINES:
            long_modules.append(f"{name}: {text.count(chr(10))} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                if size > FUNCTION_LINES:
                    long_functions.append(f"{name}:{node.lineno} {node.name}: {size} lines")
    assert long_modules == []
    assert long_functions == []
