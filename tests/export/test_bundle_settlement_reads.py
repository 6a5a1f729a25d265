"""How the settlement pass reads a bundle chunk its workers verified: from the
envelopes the worker hands over (the very bytes it verified), or, for a chunk
with a finding, the lines read again, proven by their digest to be the bytes
the chunk verified; either way without opening every envelope again: the
same events as opening each. Lines changed between the two reads are a
finding, and are then read as they are (`tests/audit/test_settlement_reads.py`
holds a store to the same); a chunk read from its envelopes is what was
verified, whatever happens to the file after."""

from __future__ import annotations

import io
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from ledger.audit.findings import Findings, Step
from ledger.audit.log.chunks import ChunkResult, ChunkSpec, Problem
from ledger.audit.verify import chunk_events
from ledger.cli.main import main
from ledger.crypto.envelope import SignerCheck
from ledger.crypto.keys import Keyring
from ledger.errors import FindingKind, VerificationError
from ledger.export.bundle_files import EVENTS
from ledger.export.bundle_log import BundleLog, lines_digest, verify_lines
from ledger.export.reader import Bundle
from tests.conftest import PASSPHRASE
from tests.reproducible import reproducible_session


@pytest.fixture
def bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    cli = ["--store", f"sqlite:///{tmp_path / 'ledger.db'}", "--keys", str(tmp_path / "keys")]
    simulate = ["simulate", "--rounds", "6", "--players", "4", "--tables", "1"]
    with reproducible_session(6) as seeds:
        assert main([*cli, *simulate, "--card-tables", "1", *seeds]) == 0
    assert main([*cli, "export", str(tmp_path / "bundle")]) == 0
    return tmp_path / "bundle"


def _verified(log: BundleLog, chunk_leaves: int = 64) -> list[tuple[ChunkSpec, ChunkResult]]:
    """Every chunk, verified as for the settling process, and merged in order."""
    signer_check = SignerCheck(log.bundle.keyring())
    _, specs = log.plan([], True, chunk_leaves, [])
    done = []
    for spec in specs:
        spec = replace(spec, digest=True)
        result = verify_lines(log.path, signer_check, spec)
        # A clean chunk hands its envelopes over, and needs no digest of its lines.
        assert result.problems == [] and result.facts.envelopes is not None
        assert result.digest is None
        log.merge(result)
        done.append((spec, result))
    return done


def _read_again(log: BundleLog, spec: ChunkSpec, result: ChunkResult) -> ChunkResult:
    """The chunk as if the settling process had to read its lines again: no
    envelopes handed over, the digest of the lines its worker read."""
    with log.path.open("rb") as handle:
        handle.seek(spec.offset)
        lines = [handle.readline() for _ in range(spec.first_leaf, spec.last_id)]
    facts = replace(result.facts, envelopes=None)
    return replace(result, facts=facts, digest=lines_digest(lines))


def test_a_chunk_that_must_be_read_again_carries_its_lines_digest(bundle: Path) -> None:
    log = BundleLog(Bundle(bundle))
    signer_check = SignerCheck(log.bundle.keyring())
    _, specs = log.plan([], True, 64, [])
    spec = replace(specs[1], digest=True)
    clean = verify_lines(log.path, signer_check, spec)
    # A line written otherwise than the ledger writes it (respaced, the same
    # event): the chunk hands no envelopes, and its lines' digest instead.
    path = bundle / EVENTS
    lines = path.read_bytes().splitlines(keepends=True)
    at = spec.first_leaf + 2
    lines[at] = lines[at].replace(b'"position":', b'"position": ', 1)
    path.write_bytes(b"".join(lines))
    log = BundleLog(Bundle(bundle))
    _, specs = log.plan([], True, 64, [])
    spec = replace(specs[1], digest=True)
    rewritten = verify_lines(log.path, signer_check, spec)
    assert rewritten.problems == [] and rewritten.facts.rewritten == [at]
    assert rewritten.facts.envelopes is None
    assert rewritten.digest == _read_again(log, spec, clean).digest
    # A chunk with a finding (signed by a key the auditor does not hold): the same.
    found = verify_lines(log.path, SignerCheck(Keyring()), replace(specs[0], digest=True))
    assert found.problems and found.facts.envelopes is None
    assert found.digest == _read_again(log, specs[0], found).digest


def test_verified_lines_read_as_every_envelope_opened_would(
    bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = BundleLog(Bundle(bundle))
    chunks = _verified(log)
    # The bundle's 154 events span three chunks of 64, which cover them all.
    assert len(chunks) > 1 and sum(result.rows for _, result in chunks) == log.count
    opening = log._decoded
    for spec, result in chunks:
        opened = list(log.events_of_chunk(spec))
        assert len(opened) == result.rows
        assert result.facts.envelopes is not None  # handed over: nothing read again
        reread = _read_again(log, spec, result)
        with monkeypatch.context() as patch:  # every line read without opening its envelope
            patch.setattr(log, "_decoded", lambda lines: pytest.fail("an envelope was opened"))
            patch.setattr(log, "_opened", lambda *_: pytest.fail("an envelope was opened"))
            assert list(log.chunk_events(spec, result)) == opened
            assert list(log.chunk_events(spec, reread)) == opened
        assert log._decoded == opening
        # A chunk's findings, and every line after its first, are opened as before.
        found = replace(result, problems=[Problem(spec.first_leaf + 3, "bad")])
        assert list(log.chunk_events(spec, found)) == opened


def test_lines_changed_after_their_chunk_was_verified_are_a_finding(bundle: Path) -> None:
    log = BundleLog(Bundle(bundle))
    spec, handed = _verified(log)[1]
    # Read again (as a chunk with a finding is): the lines' digest is checked.
    verified = _read_again(log, spec, handed)
    before = list(log.chunk_events(spec, verified))

    # Someone rewrites a line of that chunk while the run goes on: its JSON
    # record spaced out, the envelope the same (so its events read the same).
    path = bundle / EVENTS
    lines = path.read_bytes().splitlines(keepends=True)
    at = spec.first_leaf + 2
    lines[at] = lines[at].replace(b'"position":', b'"position": ', 1)
    path.write_bytes(b"".join(lines))
    with pytest.raises(VerificationError, match="changed while they were being verified"):
        log.chunk_events(spec, verified)

    found = Findings()
    events = list(chunk_events(log, verified, found))
    [finding] = list(found)
    assert finding.step is Step.ENVELOPES and finding.kind is FindingKind.ALTERED
    assert f"{EVENTS} lines {spec.first_leaf + 1} to {spec.last_id} changed" in finding.text
    assert events == before
    # Settled from the envelopes its worker verified, the chunk is what was verified.
    found = Findings()
    assert list(chunk_events(log, handed, found)) == before and not found
