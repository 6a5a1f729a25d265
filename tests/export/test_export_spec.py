"""docs/export.md and docs/schemas/payloads.json held to the code (issue 18).

What an outside programmer verifies from must be what the ledger does: the
fixed stream ids, the exact bytes of every signed fact, the canonical JSON
rule, the RNG's dice and deck known answers and the example signature are
recomputed here with the ledger's own code; every event type the ledger
defines has a payload schema naming exactly its fields (and, for an older
version stored under older names, exactly those `ledger.domain.stored_names`
maps to them); and every record of real exports (a store with every kind of
event, the stores of releases 0.1 and 0.2 and of the code before the game's
rename) validates against those schemas. The times are in the forms the
conventions say.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from eventsourcing.domain import Aggregate

from ledger.crypto.actor import sign_fact
from ledger.crypto.canonical import ACTOR_FACT_DOMAIN, canonical
from ledger.crypto.keys import Role, to_micros
from ledger.crypto.signing import InMemorySigner
from ledger.domain.account import Account
from ledger.domain.audit_trail import AUDIT_TRAIL_ID, AuditTrail, verification_fact
from ledger.domain.erasures import Erasures
from ledger.domain.game_rules import GAME_RULES_ID, GameRules
from ledger.domain.game_table import GameTable
from ledger.domain.key_registry import KEY_REGISTRY_ID, KeyRegistry, revocation_fact
from ledger.domain.request import REQUEST_NAMESPACE, Request, request_uuid
from ledger.domain.round import Round
from ledger.domain.signed_facts import (
    action_fact,
    correction_fact,
    fault_fact,
    operator_fact,
    throw_fact,
)
from ledger.domain.stored_names import STORED_AS
from ledger.rng.deck import shuffle_trace
from ledger.rng.dice import commitment, throw_trace
from tests.schemas import schema

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "export.md"
PAYLOADS = ROOT / "docs" / "schemas" / "payloads.json"
BUILDER = Path(__file__).resolve().parents[1] / "independent_store.py"
LEDGER = Path(sys.executable).parent / "ledger"
RELEASES = Path(__file__).resolve().parents[1] / "data"
OPENED = "ledger.domain.round:Round.Opened"
OLD_STORES = {"0.1": "release-0.1-store", "0.2": "release-0.2-store", "v2": "pre-rename-store"}
AGGREGATES = (Account, GameTable, Round, Request, KeyRegistry, AuditTrail, Erasures, GameRules)


def section(title: str) -> str:
    """The text of docs/export.md's section `## title`, up to the next one."""
    text = DOC.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def table_rows(text: str) -> list[list[str]]:
    """The cells of a Markdown table's body rows, backticks stripped."""
    rows = []
    for line in text.splitlines():
        if line.startswith("|") and not line.startswith("|---"):
            rows.append([cell.strip().strip("`") for cell in line.strip("|").split("|")])
    return rows[1:] if rows else rows


def payload_schema() -> jsonschema.protocols.Validator:
    return schema("payloads")


# The fixed ids.


def test_the_documented_stream_ids_are_the_ledgers() -> None:
    rows = {row[0]: row[1] for row in table_rows(section("Streams and events"))}
    assert rows["the key registry"] == str(KEY_REGISTRY_ID)
    assert rows["the audit trail"] == str(AUDIT_TRAIL_ID)
    assert rows["the rules register"] == str(GAME_RULES_ID)
    assert str(REQUEST_NAMESPACE) in rows["a request"]
    # ...and the names they are derived from, as the text says.
    text = section("Streams and events")
    assert str(uuid.NAMESPACE_URL) in text
    for name, fixed in (
        ("casino-ledger/key-registry", KEY_REGISTRY_ID),
        ("casino-ledger/audit-trail", AUDIT_TRAIL_ID),
        ("casino-ledger/request", REQUEST_NAMESPACE),
    ):
        assert f"`{name}`" in text and uuid.uuid5(uuid.NAMESPACE_URL, name) == fixed
    assert request_uuid("sim-1") == uuid.uuid5(REQUEST_NAMESPACE, "sim-1")


# Signed facts.


def documented_facts() -> list[bytes]:
    block = re.search(r"```text\n(casino-ledger/actor-fact.*?)```", section("Signed facts"), re.S)
    assert block, "no block of signed facts"
    return [line.replace("\\n", "\n", 1).encode() for line in block.group(1).splitlines()]


