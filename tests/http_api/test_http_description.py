"""One description of how the server runs: the OpenAPI document's
`info.description` is `ledger.http.description.DESCRIPTION`, and docs/http.md's
"How a request runs" says the same, word for word."""

from __future__ import annotations

import json
from pathlib import Path

from ledger.http.app import openapi_document
from ledger.http.description import DESCRIPTION

DOCS = Path(__file__).resolve().parents[2] / "docs"


def words(text: str) -> str:
    """The text with its line breaks and runs of spaces as one space (Markdown's
    wrapping is not part of what it says)."""
    return " ".join(text.split())


def section(markdown: str, heading: str) -> str:
    after = markdown.split(f"\n## {heading}\n", 1)[1]
    return after.split("\n## ", 1)[0]


def test_the_document_and_the_page_describe_the_server_alike() -> None:
    assert openapi_document()["info"]["description"] == DESCRIPTION
    committed = json.loads((DOCS / "openapi.json").read_text())
    assert committed["info"]["description"] == DESCRIPTION
    page = section((DOCS / "http.md").read_text(), "How a request runs")
    paragraphs = [words(p) for p in DESCRIPTION.split("\n\n")]
    said = [words(p) for p in page.strip().split("\n\n")]
    assert said[: len(paragraphs)] == paragraphs
    assert "description.py" in said[-1]  # where the one text lives, said after it
