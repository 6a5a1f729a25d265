"""`ledger export` and `ledger verify --bundle`: the bundle's records match the
committed JSON Schemas (every payload its event type's), a whole-log bundle
and a one-round bundle verify on their own, and every edit an attacker can
make to a bundle (an envelope byte, a dropped, reordered or altered record, a
swapped checkpoint, a removed key) fails verification naming the record.
Exported from both stores.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import random
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.audit.findings import Findings, Step
from ledger.audit.verify import Level, Sinks, VerifyOptions, verify_log
from ledger.cli.main import main
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Role
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.note import sign_note
from ledger.crypto.signing import InMemorySigner
from ledger.errors import VerificationError
from ledger.export.partial_log import PartialBundleLog
from ledger.export.reader import Bundle
from ledger.export.records import event_line, event_record
from tests.conftest import PASSPHRASE, new_store
from tests.reproducible import reproducible_session
from tests.schemas import schema

Records = list[dict[str, Any]]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


class Session:
    """A simulated store (dice and card tables) and its keys."""

    def __init__(self, store: str, keys: Path) -> None:
        self.store, self.keys = store, keys

    def cli(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
        return run(capsys, "--store", self.store, "--keys", str(self.keys), *argv)


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def session(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Session]:
    base = tmp_path_factory.mktemp(f"export-{request.param}")
    with new_store(request.param, base) as store:
        yield from _session(store, base)


def _session(store: str, base: Path) -> Iterator[Session]:
    patch = pytest.MonkeyPatch()
    patch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    patch.setattr(sys, "stdin", io.StringIO(""))
    try:
        with reproducible_session(5) as seeds:
            code = main(
                ["--store", store, "--keys", str(base / "keys"), "simulate", "--rounds", "8",
                 "--players", "4", "--tables", "1", *seeds]
            )  # fmt: skip
        assert code == 0
        yield Session(store, base / "keys")
    finally:
        patch.undo()


def read_lines(path: Path) -> Records:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write_lines(path: Path, records: Records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def export(session: Session, capsys: pytest.CaptureFixture[str], target: Path, *argv: str) -> Path:
    code, out, err = session.cli(capsys, "export", str(target), *argv)
    assert code == 0, err
    assert out.startswith("exported ")
    return target


@pytest.fixture
def whole(session: Session, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> Path:
    return export(session, capsys, tmp_path / "whole")


def a_round(bundle: Path, *, card: bool) -> str:
    """A round of the bundle that took a bet and was settled, on a card table or a
    dice table: more than three events (opened, the bet, ..., settled), which
    the attacks on a round bundle's third line need."""
    opened = {}
    settled = set()
    bets = set()
    for record in read_lines(bundle / "events.jsonl"):
        if record["type"] == "Round.Opened":
            opened[record["stream"]] = record["payload"]["game"]
        elif record["type"] == "Round.BetPlaced":
            bets.add(record["stream"])
        elif record["type"] == "Round.Settled":
            settled.add(record["stream"])
    return next(
        r for r, v in opened.items() if r in settled & bets and v.startswith("xidach") == card
    )