def ledger_fact(fact: dict[str, Any]) -> dict[str, Any]:
    """The same fact built by the ledger's own function for its kind."""
    kind = fact.get("action", fact.get("kind"))
    if kind == "act":
        return action_fact(
            fact["round"], fact["step"], fact["actor"], fact["move"], fact["args"], fact["drawn"]
        )
    if kind == "throw":
        return throw_fact(fact["round"], fact["throw"], fact["outcome"])
    if kind == "fault":
        return fault_fact(fact["round"], fact["throw"], fact["reason"])
    if kind in ("void", "resume"):
        return operator_fact(kind, fact["round"], fact["reason"])
    if kind == "correct":
        return correction_fact(
            fact["round"], fact["wrong"], fact["right"], fact["reason"], fact.get("step")
        )
    assert kind == "key-revoked", kind
    return revocation_fact(fact["key_id"], fact["reason"], fact["revoked_at"])


def test_every_documented_fact_is_the_bytes_the_ledger_signs() -> None:
    kinds = set()
    for signed in documented_facts():
        prefix, _, body = signed.partition(b"\n")
        assert prefix + b"\n" == ACTOR_FACT_DOMAIN
        fact = json.loads(body)
        assert ACTOR_FACT_DOMAIN + canonical(ledger_fact(fact)) == signed
        kinds.add((fact.get("action", fact.get("kind")), "step" in fact))
    assert {kind for kind, _ in kinds} == {
        "act", "throw", "fault", "void", "resume", "correct", "key-revoked"
    }  # fmt: skip
    assert ("correct", True) in kinds and ("correct", False) in kinds
    # The auditor's fact: the run with its kind, as the table says.
    run = {"level": "settlement", "result": "passed", "verified_at": 5}
    assert verification_fact(run) == {"kind": "verification-run", **run}


