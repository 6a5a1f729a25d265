"""docs/http.md's walk-through (issue 19, item 1): its known answer (the
exact bytes a dealer device signs for a throw, and the report the published
example key gives) is what the ledger's own code makes and accepts. The
walk-through itself runs against a real server with the page's other
examples (tests/house/test_readme.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.crypto.actor import ACTOR_FACT_DOMAIN
from ledger.crypto.canonical import canonical
from ledger.crypto.keys import Role
from ledger.crypto.signing import InMemorySigner
from ledger.devices import throw_report
from ledger.domain.signed_facts import throw_fact

PAGE = Path(__file__).resolve().parents[2] / "docs" / "http.md"
ROUND = "6b8e7ad6-0557-49f3-a93e-7397558f0637"


def walkthrough() -> str:
    text = PAGE.read_text()
    return text[text.index("## A walk-through") : text.index("## Thin on purpose")]


def text_blocks() -> list[str]:
    return re.findall(r"^```text\n(.*?)^```$", walkthrough(), re.MULTILINE | re.DOTALL)


def test_the_documented_bytes_are_what_a_device_signs_for_a_throw() -> None:
    signed, _report = text_blocks()
    expected = ACTOR_FACT_DOMAIN + canonical(throw_fact(ROUND, 0, {"dice": [2, 5, 6]}))
    assert signed.encode() == expected + b"\n"  # the block's lines, as the bytes


def test_the_documented_report_is_the_ledgers_with_the_example_key() -> None:
    _signed, report = text_blocks()
    example = InMemorySigner(
        Ed25519PrivateKey.from_private_bytes(bytes([7]) * 32), Role.DEALER_DEVICE, "example"
    )
    made = throw_report(example, ROUND, 0, {"dice": [2, 5, 6]})
    assert json.loads(report) == made
    code = walkthrough()
    assert f'"signature": "{made["signature"]}"' in code  # the block's own assertion
    assert f'"key_id": "{made["key_id"]}"' in code
