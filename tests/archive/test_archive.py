"""The archive tier (issue 40, item 3), on both stores: finished rounds leave
the store for a verified archive; verify on the store alone names the archived
positions and still checks the tree and chains; verify --archive re-derives
everything; an attacker passing a deleted event off as archived, or editing
the kept rows, is found; a crash after any step loses nothing; bad input
archives nothing."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ledger.archive.check import check_archive
from ledger.archive.files import EVENTS
from ledger.archive.fill import ArchivedStoreLog
from ledger.archive.run import STEPS, archive_rounds
from ledger.audit.findings import Findings
from ledger.audit.verify import Level, Sinks, VerifyOptions, verify_log, verify_store
from ledger.casino import Casino
from ledger.crypto.keys import Role
from ledger.errors import ConfigError
from ledger.node import Node
from ledger.plugins.manager import get_plugin_manager
from ledger.store.archived import ArchivedTable
from tests.attacker import Attacker
from tests.conftest import PASSPHRASE, ledger_cli
from tests.history.test_history import Tables

LEDGER = Path(sys.executable).parent / "ledger"


def _options() -> VerifyOptions:
    return VerifyOptions(level=Level.SETTLEMENT, games=get_plugin_manager().games(), workers=1)


def _played(node: Node, rounds: int = 4) -> Tables:
    tables = Tables(node)
    tables.play(rounds)
    return tables


def test_archived_rounds_leave_the_store_and_the_log_still_verifies(
    node: Node, tmp_path: Path
) -> None:
    tables = _played(node)
    before = verify_store(node.app, node.keyring, _options())
    done = archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    assert done.rounds == 4 and done.events > 4 * 4
    for round_id in tables.rounds:  # each round's rows are markers now, none an event
        assert node.app.tables.row_by_stream(round_id, 1)[3] is None
    assert sum(ArchivedTable(node.app.tables).counts().values()) == done.events
    tables.play(2)  # the log goes on over the archived positions
    alone = verify_store(node.app, node.keyring, _options())
    assert alone.archived is not None and alone.archived.events == done.events
    assert "NOT re-read" in alone.summary() and "NOT CHECKED: " in alone.summary()
    assert alone.resettled == 2  # the rounds still in the store, re-settled
    given = ArchivedStoreLog(node.app, [done.directory], node.keyring)
    full = verify_log(given, node.keyring, _options())
    assert full.resettled == before.resettled + 2
    assert full.movements is not None and before.movements is not None
    assert full.movements > before.movements
    assert "re-read from the archive" in full.summary()
    checked = check_archive(done.directory, node.keyring)
    assert checked.events == done.events and checked.streams == 4


def test_verify_without_every_archive_is_refused(node: Node, tmp_path: Path) -> None:
    _played(node, 2)
    archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    with pytest.raises(ConfigError, match="give each with --archive"):
        ArchivedStoreLog(node.app, [], node.keyring)


def _findings(node: Node) -> Findings:
    found = Findings()
    verify_store(node.app, node.keyring, _options(), Sinks(findings=found))
    return found


def test_an_event_deleted_and_passed_off_as_archived_is_found(
    node: Node, tmp_path: Path, store_url: str
) -> None:
    tables = _played(node, 3)
    done = archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    tables.play(1)
    node.checkpointer().catch_up()
    live = tables.rounds[-1]
    attacker = Attacker(store_url)
    nid, _, version, _, _ = attacker.row(live, 2)  # a bet, still in the store
    leaf = node.app.tables.leaf_hash(node.app.tables.position_of(nid))
    attacker.sql(f"DELETE FROM {attacker.events} WHERE {attacker.id} = ?", (nid,))
    attacker.sql(
        "INSERT INTO ledger_archived (notification_id, position, originator_id, "
        "originator_version, leaf_hash, archive) VALUES (?, ?, ?, ?, ?, ?)",
        (nid, node.app.tables.position_of(nid), attacker.key(live), version, leaf, done.archive),
    )
    found = _findings(node)
    assert any("is not what its register event signs" in f.text for f in found.items)


def test_an_edited_archived_row_is_found(node: Node, tmp_path: Path, store_url: str) -> None:
    _played(node, 2)
    archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    attacker = Attacker(store_url)
    attacker.sql(
        "UPDATE ledger_archived SET leaf_hash = ? WHERE position = "
        "(SELECT MIN(position) FROM ledger_archived)",
        (bytes(32),),
    )
    messages = [f.text for f in _findings(node).items]
    assert any("is not what its register event signs" in m for m in messages), messages


def test_a_marker_row_added_among_the_events_is_found(
    node: Node, tmp_path: Path, store_url: str
) -> None:
    tables = _played(node, 2)
    archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    tables.play(1)
    node.checkpointer().catch_up()
    attacker = Attacker(store_url)
    if not attacker.sqlite:  # (the attacker owns the schema too)
        attacker.sql(f"ALTER TABLE {attacker.events} ALTER COLUMN topic DROP NOT NULL")
    nid = attacker.row(tables.rounds[-1], 2)[0]
    leaf = node.app.tables.leaf_hash(node.app.tables.position_of(nid))
    attacker.sql(
        f"UPDATE {attacker.events} SET topic = NULL, state = ? WHERE {attacker.id} = ?", (leaf, nid)
    )
    messages = [f.text for f in _findings(node).items]
    assert any("archived events' marker rows" in m for m in messages)


def _accounted(node: Node, events: dict[tuple[str, int], bytes], target: Path) -> None:
    """Every event of the rounds is in the store, or in a verified archive at `target`."""
    archived: set[tuple[str, int]] = set()
    if (target / "manifest.json").exists():
        check_archive(target, node.keyring)
        with (target / EVENTS).open() as lines:
            for line in lines:
                record = json.loads(line)
                archived.add((record["stream"], record["version"]))
                assert (
                    base64.b64decode(record["envelope"])
                    == events[(record["stream"], record["version"])]
                )
    for (stream, version), state in events.items():
        row = node.app.tables.row_by_stream(stream, version)
        assert row is not None
        if row[3] is not None:
            assert bytes(row[4]) == state
        else:
            assert (stream, version) in archived, f"{stream} v{version} is nowhere"


@pytest.mark.parametrize("step", STEPS)
def test_a_crash_after_any_step_loses_nothing(
    node: Node, tmp_path: Path, store_url: str, step: str
) -> None:
    tables = _played(node, 2)
    events = {}
    for round_id in tables.rounds:
        version = 1
        while (row := node.app.tables.row_by_stream(round_id, version)) is not None:
            events[(round_id, version)] = bytes(row[4])
            version += 1
    target = tmp_path / "a1"
    env = {
        **os.environ,
        "LEDGER_PASSPHRASE": PASSPHRASE.decode(),
        "LEDGER_ARCHIVE_STOP_AFTER": step,
    }
    command = [
        str(LEDGER),
        "--store",
        store_url,
        "--keys",
        str(node.keys.path),
        "archive",
        "--before",
        datetime.now(UTC).isoformat(),
        "--to",
        str(target),
    ]
    killed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode == 137, killed.stderr
    _accounted(node, events, target)
    with ledger_cli(store_url, node.keys.path) as run:  # the same command again, to its end
        assert run(*command[5:]) == 0
        _accounted(node, events, target)
        assert all(node.app.tables.row_by_stream(r, 1)[3] is None for r in tables.rounds)
        assert run("verify", "--workers", 1, "--archive", target) == 0


def test_bad_input_is_one_line_and_archives_nothing(
    node: Node, tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _played(node, 1)
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    locked = tmp_path / "a-file"  # (as root, no directory is unwritable: a file is no parent)
    locked.write_text("x")
    cases = [
        ("--before", "yesterday", "--to", tmp_path / "a"),
        ("--before", "2999-01-01", "--to", tmp_path / "a"),
        ("--before", datetime.now(UTC).isoformat(), "--to", full),
        ("--before", datetime.now(UTC).isoformat(), "--to", locked / "a"),
        ("--before", datetime.now(UTC).isoformat()),
    ]
    with ledger_cli(store_url, node.keys.path) as run:
        for case in cases:
            capsys.readouterr()
            assert run("archive", *case) == 2, case
            err = capsys.readouterr().err
            assert err.startswith("ledger: error: ") and err.count("\n") == 1, err
    assert ArchivedTable(node.app.tables).counts() == {}
    assert not (tmp_path / "a").exists() and locked.read_text() == "x"


def test_an_archived_round_is_recalled_from_its_archive_and_named_elsewhere(
    node: Node, tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    tables = _played(node, 2)
    done = archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    archived = tables.rounds[0]
    with ledger_cli(store_url, node.keys.path) as run:
        capsys.readouterr()
        assert run("recall", archived) == 2  # the store says where it went
        assert "is archived" in capsys.readouterr().err
        assert run("recall", archived, "--archive", done.directory, "--json") == 0
        recalled = json.loads(capsys.readouterr().out)
        assert recalled["round"] == archived and recalled["verified"] is True
        assert all(event["position"] is not None for event in recalled["events"])
        assert run("events", "--significant", "--json") == 0
        kinds = [json.loads(line)["kind"] for line in capsys.readouterr().out.splitlines()]
        assert "archive" in kinds
        assert run("export", tmp_path / "whole") == 2  # positions would be missing: refused
        assert "left it for archives" in capsys.readouterr().err
        assert run("export", tmp_path / "one", "--round", archived) == 2
        assert not (tmp_path / "whole").exists() and not (tmp_path / "one").exists()
        node.keys.create("op", Role.OPERATOR, PASSPHRASE)
        capsys.readouterr()
        assert run("rounds", "void", archived, "--reason", "late") == 2  # a write, refused
        assert "is archived" in capsys.readouterr().err


def test_a_saved_state_the_archive_moved_on_from_is_refused_and_the_node_verifies_in_full(
    node: Node, tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ledger.audit.self_verification import SelfVerifier

    tables = _played(node, 3)
    state = tmp_path / "state"
    own = SelfVerifier(node.app, get_plugin_manager().games(), tmp_path / "own")
    assert own.run_once().finding is None  # the node's state, saved before the archive
    with ledger_cli(store_url, node.keys.path) as run:
        assert run("verify", "--workers", 1, "--save-state", state) == 0
        archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
        tables.play(1)
        capsys.readouterr()
        assert run("verify", "--workers", 1, "--resume", state) == 2
        err = capsys.readouterr().err
        assert "verify in full once, and save a new state" in err and err.count("\n") == 1
        assert run("verify", "--workers", 1) == 0
    after = own.run_once()  # refused resume: the node verifies in full, and passes
    assert after.finding is None and after.run["result"] == "passed"


def test_the_archive_carries_the_witnesses_cosignatures(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger.crypto.checkpoint import Checkpoint
    from ledger.store.witnessing import WITNESSES_ENV
    from tests.mirror.test_witness_submission import log_witness, policy_for
    from tests.witness_support import ServedWitness

    with ServedWitness(log_witness(node, tmp_path)) as served:
        monkeypatch.setenv(WITNESSES_ENV, served.setting)
        _played(node, 2)  # (checkpointed: each checkpoint handed to the witness)
        assert node.witnesses is not None
        node.witnesses.close(wait=10)
        done = archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    note = (done.directory / "checkpoint").read_text()
    report = policy_for(served.witness, quorum=1).check(Checkpoint.from_note(note))
    assert len(report.valid) == 1  # a witness's cosignature over the archive's checkpoint
    assert check_archive(done.directory, node.keyring).checkpoint.others


def test_go_x_mod_tlog_proves_each_archived_leaf_from_the_archive_alone(
    node: Node, tmp_path: Path, tlogcheck: Path
) -> None:
    """Go's golang.org/x/mod/sumdb/{note,tlog}, which we did not write, reads the
    archive's hash tiles against its signed checkpoint and proves each listed leaf."""
    from tests.export.test_tiles import vkey_of
    from tests.go_tlog import run_tlogcheck

    _played(node, 3)
    done = archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    vkey = vkey_of(done.directory, node.keyring)
    ran = run_tlogcheck(tlogcheck, done.directory, vkey, leaves=done.directory / "archived.txt")
    assert ran.returncode == 0, ran.stderr
    assert f"OK {done.events} listed leaves are in the tree" in ran.stdout
    listed = (done.directory / "archived.txt").read_text().splitlines()
    position, rest = listed[0].split(" ", 1)
    (tmp_path / "bad.txt").write_text(f"{position} {rest[:-1]}{'0' if rest[-1] != '0' else '1'}\n")
    bad = run_tlogcheck(tlogcheck, done.directory, vkey, leaves=tmp_path / "bad.txt")
    assert bad.returncode == 1 and "is not the listed one" in bad.stderr