def doc_canonical(value: Any) -> bytes:
    """Canonical JSON as the conventions spell it in Python."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@pytest.mark.parametrize(
    "value",
    [
        {"reason": "lá bài bị lật", "b": [1, -2, 2**53 - 1], "a": None, "t": True},
        {"reason": 'a "quote", a \\ and \x00\x1f\n\t\r\b\f controls', "slash": "a/b"},
        {"nested": {"z": {}, "y": [], "x": [{"b": 1, "a": 2}]}, "emoji": "đ ₫ 🎲"},
        {"round": "6b8e7ad6-0557-49f3-a93e-7397558f0637", "\u00e9": 1, "e": 2, "z": 3},
    ],
)
def test_the_documented_canonical_json_is_the_ledgers(value: dict[str, Any]) -> None:
    import rfc8785

    assert canonical(value) == doc_canonical(value) == rfc8785.dumps(value)
    assert 'sort_keys=True, separators=(",", ":"),\n  ensure_ascii=False' in section("Conventions")


def test_the_example_signature_is_the_ledgers() -> None:
    """The Known answers' device signature: signed by the ledger with the
    published example key (Ed25519 is deterministic: the same bytes)."""
    code = section("Known answers")
    private = Ed25519PrivateKey.from_private_bytes(bytes([7]) * 32)
    signer = InMemorySigner(private, Role.DEALER_DEVICE, "example")
    fact = action_fact("6b8e7ad6-0557-49f3-a93e-7397558f0637", 3, "seat:2", "hit", {}, [33])
    signed = sign_fact(signer, fact, Role.DEALER_DEVICE)
    assert f'"key_id": "{signed["key_id"]}"' in code
    assert f'"signature": "{signed["signature"]}"' in code
    public = base64.b64encode(private.public_key().public_bytes_raw()).decode()
    assert f'base64.b64decode("{public}")' in code
    assert documented_facts()[0] == ACTOR_FACT_DOMAIN + canonical(fact)


# Randomness.


def test_the_documented_dice_are_the_ledgers() -> None:
    text = section("Known answers")
    dice_table = text[text.index("| seed | round id | counter |") : text.index("Decks:")]
    rows = table_rows(dice_table)
    assert len(rows) >= 5
    for seed, round_id, counter, read, dice in rows:
        trace = throw_trace(bytes.fromhex(seed), round_id, int(counter))
        assert trace.bytes_read.hex() == read
        assert list(trace.dice) == [int(d) for d in dice.split(", ")]
    assert any(len(read) > 6 for _, _, _, read, _ in rows)  # a rejected byte shown
    assert "66687aad" in text and commitment(bytes(32)).startswith("66687aad")


def test_the_documented_decks_are_the_ledgers() -> None:
    text = section("Known answers")
    deck_table = text[text.index("| seed | round id | bytes read | deck |") :]
    rows = table_rows(deck_table.split("\n\n")[0])
    assert len(rows) >= 2
    for seed, round_id, read, deck in rows:
        trace = shuffle_trace(bytes.fromhex(seed), round_id)
        assert trace.bytes_read == int(read)
        assert list(trace.deck) == [int(c) for c in deck.split(", ")]


def test_the_card_encoding_is_the_games() -> None:
    from ledger_xidach.hands import rank

    text = section("Randomness")
    assert "the rank is *c* div 4 + 1" in text and "the suit *c* mod 4" in text
    assert [rank(c) for c in (0, 3, 36, 39, 40, 51)] == [1, 1, 10, 10, 11, 13]


# The payload schemas.


def event_types() -> dict[str, type]:
    """Every event type the ledger writes, by its stable name."""
    found = {}
    for aggregate in AGGREGATES:
        classes = {
            name: value
            for name, value in vars(aggregate).items()
            if isinstance(value, type) and issubclass(value, Aggregate.Event) and name != "Event"
        }
        opened_otherwise = any(
            issubclass(value, Aggregate.Created) and name != "Created"
            for name, value in classes.items()
        )
        for name, value in classes.items():
            if name == "Created" and opened_otherwise:
                continue  # the generic base its own creation event replaces
            found[f"{aggregate.__name__}.{name}"] = value
    return found


def fields_of(event_class: type) -> set[str]:
    base: set[str] = set()
    for cls in Aggregate.Event.__mro__:
        base |= set(getattr(cls, "__annotations__", {}))
    names: set[str] = set()
    for cls in event_class.__mro__:
        names |= set(getattr(cls, "__annotations__", {}))
    return names - base - {"class_version", "originator_topic"}  # left out of records


def test_every_event_type_has_a_schema_of_exactly_its_fields() -> None:
    schema = json.loads(PAYLOADS.read_text())
    types = event_types()
    assert len(types) == 32  # (GameRules.Created and GameRules.RulesRecorded the 31st, 32nd)
    assert set(schema["properties"]["type"]["enum"]) == set(types)
    for name, event_class in types.items():
        current, *older = schema["$defs"][name].get("oneOf", [schema["$defs"][name]])
        version = getattr(event_class, "class_version", 1)
        properties = set(current["properties"])
        assert properties - {"timestamp", "class_version"} == fields_of(event_class), name
        assert ("class_version" in properties) == (version > 1)
        for alternative in (current, *older):
            assert "timestamp" in alternative["required"]
            assert alternative["additionalProperties"] is False
        # An older version under older names: exactly the fields they are now.
        topic = f"{event_class.__module__}:{event_class.__qualname__}"
        assert bool(older) == any(t == topic for t, _ in STORED_AS), name
        for alternative in older:
            stored = alternative["properties"]["class_version"]["const"]
            renamed = STORED_AS[(topic, stored)]
            now = {renamed.get(p, p) for p in alternative["properties"]}
            assert now - {"timestamp", "class_version"} == fields_of(event_class), name
            assert current["properties"]["class_version"] == {"const": version}
        assert f"`{name}`" in section("Streams and events"), name  # documented too


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Exports of a store with every kind of event, and of releases 0.1 and 0.2."""
    where = tmp_path_factory.mktemp("spec")
    env = os.environ | {"LEDGER_PASSPHRASE": "spec", "LEDGER_PROGRESS_INTERVAL": "off"}

    def run(*argv: str) -> None:
        done = subprocess.run(argv, cwd=where, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr

    store = f"sqlite:///{where / 'ledger.db'}"
    run(sys.executable, str(BUILDER), store, str(where / "keys"))
    run(str(LEDGER), "--store", store, "--keys", str(where / "keys"), "export", "every")
    found = {"every": where / "every"}
    for release, store in OLD_STORES.items():
        copy = where / f"release-{release}"
        shutil.copytree(RELEASES / store, copy)
        run(str(LEDGER), "--store", f"sqlite:///{copy / 'ledger.db'}", "--keys",
            str(copy / "keys"), "export", f"bundle-{release}")  # fmt: skip
        found[release] = where / f"bundle-{release}"
    return found


def records(bundle: Path) -> Iterator[dict[str, Any]]:
    with (bundle / "events.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            yield json.loads(line)


def test_every_record_of_real_exports_validates_against_its_payload_schema(
    bundles: dict[str, Path],
) -> None:
    validator = payload_schema()
    seen: set[str] = set()
    for bundle in bundles.values():
        for record in records(bundle):
            validator.validate(record)
            seen.add(record["type"])
    # Every type the ledger writes occurs but one: betting reopened after a
    # faulty draw in a round of settlement API 1 (no store of those has one).
    assert set(event_types()) - seen == {"Round.BettingReopened"}
    # A payload the format does not allow is refused by its type's schema.
    opened = next(r for r in records(bundles["every"]) if r["type"] == "Round.Opened")
    older = {now: stored for stored, now in STORED_AS[(OPENED, 2)].items()}
    for bad in (
        {**opened["payload"], "seed_id": 7},
        {older.get(k, k): v for k, v in opened["payload"].items()},  # older names, version 3
        {k: v for k, v in opened["payload"].items() if k != "code_hash"},
        {**opened["payload"], "extra": 1},
    ):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate({**opened, "payload": bad})
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**opened, "type": "Round.Unknown"})


