"""How the settlement pass reads a chunk its workers verified: the rows read
again, proven by their digest to be the bytes the chunk verified, then read
without opening every envelope again. Rows changed between the two reads (an
attacker writing to the store's past during the run) are a finding, and are
then read, and checked, as they are. Both stores."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from ledger.audit.findings import Findings, Step
from ledger.audit.log.chunks import verify_chunk_with
from ledger.audit.log.log_events import events_of_rows, verified_events
from ledger.audit.log.log_source import StoreLog
from ledger.audit.verify import Level, chunk_events, plan_chunks
from ledger.cli.main import main
from ledger.crypto.envelope import SignerCheck
from ledger.crypto.keys import Keyring
from ledger.errors import FindingKind, VerificationError
from ledger.store.application import LedgerApplication
from tests.attacker import Attacker
from tests.conftest import PASSPHRASE
from tests.reproducible import reproducible_session


@pytest.fixture
def simulated(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[LedgerApplication, Keyring, str]]:
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    cli = ["--store", store_url, "--keys", str(tmp_path / "keys")]
    with reproducible_session(6) as seeds:
        assert (
            main([*cli, "simulate", "--rounds", "6", "--players", "4", "--tables", "1", *seeds])
            == 0
        )
    keyring = Keyring.from_json((tmp_path / "keys" / "keyring.json").read_text())
    app = LedgerApplication(store_url, keyring=keyring, create=False)
    try:
        yield app, keyring, store_url
    finally:
        app.close()


def test_a_verified_chunk_reads_as_every_envelope_opened_would(
    simulated: tuple[LedgerApplication, Keyring, str],
) -> None:
    app, _, _ = simulated
    rows = app.tables.rows_between(0, 1 << 62)
    transcoder = app.mapper.transcoder
    assert len(rows) == app.tables.event_count()[0] > 90  # the whole session (147 events)
    opened = list(events_of_rows(rows, 0, transcoder))
    assert list(verified_events(rows, 0, transcoder, set())) == opened
    # Rows the chunk made findings of are opened as before: the same events.
    assert list(verified_events(rows, 0, transcoder, {0, 5, len(rows) - 1})) == opened


def test_rows_changed_after_their_chunk_was_verified_are_a_finding(
    simulated: tuple[LedgerApplication, Keyring, str],
) -> None:
    app, keyring, store_url = simulated
    log = StoreLog(app)
    _, specs = plan_chunks(app, [], Level.INTEGRITY, 64)
    spec = replace(specs[1], digest=True)
    verified = verify_chunk_with(app.tables, SignerCheck(keyring), spec)
    assert verified.problems == [] and verified.digest is not None
    before = list(log.chunk_events(spec, verified))
    assert len(before) == verified.rows

    # The attacker alters one row of that chunk while the run goes on.
    attacker = Attacker(store_url)
    try:
        _, stream, version, _, state = app.tables.rows_between(spec.after_id, spec.last_id)[3]
        payload_at = 6 + int.from_bytes(state[4:6], "big") + 64  # its time, a century back
        altered = state[:payload_at] + state[payload_at:].replace(b'"20', b'"19', 1)
        assert altered != state
        attacker.set_state(str(stream), version, altered)
    finally:
        attacker.close()
    with pytest.raises(VerificationError, match="changed while they were being verified"):
        log.chunk_events(spec, verified)

    found = Findings()
    events = list(chunk_events(log, verified, found))
    [finding] = list(found)
    assert finding.step is Step.ENVELOPES and finding.kind is FindingKind.ALTERED
    last = spec.first_leaf + verified.rows - 1
    assert f"log positions {spec.first_leaf} to {last}" in finding.text
    # Read as they are now, every envelope opened: the altered payload is read,
    # which the settlement steps then judge (its hash no longer matches: the
    # envelope check of a full run names it).
    assert len(events) == len(before)
    assert events[3] != before[3]