def test_archive_list_names_exactly_the_positions_each_archive_took(
    node: Node, tmp_path: Path, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _played(node, 2)
    done = archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    listed = [int(line.split(" ")[0]) for line in (done.directory / "archived.txt").open()]
    with ledger_cli(store_url, node.keys.path) as run:
        capsys.readouterr()
        assert run("archive", "list", "--positions") == 0
        head, positions = capsys.readouterr().out.splitlines()
        assert f"archive {done.archive}: {done.events} events of 2 rounds" in head
        assert [int(p) for p in positions.split()] == listed
        Attacker(store_url).sql("DELETE FROM ledger_archived WHERE position = ?", (listed[0],))
        assert run("archive", "list") == 1  # the rows no longer match the signed digest
        assert "is not what its register event signs" in capsys.readouterr().err


def _payload_digit_changed(state: bytes) -> bytes:
    """The envelope with one digit of its payload changed (still JSON): its header,
    leaf and signature are the signed ones, its payload is not."""
    payload_at = 6 + int.from_bytes(state[4:6], "big") + 64
    at = payload_at + next(i for i, c in enumerate(state[payload_at:]) if chr(c).isdigit())
    digit = b"1" if state[at : at + 1] != b"1" else b"2"
    return state[:at] + digit + state[at + 1 :]


def _changed_payload(line: str) -> str:
    """The line of the same envelope with one digit of its payload changed."""
    from ledger.export.records import event_line

    record = json.loads(line)
    state = _payload_digit_changed(base64.b64decode(record["envelope"]))
    return event_line(record["position"], state, record["currency"])


def _flip_signature(line: str) -> str:
    """The line of the same envelope with one bit of its signature flipped (the
    line itself is the one that envelope gives: only the signature is wrong)."""
    from ledger.export.records import event_line

    record = json.loads(line)
    state = bytearray(base64.b64decode(record["envelope"]))
    header_end = 6 + int.from_bytes(state[4:6], "big")
    state[header_end + 10] ^= 1
    return event_line(record["position"], bytes(state), record["currency"])


@pytest.mark.parametrize(
    "what",
    [
        "decoded field",
        "signature",
        "payload",
        "listed leaf",
        "line dropped",
        "tile",
        "manifest digest",
    ],
)
def test_an_archive_edited_anywhere_does_not_check(node: Node, tmp_path: Path, what: str) -> None:
    from ledger.errors import VerificationError
    from ledger.store.archived import ArchivedEntry, entries_digest

    _played(node, 2)
    done = archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    directory = done.directory
    listed = (directory / "archived.txt").read_bytes()
    manifest = json.loads((directory / "manifest.json").read_text())
    entries = [ArchivedEntry.from_line(line) for line in listed.splitlines(keepends=True)]
    assert entries_digest(entries) == manifest["digest"]  # the digest, by its definition
    events = (directory / EVENTS).read_text().splitlines(keepends=True)
    if what == "decoded field":
        events[1] = events[1].replace('"version":2', '"version":3', 1)
    elif what == "signature":
        events[1] = _flip_signature(events[1])
    elif what == "payload":
        events[1] = _changed_payload(events[1])
    elif what == "listed leaf":
        listed = listed.replace(listed[-3:-1], b"00" if listed[-3:-1] != b"00" else b"11")
    elif what == "line dropped":
        events.pop()
    elif what == "tile":
        (directory / "tile" / "0" / "000.p" / str(done.checkpoint_size)).write_bytes(bytes(32))
    else:
        manifest["digest"] = "0" * 64
    (directory / EVENTS).write_text("".join(events))
    (directory / "archived.txt").write_bytes(listed)
    (directory / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(VerificationError) as raised:
        check_archive(directory, node.keyring)
    if what == "signature":
        assert "line 2 (log position" in str(raised.value) and "signature is invalid" in str(
            raised.value
        )
    if what == "payload":
        assert "line 2 (log position" in str(raised.value)
        assert "its payload is not the one its envelope signs" in str(raised.value)


def test_a_removal_that_does_not_find_every_event_removes_nothing(
    node: Node, tmp_path: Path, store_url: str
) -> None:
    from ledger.archive.run import finish_archives

    tables = _played(node, 2)
    target = tmp_path / "a1"
    env = {
        **os.environ,
        "LEDGER_PASSPHRASE": PASSPHRASE.decode(),
        "LEDGER_ARCHIVE_STOP_AFTER": "anchored",
    }
    command = [str(LEDGER), "--store", store_url, "--keys", str(node.keys.path), "archive"]
    command += ["--before", datetime.now(UTC).isoformat(), "--to", str(target)]
    assert subprocess.run(command, env=env, capture_output=True, timeout=120).returncode == 137
    attacker = Attacker(store_url)
    nid = attacker.row(tables.rounds[-1], 3)[0]
    attacker.sql(f"DELETE FROM {attacker.events} WHERE {attacker.id} = ?", (nid,))
    with pytest.raises(ConfigError, match="nothing was removed"):
        finish_archives(node)
    assert ArchivedTable(node.app.tables).counts() == {}
    assert node.app.tables.row_by_stream(tables.rounds[0], 1)[3] is not None  # still here


def test_a_retried_request_recorded_in_an_archived_round_says_so(
    node: Node, tmp_path: Path
) -> None:
    from ledger.errors import VerificationError

    tables = _played(node, 2)
    archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    fresh = Casino(node.app, get_plugin_manager().games())  # (no answer kept in memory)
    with pytest.raises(VerificationError, match="which is archived"):
        fresh.place_bet(
            request_id="b0-0",
            round_id=tables.rounds[0],
            account_id=tables.player,
            bet={"bet": "small"},
            stake=100,
        )


def test_the_feed_jumps_over_archived_places_without_gap_or_duplicate(
    node: Node, tmp_path: Path
) -> None:
    from tests.http_support import make_api

    tables = _played(node, 3)
    archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    tables.play(1)
    node.checkpointer().catch_up()
    live = []
    for offset, (_, _, _, topic, _) in enumerate(node.app.tables.rows_after(0, 10**6)):
        if topic is not None:
            live.append(offset)
    api = make_api(node, tmp_path / "api")
    paged, after = [], None
    while True:  # pages of 7: some all archived places, read on past
        answer = api.get("/v1/events", limit=7, **({} if after is None else {"after": after}))
        assert answer.status_code == 200, answer.text
        page = answer.json()
        paged += [record["position"] for record in page["events"]]
        if page["next_after"] == after:
            break
        after = page["next_after"]
    streamed = api.get("/v1/events/stream").text.splitlines()
    assert paged == live
    assert [json.loads(line)["position"] for line in streamed] == live


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ("signature", "its envelope signature is invalid"),
        ("payload", "its payload is not the one its envelope signs"),
        ("header", "not the leaf the tiles hold at its position"),
        ("stream column", "its envelope is another event.s|chain is broken"),
        ("leaf row", "do not hash to the root"),
        ("leaf row deleted", r"Merkle leaf \d+ is missing"),
        ("file after writing", "does not hold what was written"),
        ("an account's topic", "signs another type than a round's"),
    ],
)
def test_an_edited_store_is_refused_and_nothing_leaves_it(
    node: Node,
    tmp_path: Path,
    store_url: str,
    edit: str,
    said: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The archive checks each event as it writes it, then reads every file back
    from disk: an attacker's edit of a round's row (its signature, its payload,
    its signed header, the stream column it sits under, its Merkle leaf row), an
    account's event whose unsigned topic column says a round was voided (the
    choice reads topics; only a round's signed events may leave) or a file
    changed on disk before the read-back is refused, nothing recorded or removed."""
    from ledger.archive import run
    from ledger.errors import VerificationError

    tables = _played(node, 2)
    stream = tables.rounds[0]
    attacker = Attacker(store_url)
    try:
        nid, _, _, _, state = attacker.row(stream, 3)
        header_end = 6 + int.from_bytes(state[4:6], "big")
        if edit == "signature":
            attacker.set_state(stream, 3, state[:header_end] + bytes(64) + state[header_end + 64 :])
        elif edit == "payload":  # a digit of the payload: its header and signature untouched
            attacker.set_state(stream, 3, _payload_digit_changed(state))
        elif edit == "header":  # the signing time's last digit: still canonical JSON
            at = state.index(b',"stream"')
            digit = b"1" if state[at - 1 : at] != b"1" else b"2"
            attacker.set_state(stream, 3, state[: at - 1] + digit + state[at:])
        elif edit == "stream column":  # the row moved under the other round's stream
            other = attacker.key(tables.rounds[1])
            attacker.sql(
                f"UPDATE {attacker.events} SET originator_id = ?, originator_version = 999 "
                f"WHERE {attacker.id} = ?",
                (other, nid),
            )
        elif edit == "leaf row":
            attacker.sql(
                "UPDATE ledger_merkle_leaves SET leaf_hash = ? WHERE notification_id = ?",
                (bytes(32), nid),
            )
        elif edit == "leaf row deleted":
            attacker.sql("DELETE FROM ledger_merkle_leaves WHERE notification_id = ?", (nid,))
        elif edit == "an account's topic":  # its whole stream would be taken for a round's
            attacker.set_topic(tables.other, 2, "ledger.domain.round:Round.Voided")
    finally:
        attacker.close()
    if edit == "file after writing":
        written = run.write_archive

        def then_edited(directory: Path, *args: object, **kwargs: object) -> object:
            done = written(directory, *args, **kwargs)  # type: ignore[arg-type]
            events = directory / EVENTS
            events.write_bytes(events.read_bytes().replace(b'"version":2', b'"version":3', 1))
            return done

        monkeypatch.setattr(run, "write_archive", then_edited)
    with pytest.raises(VerificationError, match=said):
        archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    assert ArchivedTable(node.app.tables).counts() == {}
    assert not [p for p in tmp_path.iterdir() if "a1" in p.name]  # no partial archive left
    for round_id in tables.rounds:
        assert node.app.tables.row_by_stream(round_id, 1)[3] is not None  # all still here
    for account in (tables.player, tables.other):
        assert node.app.tables.row_by_stream(account, 1)[3] is not None


def test_rounds_chosen_up_to_another_row_than_the_checkpoints_last_are_refused(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rounds are chosen from the rows up to the id the checkpoint's last
    Merkle leaf row names (one lookup, not a count of the log), which the write
    holds to the row it reads at that position: were it another (the
    checkpointer refuses a leaf row naming a row not in the log, first), nothing
    leaves the store."""
    from ledger.archive import run
    from ledger.errors import VerificationError

    tables = _played(node, 2)
    named = run.last_id_under
    monkeypatch.setattr(run, "last_id_under", lambda t, size: named(t, size) + 1)
    with pytest.raises(VerificationError, match=r"names row \d+, not the row at that position"):
        archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    assert ArchivedTable(node.app.tables).counts() == {}
    assert not [p for p in tmp_path.iterdir() if "a1" in p.name]
    assert all(node.app.tables.row_by_stream(r, 1)[3] is not None for r in tables.rounds)


@pytest.mark.parametrize("edit", [None, "a byte of a middle segment", "a line added"])
def test_events_read_back_a_segment_at_a_time_are_held_to_what_was_written(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, edit: str | None
) -> None:
    """events.jsonl is read back in segments (hashed by several threads): with
    segments of 4 KB, an archive passes whole, and a byte changed in one of
    its middle segments, or a line added, is refused before anything leaves."""
    from ledger.archive import run, write
    from ledger.errors import VerificationError

    tables = _played(node, 2)
    monkeypatch.setattr(write, "SEGMENT", 4096)
    if edit is None:
        done = archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
        assert (done.directory / EVENTS).stat().st_size > 3 * 4096
        assert check_archive(done.directory, node.keyring).events == done.events
        return
    written = run.write_archive

    def then_edited(directory: Path, *args: object, **kwargs: object) -> object:
        done = written(directory, *args, **kwargs)  # type: ignore[arg-type]
        data = bytearray((directory / EVENTS).read_bytes())
        if edit == "a line added":
            data += data[: data.index(b"\n") + 1]
        else:
            at = 2 * 4096 + 100
            data[at] = ord("1") if data[at] != ord("1") else ord("2")
        (directory / EVENTS).write_bytes(bytes(data))
        return done

    monkeypatch.setattr(run, "write_archive", then_edited)
    with pytest.raises(VerificationError, match="does not hold what was written"):
        archive_rounds(node, datetime.now(UTC), tmp_path / "a1")
    assert ArchivedTable(node.app.tables).counts() == {}
    assert all(node.app.tables.row_by_stream(r, 1)[3] is not None for r in tables.rounds)


def test_the_rounds_chosen_from_ranges_of_the_log_read_apart_are_those_of_one_read(
    node: Node,
) -> None:
    """The archive's workers read a range of the log each: wherever the log is cut
    (inside a round, between two, at its ends), the states merged in order are
    those of one read, and so are the rounds chosen, whatever the horizon."""
    from ledger.archive.due import due_rounds, merged, round_states
    from ledger.store.round_rows import last_id_under

    tables = _played(node, 3)
    tables.casino.open_round(request_id="open", table_id=tables.table, dealer="D1")
    node.checkpointer().catch_up()  # (a round still open: not chosen)
    log = node.app.tables
    last = last_id_under(log, log.tail()[0])
    whole = round_states(log, 0, last)
    assert len(whole) == 4 and sum(s.finished for s in whole.values()) == 3
    for cut in range(0, last + 1):
        parts = [round_states(log, 0, cut), round_states(log, cut, last)]
        assert merged(parts) == whole, cut
    now = int(datetime.now(UTC).timestamp() * 1_000_000)
    assert len(due_rounds(whole, now)) == 3
    assert due_rounds(whole, 0) == {}