def test_an_unwritten_type_validates_as_the_ledger_would_write_it() -> None:
    """Round.BettingReopened, which no export here holds: its payload as the
    ledger's own mapper and the export format make it."""
    from eventsourcing.persistence import Mapper

    from ledger.audit.log.log_events import ledger_transcoder
    from ledger.export.records import decode_payload

    event = Round.BettingReopened(
        originator_id=uuid.uuid4(),
        originator_version=3,
        timestamp=datetime.fromisoformat("2026-11-30T20:00:00+00:00"),
        reason="faulty throw: stacked dice",
    )
    stored = Mapper(transcoder=ledger_transcoder()).to_stored_event(event)
    payload = decode_payload(stored.state)
    payload_schema().validate({"type": "Round.BettingReopened", "payload": payload})


# The time formats, as the conventions state them.

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?\+00:00$")


def test_times_are_integer_micros_where_signed_and_iso_text_elsewhere(
    bundles: dict[str, Path],
) -> None:
    bundle = bundles["every"]
    keyring = json.loads((bundle / "keyring.json").read_text())["keys"]
    keys = {k["key_id"]: k for k in keyring}
    for key in keyring:
        for name in ("not_before", "not_after", "revoked_at"):
            assert key.get(name) is None or ISO.match(key[name])
    revoked = runs = 0
    for record in records(bundle):
        assert type(record["header"]["signed_at"]) is int
        payload = record["payload"]
        assert ISO.match(payload["timestamp"]), payload["timestamp"]
        if record["type"] == "KeyRegistry.KeyRevoked":
            assert record["stream"] == str(KEY_REGISTRY_ID)
            at = payload["revoked_at"]
            assert type(at) is int and at <= record["header"]["signed_at"]
            # The keyring says the same instant as ISO text.
            assert to_micros(datetime.fromisoformat(keys[payload["key_id"]]["revoked_at"])) == at
            revoked += 1
        if record["type"] == "AuditTrail.VerificationRecorded":
            assert record["stream"] == str(AUDIT_TRAIL_ID)
            assert type(payload["run"]["verified_at"]) is int
            runs += 1
        if record["type"] == "Request.Completed":
            assert record["stream"] == str(request_uuid(payload["request_id"]))
    assert revoked == runs == 1
    for line in (bundle / "checkpoints.jsonl").read_text().splitlines():
        assert ISO.match(json.loads(line)["note"].split("\n")[3].removeprefix("time "))
    assert ISO.match(json.loads((bundle / "manifest.json").read_text())["exported_at"])
    # v1 envelopes (release 0.1) carry no signing time at all.
    first = next(records(bundles["0.1"]))
    assert "signed_at" not in first["header"] and first["envelope"].startswith("TFNFMQ")


def test_the_rules_data_is_as_documented(bundles: dict[str, Path]) -> None:
    games = [json.loads(line) for line in (bundles["every"] / "games.jsonl").read_text().split()]
    by_kind = {game["rules"]["game"]: game["rules"] for game in games}
    dice, cards = by_kind["three-dice"], by_kind["xidach"]
    assert set(dice) == {"game", "paytable", "faults"}
    assert set(dice["faults"]) == {"after_fault", "void_after"} and len(dice["paytable"]) == 50
    assert all(type(v) is int for k, v in dice["paytable"].items() if not k.startswith("single:"))
    fixed = {"ngu_linh_min": 16, "max_cards": 5, "deck": 52, "rounding": "floor"}
    assert cards.items() >= {**fixed, "deal_order": "ascending-seats-then-dealer"}.items()
    options = "ace_rule xi_dach_tens min_score seats win_pays xi_ban_pays xi_dach_pays"
    assert set(cards) == {"game", *fixed, "deal_order", *options.split(), "dealer_bust_pays_all_at"}