@pytest.fixture(params=["dice", "cards"])
def one_round(
    request: pytest.FixtureRequest,
    session: Session,
    whole: Path,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> Path:
    round_id = a_round(whole, card=request.param == "cards")
    bundle = export(session, capsys, tmp_path / "round", "--round", round_id)
    # It verifies on its own, wherever it is: nothing but the directory.
    moved = tmp_path / "elsewhere" / "round"
    shutil.move(bundle, moved)
    return moved


def verify(capsys: pytest.CaptureFixture[str], bundle: Path, *argv: str) -> tuple[int, str, str]:
    return run(capsys, "verify", "--bundle", str(bundle), *argv)


def fails(capsys: pytest.CaptureFixture[str], bundle: Path, *expected: str) -> str:
    code, out, err = verify(capsys, bundle)
    assert code == 1, (out, err)
    assert out == ""
    for text in expected:
        assert re.search(text, err), (text, err)
    return err


# The bundle as written.


def test_a_whole_bundle_verifies_at_every_level(
    whole: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = read_lines(whole / "events.jsonl")
    for level in ("integrity", "signatures", "settlement"):
        code, out, err = verify(capsys, whole, "--level", level)
        assert code == 0, err
        assert out.startswith(f"OK (bundle, the whole log): {len(events)} events in ")
        assert f"verified at level {level}" in out
    assert "settlements re-settled with their own game and rules" in out
    assert "RNG card draws recomputed" in out and "RNG dice draws recomputed" in out
    assert "keyring: the bundle's keyring.json" in out
    assert "every checkpoint's root recomputed from the bundle's events" in out
    assert [e["position"] for e in events] == list(range(len(events)))


def test_a_round_bundle_verifies_on_its_own(
    one_round: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = read_lines(one_round / "events.jsonl")
    manifest = json.loads((one_round / "manifest.json").read_text())
    assert {e["stream"] for e in events} == {manifest["selection"]["round"]}
    assert [e["version"] for e in events] == list(range(1, len(events) + 1))
    code, out, err = verify(capsys, one_round)
    assert code == 0, err
    assert out.startswith(f"OK (bundle, round): {len(events)} events")
    assert "1 rounds re-derived" in out and "1 settlements re-settled" in out
    assert "NOT CHECKED here" in out


def test_a_range_bundle_verifies(
    session: Session, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bundle = export(session, capsys, tmp_path / "range", "--from", "5", "--to", "40")
    events = read_lines(bundle / "events.jsonl")
    assert [e["position"] for e in events] == list(range(5, 41))
    code, out, err = verify(capsys, bundle)
    assert code == 0, err
    assert out.startswith("OK (bundle, range): 36 events")


def test_every_record_matches_its_schema(
    whole: Path, one_round: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for bundle in (whole, one_round):
        schema("manifest").validate(json.loads((bundle / "manifest.json").read_text()))
        schema("keyring").validate(json.loads((bundle / "keyring.json").read_text()))
        for name, file in (
            ("event", "events.jsonl"),
            ("checkpoint", "checkpoints.jsonl"),
            ("game", "games.jsonl"),
        ):
            records = read_lines(bundle / file)
            assert records, file
            for record in records:
                schema(name).validate(record)
        payloads = schema("payloads")  # each payload against its event type's schema
        for record in read_lines(bundle / "events.jsonl"):
            payloads.validate(record)
    for record in read_lines(one_round / "proofs.jsonl"):
        schema("proof").validate(record)
    # A record the format does not allow is refused by its schema.
    bad = read_lines(whole / "events.jsonl")[0] | {"stream": "F" * 32}
    with pytest.raises(jsonschema.ValidationError):
        schema("event").validate(bad)
    bet = next(r for r in read_lines(whole / "events.jsonl") if r["type"] == "Round.BetPlaced")
    with pytest.raises(jsonschema.ValidationError):
        schema("payloads").validate(bet | {"payload": {**bet["payload"], "stake": "100"}})


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def test_one_form_for_every_id_and_money_in_minor_units(whole: Path) -> None:
    uuid = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    bare = re.compile(r"(?<![0-9a-f])[0-9a-fA-F]{32}(?![0-9a-f])")
    hyphenated = 0
    for record in read_lines(whole / "events.jsonl"):
        assert ":" not in record["type"]
        assert record["header"]["type"].endswith(":" + record["type"])
        for text in _strings([record["header"], record["payload"]]):
            assert "_type_" not in text and "_data_" not in text
            assert not bare.search(text), text  # no UUID as bare hex
            assert uuid.sub("", text) == text or text == text.lower()
            hyphenated += len(uuid.findall(text))
        for posting in record["payload"].get("postings", []):
            assert type(posting["amount"]) is int
            assert posting["currency"] == record["currency"] or record["type"].startswith(
                "Account.Deposited"
            )
        for money in ("amount", "stake"):
            if money in record["payload"]:
                assert type(record["payload"][money]) is int
                assert re.fullmatch("[A-Z]{3}", record["currency"])
    assert hyphenated > 100


def test_every_game_profile_used_is_exported_as_rules_data(whole: Path) -> None:
    from ledger.plugins.registry import rules_hash

    games = read_lines(whole / "games.jsonl")
    pinned = {
        (r["payload"]["game"], r["payload"]["rules_hash"])
        for r in read_lines(whole / "events.jsonl")
        if r["type"] == "Round.Opened"
    }
    assert {(g["game"], g["rules_hash"]) for g in games} == pinned
    assert {g["game"] for g in games} >= {"taixiu", "xidach"}
    for game in games:
        assert rules_hash(game["rules"]) == game["rules_hash"]


def test_every_stored_checkpoint_is_exported_as_its_note(
    session: Session, whole: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ledger.store.application import LedgerApplication

    keyring = KeyDirectory(session.keys).keyring()
    with LedgerApplication(session.store, keyring=keyring, create=False) as app:
        stored = sorted(app.tables.checkpoint_rows())
    exported = [(c["tree_size"], c["note"]) for c in read_lines(whole / "checkpoints.jsonl")]
    assert exported == stored and stored


# Attacks on a whole-log bundle: each fails naming the record.


def edit_events(bundle: Path, change: Callable[[Records], Records]) -> Records:
    records = change(read_lines(bundle / "events.jsonl"))
    write_lines(bundle / "events.jsonl", records)
    return records


def consistent(record: dict[str, Any], envelope: bytes, position: int | None = None) -> None:
    """Rewrite the record's decoded part from edited envelope bytes (a careful attacker)."""
    fresh = event_record(
        record["position"] if position is None else position, envelope, record["currency"]
    )
    record.clear()
    record.update(fresh)


def test_a_flipped_signature_byte_is_named(whole: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def flip(records: Records) -> Records:
        envelope = bytearray(base64.b64decode(records[7]["envelope"]))
        header_size = int.from_bytes(envelope[4:6], "big")
        envelope[6 + header_size + 3] ^= 1
        consistent(records[7], bytes(envelope))
        return records

    edit_events(whole, flip)
    fails(capsys, whole, r"envelope signature is invalid \(log position 7\)")


def test_a_flipped_payload_byte_is_named(whole: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def flip(records: Records) -> Records:
        envelope = base64.b64decode(records[9]["envelope"])
        edited = envelope.replace(b'"timestamp":', b'"timestamQ":')
        assert edited != envelope
        records[9]["envelope"] = base64.b64encode(edited).decode()
        return records

    edit_events(whole, flip)
    fails(capsys, whole, r"events.jsonl line 10 \(log position 9\)", "disagrees with its envelope")
    # The same edit with the record re-derived: the signed payload hash catches it.
    records = read_lines(whole / "events.jsonl")
    consistent(records[9], base64.b64decode(records[9]["envelope"]))
    write_lines(whole / "events.jsonl", records)
    fails(capsys, whole, r"payload bytes do not match the signed payload hash \(log position 9\)")


def test_a_dropped_event_is_named(whole: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kept = read_lines(whole / "events.jsonl")
    edit_events(whole, lambda records: records[:12] + records[13:])
    fails(capsys, whole, r"events.jsonl line 13 \(log position 13\)", "expected log position 12")
    # Renumbered, the gap is still found (a stream's chain, a checkpoint's root or
    # size); only signed checkpoints can locate it, so the error names the first
    # position where the signed data and the events part.
    records = kept[:12] + kept[13:]
    for position, record in enumerate(records):
        record["position"] = position
    write_lines(whole / "events.jsonl", records)
    fails(capsys, whole, r"\(log position \d+\)")


def test_reordered_events_are_named(whole: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def swap(records: Records) -> Records:
        records[20], records[21] = records[21], records[20]
        return records

    records = edit_events(whole, swap)
    fails(capsys, whole, r"events.jsonl line 21 \(log position 21\)", "expected log position 20")
    records[20]["position"], records[21]["position"] = 20, 21
    write_lines(whole / "events.jsonl", records)
    # Renumbered: a chain or the checkpoint's root catches it (see the dropped event).
    fails(capsys, whole, r"\(log position \d+\)")


def test_a_decoded_payload_that_disagrees_with_its_bytes_is_named(
    whole: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def inflate(records: Records) -> Records:
        target = next(r for r in records if r["type"] == "Round.BetPlaced")
        target["payload"]["stake"] += 100
        return records

    records = edit_events(whole, inflate)
    line = next(i for i, r in enumerate(records, 1) if r["type"] == "Round.BetPlaced")
    fails(
        capsys, whole, rf"events.jsonl line {line} ", r"its 'payload' disagrees with its envelope"
    )


def test_a_lied_currency_is_named(whole: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def relabel(records: Records) -> Records:
        target = next(r for r in records if r["type"] == "Round.Settled")
        target["currency"] = "USD" if target["currency"] != "USD" else "EUR"
        return records

    edit_events(whole, relabel)
    fails(capsys, whole, "currency '(USD|EUR)' is not its stream's")


def test_a_swapped_checkpoint_is_named(
    session: Session, whole: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = read_lines(whole / "checkpoints.jsonl")
    checkpoint = Checkpoint.from_note(records[-1]["note"])
    # A checkpoint validly signed with the store's own checkpoint key, over a
    # root that is not the log's: what a thief of that key could swap in.
    signer = KeyDirectory(session.keys).signer(Role.CHECKPOINT, PASSPHRASE)
    forged = Checkpoint.sign(
        origin=checkpoint.origin,
        size=checkpoint.size,
        root=bytes(32),
        signer=signer,
        now=checkpoint.issued_at,
    )
    records[-1]["note"] = forged.to_note()
    write_lines(whole / "checkpoints.jsonl", records)
    fails(capsys, whole, r"log position")
    # A note edited without the key: its signature fails, named.
    records[-1]["note"] = checkpoint.to_note().replace(
        f"\n{checkpoint.size}\n", f"\n{checkpoint.size - 1}\n", 1
    )
    records[-1]["tree_size"] = checkpoint.size - 1
    write_lines(whole / "checkpoints.jsonl", records)
    fails(capsys, whole, rf"checkpoint of size {checkpoint.size - 1}", "bad signature")


def test_a_removed_key_is_named(whole: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keyring = json.loads((whole / "keyring.json").read_text())
    keyring["keys"] = [k for k in keyring["keys"] if k["role"] != "ledger-node"]
    (whole / "keyring.json").write_text(json.dumps(keyring))
    fails(capsys, whole, r"not in the keyring \(log position 0\)")


def test_altered_rules_data_is_named(whole: Path, capsys: pytest.CaptureFixture[str]) -> None:
    games = read_lines(whole / "games.jsonl")
    games[0]["rules"]["tampered"] = True
    write_lines(whole / "games.jsonl", games)
    fails(capsys, whole, "games.jsonl line 1", "do not hash to its rules hash")
    write_lines(whole / "games.jsonl", games[1:])
    fails(capsys, whole, "games.jsonl: the rules of .* are missing")


def test_a_truncated_bundle_is_named(whole: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The tail cut off together with the checkpoints that covered it: the
    # manifest's count (and, had they been kept, the checkpoints) say so.
    edit_events(whole, lambda records: records[:-3])
    (whole / "checkpoints.jsonl").write_text("")
    fails(capsys, whole, "manifest.json says .* events but events.jsonl holds")


# Attacks on a one-round bundle.


def test_round_bundle_attacks_are_named(
    one_round: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pristine = tmp_path / "pristine"
    shutil.copytree(one_round, pristine)

    def fresh() -> Path:
        shutil.rmtree(one_round)
        shutil.copytree(pristine, one_round)
        return one_round

    records = read_lines(fresh() / "events.jsonl")
    first = records[0]["position"]

    envelope = bytearray(base64.b64decode(records[2]["envelope"]))
    envelope[-2] ^= 1  # the payload's last bytes, re-derived consistently
    try:
        consistent(records[2], bytes(envelope))
    except Exception:
        envelope[6 + int.from_bytes(envelope[4:6], "big")] ^= 1  # else the signature
        envelope[-2] ^= 1
        consistent(records[2], bytes(envelope))
    write_lines(one_round / "events.jsonl", records)
    fails(capsys, one_round, r"events.jsonl line 3 ", "(payload|signature)")

    edit_events(fresh(), lambda r: r[:2] + r[3:])
    fails(capsys, one_round, "events.jsonl line 3 ", "no inclusion proof")
    proofs = read_lines(one_round / "proofs.jsonl")
    write_lines(one_round / "proofs.jsonl", proofs[:2] + proofs[3:])
    fails(capsys, one_round, "events.jsonl line 3 ", "stream jumps from version 2 to 4")

    edit_events(fresh(), lambda r: [r[1], r[0], *r[2:]])
    fails(capsys, one_round, "events.jsonl line 1 ", "no inclusion proof")

    edit_events(fresh(), lambda r: [{**r[0], "position": first + 1}, *r[1:]])
    fails(capsys, one_round, "events.jsonl line 1 ", "disagrees|no inclusion proof")

    def lie(r: Records) -> Records:
        r[0]["payload"]["rules_hash"] = "0" * 64
        return r

    edit_events(fresh(), lie)
    fails(capsys, one_round, "events.jsonl line 1 ", "its 'payload' disagrees")

    fresh()
    checkpoints = read_lines(one_round / "checkpoints.jsonl")
    note = checkpoints[-1]["note"]
    root = note.split("\n")[2]
    checkpoints[-1]["note"] = note.replace(root, base64.b64encode(bytes(32)).decode())
    write_lines(one_round / "checkpoints.jsonl", checkpoints)
    fails(capsys, one_round, "checkpoints.jsonl line", "bad signature")

    fresh()
    keyring = json.loads((one_round / "keyring.json").read_text())
    keyring["keys"] = [k for k in keyring["keys"] if k["role"] != "ledger-node"]
    (one_round / "keyring.json").write_text(json.dumps(keyring))
    fails(capsys, one_round, "events.jsonl line 1 ", "not in the keyring")

    fresh()
    proofs = read_lines(one_round / "proofs.jsonl")
    proofs[1]["proof"][0] = base64.b64encode(bytes(32)).decode()
    write_lines(one_round / "proofs.jsonl", proofs)
    fails(capsys, one_round, "events.jsonl line 2 ", "[Ii]nclusion|root")


# Bad input.


def test_bad_export_requests_are_refused_writing_nothing(
    session: Session, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "x").write_text("x")
    cases = [
        ([str(occupied)], "not an empty directory"),
        ([str(tmp_path / "a"), "--round", "nope"], "is not a UUID"),
        ([str(tmp_path / "b"), "--round", "6b8e7ad6-0557-49f3-a93e-7397558f0637"], "no round"),
        ([str(tmp_path / "c"), "--from", "9", "--to", "3"], "after --to"),
        ([str(tmp_path / "d"), "--from", "99999999"], "not in the log"),
        (
            [str(tmp_path / "e"), "--round", "6b8e7ad6-0557-49f3-a93e-7397558f0637", "--to", "3"],
            "cannot be combined",
        ),
    ]
    for argv, message in cases:
        code, _, err = session.cli(capsys, "export", *argv)
        assert code == 2, (argv, err)
        assert message in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["occupied"]  # nothing written
    code, _, err = verify(capsys, tmp_path / "missing")
    assert code == 2 and "is not a directory" in err


# The writer's fast path against the reference decoding.


@pytest.mark.parametrize(
    "payload",
    [
        b'{"timestamp":{"_type_":"datetime_iso","_data_":"2026-01-01T00:00:00+00:00"},'
        b'"originator_topic":"a.b:C","id":{"_type_":"uuid_hex","_data_":'
        b'"f0e2179dfed94294b03e3840ec3382ac"},"n":[1,{"_type_":"decimal_str","_data_":"1.5"}]}',
        # a string that looks like a wrapper, escaped inside JSON text
        b'{"note":"{\\"_type_\\":\\"uuid_hex\\",\\"_data_\\":\\"x\\"}","owner":"Nguy\xe1\xbb\x85n"}',
        # originator_topic first, and nested: only the top-level one goes
        b'{"originator_topic":"a:B","inner":{"originator_topic":"keep"},"amount":5}',
        b'{"a":1,"originator_topic":"a:B","inner":{"originator_topic":"keep"}}',
        b'{"id":{"_type_":"uuid_hex","_data_":"F0E2179DFED94294B03E3840EC3382AC"}}',
    ],
)
def test_the_fast_event_line_is_the_reference_record(payload: bytes) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ledger.crypto.envelope import seal
    from ledger.crypto.signing import InMemorySigner
    from ledger.export.records import event_line

    signer = InMemorySigner(Ed25519PrivateKey.generate(), Role.LEDGER_NODE)
    state, _ = seal(
        stream="f0e2179d-fed9-4294-b03e-3840ec3382ac",
        version=2,
        event_type="ledger.domain.account:Account.Debited",
        prev_hash=bytes(32),
        payload=payload,
        signer=signer,
        signed_at=1,
    )
    line = event_line(4, state, "EUR")
    assert line.endswith("}\n") and line.count("\n") == 1
    assert json.loads(line) == event_record(4, state, "EUR")


def test_an_unknown_stored_type_is_refused_by_both_paths() -> None:
    from ledger.export.records import decode_payload

    with pytest.raises(ValueError, match="unknown stored type"):
        decode_payload(b'{"x":{"_type_":"pickle","_data_":"..."}}')


def test_a_whole_bundle_is_checked_against_a_kept_checkpoint(
    whole: Path, one_round: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kept = tmp_path / "kept.txt"
    kept.write_text(read_lines(whole / "checkpoints.jsonl")[0]["note"])
    code, out, err = verify(capsys, whole, "--trusted", str(kept))
    assert code == 0, err
    assert "consistent with the kept checkpoint of size" in out
    code, _, err = verify(capsys, one_round, "--trusted", str(kept))
    assert code == 2 and "--trusted needs a whole-log bundle" in err


def test_a_bundle_as_written_is_read_by_the_fast_path(
    whole: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines byte-identical to what the writer makes skip the reference decoding;
    a re-serialized line (same JSON value) takes it, and still verifies."""
    import ledger.export.reader as reader

    calls = []
    reference = reader.event_record

    def counted(*args: Any) -> dict[str, Any]:
        calls.append(args[0])
        return reference(*args)

    monkeypatch.setattr(reader, "event_record", counted)
    code, _, err = verify(capsys, whole, "--level", "integrity")
    assert code == 0, err
    assert calls == []
    records = read_lines(whole / "events.jsonl")
    write_lines(whole / "events.jsonl", records)  # json.dumps' spacing: not byte-identical
    code, _, err = verify(capsys, whole, "--level", "integrity")
    assert code == 0, err
    assert calls == list(range(len(records)))


def test_a_line_as_written_is_read_without_parsing_it_and_as_the_reference_reads_it(
    whole: Path,
) -> None:
    """`canonical_event` renders a line again from its position, envelope and
    currency and takes it only if it is byte for byte the line: the same event
    as the full check gives; anything else is left to the full check."""
    from ledger.export.bundle_log import _line_event
    from ledger.export.reader import canonical_event, checked_event

    raws = (whole / "events.jsonl").read_bytes().splitlines(keepends=True)
    for number, raw in enumerate(raws, 1):
        fast = canonical_event(raw, number)
        assert fast is not None, raw
        event, currency = checked_event(raw.decode(), json.loads(raw), number)
        assert fast[1] == currency
        assert fast[0] == event and fast[0].payload == json.loads(raw)["payload"]
    record = json.loads(raws[3])
    respaced = json.dumps(record).encode() + b"\n"  # the same JSON value
    lying = {**record, "payload": {**record["payload"], "forged": 1}}
    envelope = base64.b64decode(record["envelope"])
    flipped = {**record, "envelope": base64.b64encode(envelope[:-2] + b"}}").decode()}
    for line in (respaced, json.dumps(lying, separators=(",", ":")).encode() + b"\n"):
        assert canonical_event(line, 4) is None
    assert canonical_event(json.dumps(flipped, separators=(",", ":")).encode() + b"\n", 4) is None
    assert canonical_event(raws[3].replace(b'"position":3', b'"position":03'), 4) is None
    # An envelope in base64 that decodes to it but is not its canonical
    # spelling: a last partial group with an unused bit set.
    number, raw = next((n, r) for n, r in enumerate(raws, 1) if b'=","header":' in r)
    text = json.loads(raw)["envelope"]
    bare = text.rstrip("=")
    respelt = bare[:-1] + ALPHABET[ALPHABET.index(bare[-1]) ^ 1] + text[len(bare) :]
    assert base64.b64decode(respelt) == base64.b64decode(text) and respelt != text
    assert canonical_event(raw, number) is not None
    assert canonical_event(raw.replace(text.encode(), respelt.encode()), number) is None
    # Any one byte changed: what is still taken is exactly the line the ledger
    # writes for the envelope it decodes to (a changed signature byte, say),
    # and a line the full check reads is a finding, never an uncaught error
    # (a header left without its "type", say).
    rng = random.Random(18)
    for position, raw in enumerate(raws[:8]):
        for _ in range(300):
            at = rng.randrange(len(raw))
            changed = raw[:at] + bytes([rng.choice(MUTATIONS)]) + raw[at + 1 :]
            fast = canonical_event(changed, position + 1)
            if fast is not None:
                event, currency = fast
                assert event_line(event.position, event.envelope, currency).encode() == changed
            with contextlib.suppress(VerificationError):
                _line_event(changed, position + 1, position)


def test_a_payload_value_read_plainly_is_the_decoded_payloads(whole: Path) -> None:
    """`BundleEvent.payload_value` (a scalar read with the plain JSON parser)
    gives what the decoded payload holds, for every key of every event, and
    falls back to decoding for a value that is a stored wrapper."""
    from ledger.crypto.envelope import ENVELOPE_PREFIX, MAGIC
    from ledger.export.reader import BundleEvent, canonical_event

    def fresh(event: BundleEvent) -> BundleEvent:  # nothing decoded or cached yet
        return BundleEvent(*(getattr(event, f) for f in ("position", "stream", "version")),
                           event.topic, event.envelope, event.label)  # fmt: skip

    raws = (whole / "events.jsonl").read_bytes().splitlines(keepends=True)
    for number, raw in enumerate(raws, 1):
        found = canonical_event(raw, number)
        assert found is not None
        event = found[0]
        for key in [*event.payload, "currency", "game", "rules_hash", "absent"]:
            assert fresh(event).payload_value(key) == event.payload.get(key), key
    header = b'{"stream":"s","type":"t","version":1}'
    payload = b'{"currency":{"_type_":"decimal_str","_data_":"VND"},"n":2,"l":[1]}'
    state = ENVELOPE_PREFIX.pack(MAGIC, len(header)) + header + bytes(64) + payload
    event = BundleEvent(0, "s", 1, "t", state, "line 1")
    assert event.payload_value("currency") == "VND"  # unwrapped, as `payload` has it
    assert event.payload_value("n") == 2 and event.payload_value("l") == [1]


ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
MUTATIONS = b' "+,/0159:={}AQZaz\\\n\x00\xff'


# A range bundle holds every position of its range (issue 16).


def test_a_range_bundle_missing_an_event_and_its_proof_fails(
    session: Session, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bundle = export(session, capsys, tmp_path / "range", "--from", "5", "--to", "40")
    code, out, err = verify(capsys, bundle)
    assert code == 0, err
    assert "every log position from 5 to 40 is here, none missing" in out
    events = read_lines(bundle / "events.jsonl")
    proofs = read_lines(bundle / "proofs.jsonl")
    manifest = json.loads((bundle / "manifest.json").read_text())
    # One event from the middle, with its proof, and the manifest's count mended.
    write_lines(bundle / "events.jsonl", [e for e in events if e["position"] != 20])
    write_lines(bundle / "proofs.jsonl", [p for p in proofs if p["position"] != 20])
    (bundle / "manifest.json").write_text(json.dumps({**manifest, "events": 35}))
    fails(capsys, bundle, "after log position 19: the range lacks log positions 20 ")
    # The last one: the manifest still states the range it was exported for.
    write_lines(bundle / "events.jsonl", events[:-1])
    write_lines(bundle / "proofs.jsonl", proofs[:-1])
    fails(capsys, bundle, r"the range is log positions 5\.\.40 .* positions 40 are missing")
    # ...and a manifest rewritten to hide it says the range it states, no more.
    selection = {**manifest["selection"], "to": 39}
    (bundle / "manifest.json").write_text(
        json.dumps({**manifest, "events": 35, "last_position": 39, "selection": selection})
    )
    code, out, err = verify(capsys, bundle)
    assert code == 0, err
    assert "every log position from 5 to 39 is here" in out


# Checkpoints carrying other signers' lines (C2SP signed notes, issue 16).


def witness_line(text: str, name: str = "witness.example") -> str:
    """A signature line by a key the auditor does not know (a witness's)."""
    witness = InMemorySigner(Ed25519PrivateKey.generate(), Role.CHECKPOINT, name)
    return sign_note(text, name, witness.public_key, witness).rsplit("\n\n", 1)[1]


def claiming_line(checkpoint: Checkpoint, *, name: str, keep_hash: bool) -> str:
    """A line naming the log's key (its name, or its key hash) whose signature is not its."""
    assert checkpoint.key_hash is not None
    hashed = checkpoint.key_hash if keep_hash else b"\x00\x01\x02\x03"
    blob = base64.b64encode(hashed + bytes(64)).decode()
    return f"\u2014 {name} {blob}\n"


def test_checkpoints_with_unknown_signers_lines_verify_and_claims_of_the_log_key_fail(
    session: Session, whole: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    records = read_lines(whole / "checkpoints.jsonl")
    note = records[-1]["note"]
    checkpoint = Checkpoint.from_note(note)
    cosigned = note + witness_line(checkpoint.text)
    kept = tmp_path / "kept.txt"
    kept.write_text(cosigned)
    # Kept: against the store and against the bundle.
    code, out, err = session.cli(capsys, "verify", "--level", "integrity", "--trusted", str(kept))
    assert code == 0, err
    assert f"consistent with the kept checkpoint of size {checkpoint.size}" in out
    code, out, err = verify(capsys, whole, "--level", "integrity", "--trusted", str(kept))
    assert code == 0, err
    # Bundled: every checkpoint of the bundle carrying a witness's line.
    for record in records:
        record["note"] += witness_line(Checkpoint.from_note(record["note"]).text)
    write_lines(whole / "checkpoints.jsonl", records)
    code, out, err = verify(capsys, whole, "--level", "integrity")
    assert code == 0, err
    # A line claiming the log key's name, or its key hash, must verify.
    for claim in (
        claiming_line(checkpoint, name=checkpoint.key_name, keep_hash=False),
        claiming_line(checkpoint, name="someone-else", keep_hash=True),
    ):
        kept.write_text(note + claim)
        code, _, err = session.cli(capsys, "verify", "--level", "integrity", "--trusted", str(kept))
        assert code == 1, err
        assert "a second signature line" in err and "claims checkpoint key checkpoint" in err
        records[-1]["note"] = note + claim
        write_lines(whole / "checkpoints.jsonl", records)
        fails(capsys, whole, "a second signature line", "does not verify")


def test_a_round_bundle_runs_verify_s_checklist_and_lists_every_finding(
    one_round: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A partial bundle is a log source (issue 39, item 1): the same `Verifier`
    steps run on it, so with a findings sink every finding is listed, each under
    its step, where the bundle's own verifier once stopped at the first."""
    records = read_lines(one_round / "events.jsonl")
    envelope = bytearray(base64.b64decode(records[2]["envelope"]))
    envelope[6 + int.from_bytes(envelope[4:6], "big")] ^= 1  # line 3: its signature
    records[2]["envelope"] = base64.b64encode(bytes(envelope)).decode()
    write_lines(one_round / "events.jsonl", records)
    proofs = read_lines(one_round / "proofs.jsonl")
    proofs[1]["proof"][0] = base64.b64encode(bytes(32)).decode()  # line 2: its inclusion proof
    write_lines(one_round / "proofs.jsonl", proofs)
    bundle = Bundle(one_round)
    keyring = bundle.keyring()
    found = Findings()
    log = PartialBundleLog(bundle, keyring)
    verify_log(log, keyring, VerifyOptions(level=Level.SIGNATURES), Sinks(findings=found))
    listed = {(f.step, f.position) for f in found.items}
    assert (Step.ENVELOPES, records[2]["position"]) in listed
    assert (Step.MERKLE, records[1]["position"]) in listed
    assert "events.jsonl line 3 " in next(f.text for f in found.items if f.step is Step.ENVELOPES)
    # ...and `verify --bundle` names the first, as it always did.
    fails(capsys, one_round, "events.jsonl line 2 ", "[Ii]nclusion|root")
