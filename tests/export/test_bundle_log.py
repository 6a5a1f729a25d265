"""A whole-log bundle read directly as a log (`BundleLog`), cut into many chunks:
it re-derives exactly what `verify` re-derives from the store it came from, on
one process or several, and what only crosses chunks — a stream's currency,
the registry and audit-trail lines read before the log — is checked across
them."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from ledger.audit.verify import Level, VerificationReport, VerifyOptions, verify_log, verify_store
from ledger.crypto.keys import Keyring
from ledger.domain.audit_trail import AUDIT_TRAIL_ID
from ledger.errors import VerificationError
from ledger.export.bundle_log import BundleLog
from ledger.export.reader import Bundle
from ledger.store.application import LedgerApplication
from tests.conftest import ledger_cli
from tests.installed import installed_games
from tests.reproducible import reproducible_session

Records = list[dict[str, object]]


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Keyring, Path]:
    """A simulated store with a recorded verification run, and its whole-log bundle."""
    base = tmp_path_factory.mktemp("bundle-log")
    store, keys = f"sqlite:///{base / 'ledger.db'}", base / "keys"
    with ledger_cli(store, keys) as ledger, reproducible_session(6) as seeds:
        assert ledger("simulate", "--rounds", 6, "--players", 4, "--tables", 1, *seeds) == 0
        assert ledger("keys", "create", "auditor-1", "--role", "auditor") == 0
        assert ledger("verify", "--record") == 0
        assert ledger("checkpoint") == 0
        assert ledger("export", base / "bundle") == 0
    return store, Keyring.from_json((keys / "keyring.json").read_text()), base / "bundle"


def read_lines(path: Path) -> Records:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_lines(path: Path, records: Records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def copied(bundle: Path, tmp_path: Path) -> Path:
    """A copy of the bundle to edit."""
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    return copy


def from_bundle(bundle: Path, keyring: Keyring, workers: int, chunk: int) -> VerificationReport:
    return verify_log(
        BundleLog(Bundle(bundle)),
        keyring,
        VerifyOptions(
            level=Level.SETTLEMENT, workers=workers, chunk_leaves=chunk, games=installed_games()
        ),
    )


@pytest.mark.parametrize("workers", [1, 2])
def test_a_bundle_in_many_chunks_re_derives_what_the_store_does(
    exported: tuple[str, Keyring, Path], workers: int
) -> None:
    store, keyring, bundle = exported
    app = LedgerApplication(store, keyring=keyring, create=False)
    try:
        expected = verify_store(
            app, keyring, VerifyOptions(level=Level.SETTLEMENT, workers=1, games=installed_games())
        )
    finally:
        app.close()
    got = from_bundle(bundle, keyring, workers, chunk=16)
    assert got.events == expected.events > 16 * 4  # many chunks
    assert got.streams == expected.streams
    assert got.root == expected.root and got.checkpoint_root == expected.checkpoint_root
    assert got.checkpoints == expected.checkpoints > 1
    assert got.recorded_runs == expected.recorded_runs == 1
    assert got.settlement == expected.settlement
    assert got.settlement is not None and got.settlement.resettled > 0


def test_a_lied_currency_in_a_later_chunk_is_named(
    exported: tuple[str, Keyring, Path], tmp_path: Path
) -> None:
    _, keyring, bundle = exported
    copy = copied(bundle, tmp_path)
    records = read_lines(copy / "events.jsonl")
    opened = {r["stream"]: i for i, r in enumerate(records) if r["version"] == 1}
    # An account's later event, in another chunk of 8 than the account's opening.
    index = next(
        i
        for i, r in enumerate(records)
        if r["currency"] is not None and r["version"] != 1 and i // 8 != opened[r["stream"]] // 8
    )
    records[index]["currency"] = "USD" if records[index]["currency"] != "USD" else "EUR"
    write_lines(copy / "events.jsonl", records)
    with pytest.raises(VerificationError) as caught:
        from_bundle(copy, keyring, workers=1, chunk=8)
    message = str(caught.value)
    assert f"events.jsonl line {index + 1} (log position {index})" in message
    assert re.search(r"currency '(USD|EUR)' is not its stream's", message)


def test_an_audit_trail_line_spelled_otherwise_is_named(
    exported: tuple[str, Keyring, Path], tmp_path: Path
) -> None:
    """The run's stream id written with JSON escapes: the same record to a JSON
    reader, but not found by the byte scan that reads the audit trail (and key
    registry) before the log. Verification must not pass without it."""
    _, keyring, bundle = exported
    copy = copied(bundle, tmp_path)
    trail = str(AUDIT_TRAIL_ID)
    escaped = "".join(f"\\u{ord(c):04x}" for c in trail)
    lines = (copy / "events.jsonl").read_text().splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if f'"stream":"{trail}"' in line)
    lines[index] = lines[index].replace(trail, escaped)
    assert json.loads(lines[index])["stream"] == trail  # the same record
    (copy / "events.jsonl").write_text("".join(lines))
    with pytest.raises(VerificationError) as caught:
        from_bundle(copy, keyring, workers=1, chunk=8)
    assert f"line {index + 1} (log position {index})" in str(caught.value)
    assert "does not spell its stream id as the ledger writes it" in str(caught.value)


def test_a_dropped_line_in_a_later_chunk_is_named(
    exported: tuple[str, Keyring, Path], tmp_path: Path
) -> None:
    _, keyring, bundle = exported
    copy = copied(bundle, tmp_path)
    records = read_lines(copy / "events.jsonl")
    write_lines(copy / "events.jsonl", records[:40] + records[41:])
    with pytest.raises(VerificationError) as caught:
        from_bundle(copy, keyring, workers=2, chunk=8)
    assert "events.jsonl line 41 (log position 41)" in str(caught.value)
    assert "expected log position 40" in str(caught.value)


def test_lines_not_as_the_ledger_writes_them_are_read_as_json_readers_read_them(
    exported: tuple[str, Keyring, Path], tmp_path: Path
) -> None:
    """A line re-spaced, and one with a decoy `envelope` key before the real one
    (JSON keeps the last): both are the same records to a JSON reader, so they
    verify, and the settlement level reads the envelope a JSON reader reads,
    never the decoy."""
    _, keyring, bundle = exported
    copy = copied(bundle, tmp_path)
    lines = (copy / "events.jsonl").read_text().splitlines(keepends=True)
    records = [json.loads(line) for line in lines]
    bet = next(i for i, r in enumerate(records) if r["type"] == "Round.BetPlaced")
    other = next(
        i
        for i, r in enumerate(records)
        if r["type"] == "Round.BetPlaced" and r["stream"] != records[bet]["stream"]
    )
    head, rest = lines[bet].split(",", 1)  # '{"position":N' and the rest
    lines[bet] = f'{head},"envelope":"{records[other]["envelope"]}",{rest}'
    assert json.loads(lines[bet]) == records[bet]  # the same record
    lines[3] = json.dumps(records[3], indent=1).replace("\n", " ") + "\n"
    (copy / "events.jsonl").write_text("".join(lines))
    expected = from_bundle(bundle, keyring, workers=1, chunk=16)
    got = from_bundle(copy, keyring, workers=1, chunk=16)
    assert got.settlement == expected.settlement and got.root == expected.root


@pytest.mark.parametrize("block", [1 << 20, 4099, 64])
def test_the_scan_finds_every_line_and_the_indexed_streams_events(
    exported: tuple[str, Keyring, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """The line offsets and the audit trail's and key registry's events found
    when a bundle is opened are what reading it line by line gives, a last
    line with no newline included, whatever the blocks it is read in (small
    ones cut lines, and the ids searched for, across blocks)."""
    from ledger.export import bundle_log
    from ledger.export.bundle_log import INDEXED

    monkeypatch.setattr(bundle_log, "_SCAN_BLOCK", block)

    bundle = copied(exported[2], tmp_path)
    events = bundle / "events.jsonl"
    for last_newline in (True, False):
        if not last_newline:
            events.write_bytes(events.read_bytes().rstrip(b"\n"))
        offsets, position, indexed = [], 0, set()
        with events.open("rb") as handle:
            for number, raw in enumerate(handle):
                offsets.append(position)
                position += len(raw)
                if json.loads(raw)["stream"] in INDEXED:
                    indexed.add(number)
        assert len(indexed) >= 2  # the recorded run, and the auditor's key
        log = BundleLog(Bundle(bundle))
        assert list(log._offsets) == [*offsets, position]
        assert log._indexed_positions == indexed
        assert {row[0] - 1 for row in log.rows._indexed.values()} == indexed
