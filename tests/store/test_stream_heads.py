"""Verify's stream heads in bounded memory (`ledger.audit.log.stream_heads`): the
recently written ones in memory, the rest in a scratch file; a chain break
whose predecessor's head went to disk is still found, on both stores."""

from __future__ import annotations

from pathlib import Path

import pytest

import ledger.audit.log.stream_heads as stream_heads
from ledger.audit.findings import Findings, Step
from ledger.audit.log.stream_heads import StreamHeads
from ledger.audit.verify import Level, Sinks, VerifyOptions, verify_store
from ledger.node import Node
from tests.attacker import Attacker
from tests.audit.test_tamper import record


def test_heads_past_the_limit_go_to_disk_and_come_back() -> None:
    heads = StreamHeads(hot=2)
    try:
        heads.update({f"s{n}": (n, bytes([n]) * 32) for n in range(5)})  # 5 > 2 * 2: spilled
        heads.update({"s0": (10, b"\x0a" * 32)})  # a newer head for a spilled stream
        assert heads.get("s0") == (10, b"\x0a" * 32)
        assert [heads.get(f"s{n}") for n in range(1, 5)] == [
            (n, bytes([n]) * 32) for n in range(1, 5)
        ]
        assert heads.get("never") is None
        scratch = heads._scratch
        assert scratch is not None and Path(scratch.name).exists()
    finally:
        heads.close()
    assert not Path(scratch.name).exists()


def test_a_break_is_found_when_its_streams_head_was_on_disk(
    node: Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    streams = record(node, tables=6)
    monkeypatch.setattr(stream_heads, "HOT_HEADS", 1)
    # Clean: every chunk's first event per stream links to a head, most from disk.
    clean = verify_store(
        node.app, node.keys.keyring(), VerifyOptions(level=Level.INTEGRITY, chunk_leaves=8)
    )
    assert clean.streams == 6
    attacker = Attacker(node.app.store_url)
    try:
        attacker.delete(streams[0], 12)  # its predecessor was in an earlier chunk
    finally:
        attacker.close()
    findings = Findings()
    verify_store(
        node.app,
        node.keys.keyring(),
        VerifyOptions(level=Level.INTEGRITY, chunk_leaves=8),
        sinks=Sinks(findings=findings),
    )
    named = f"stream {streams[0]} version 12"
    assert any(f.step is Step.CHAINS and named in f.text for f in findings), [
        f.text for f in findings
    ]
