"""An auditor's own verifier of an export bundle, written from docs/export.md
and docs/rules.md alone: it imports nothing from `ledger` (the standard
library and an Ed25519 implementation, `cryptography`), and runs the `ledger`
command (and tests/independent_store.py, which uses the ledger as `ledger`
does) only as separate programs to make the bundles it checks. If the format
and its documentation drift apart, this module fails.

Checked: every key id is the SHA-256 of its public key; every event's
envelope is split as documented, its header and payload decoded by the
documented rules and compared with the record, its payload hash, its
Ed25519 signature by a ledger-node key valid at its signing time, its
stream's chain, the log order; every checkpoint's signature by a checkpoint
key (a C2SP signed note, or the old form of release 0.2 and before; the C2SP
reader is held to the signed-note known answer too); for a whole-log
bundle, the Merkle root (RFC 9162) of the first `size` events equals every
checkpoint's root; for a partial bundle, each event's inclusion proof
against its checkpoint and each consistency proof (RFC 9162) that this
checkpoint extends an older one; every event's key judged by the first
checkpoint covering it (signed no later than it was issued, and for a revoked
key, that checkpoint issued before the revocation).

And what the events say: the key registry's revocations read first (the
operator's signature over each; the earlier of the keyring's and the log's
time counts) and the audit trail's runs (the auditor's signature, its root
against the log's); every dealer device's, operator's and auditor's signature
over the fact the docs give, by a key of that role allowed to sign when the
event was; every RNG draw recomputed from its revealed, committed seed (dice
by the HMAC formula, cards from the shuffled deck); every round replayed
move by move through its game, Tài Xỉu from the paytable of the bundle's
rules data and Xì dách from docs/rules.md, each settlement, void and
correction re-derived; every posting, and every wallet's balance rebuilt.

The bundles come from a store whose first ledger-node key was revoked between
two sessions, from a store with every kind of event, and from the stores of
releases 0.1 (v1 envelopes) and 0.2 (rounds of settlement API 1). A forger
holding the node's and the checkpoint's private keys rewrites a bundle
consistently: the actors' signatures, the rules and the RNG still catch it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import itertools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import NAMESPACE_URL, UUID, uuid5

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

LEDGER = Path(sys.executable).parent / "ledger"
ENVELOPE_DOMAINS = {
    b"LSE2": b"casino-ledger/event-envelope/v2\n",
    b"LSE1": b"casino-ledger/event-envelope/v1\n",
}
OLD_CHECKPOINT_DOMAIN = b"casino-ledger/checkpoint/v1\n"  # release 0.2 and before
SIGNED_NOTE = Path(__file__).resolve().parents[1] / "data" / "signed-note" / "vector.json"
GENESIS = "0" * 64


class BundleError(Exception):
    """What the auditor's verifier found wrong."""


def check(condition: bool, message: str) -> None:
    if not condition:
        raise BundleError(message)


# RFC 9162 Merkle trees.


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def merkle_root(leaves: list[bytes]) -> bytes:
    """MTH(D[n]) of RFC 9162 section 2.1.1."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return leaves[0]
    split = 1 << ((len(leaves) - 1).bit_length() - 1)
    return node_hash(merkle_root(leaves[:split]), merkle_root(leaves[split:]))


def root_from_inclusion(index: int, size: int, leaf: bytes, proof: list[bytes]) -> bytes:
    """RFC 9162 section 2.1.3.2: the root an inclusion proof leads to."""
    check(0 <= index < size, "leaf index outside the tree")
    fn, sn, node = index, size - 1, leaf
    for sibling in proof:
        check(sn != 0, "inclusion proof too long")
        if fn & 1 or fn == sn:
            node = node_hash(sibling, node)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            node = node_hash(node, sibling)
        fn >>= 1
        sn >>= 1
    check(sn == 0, "inclusion proof too short")
    return node


def check_consistency(
    size1: int, size2: int, proof: list[bytes], root1: bytes, root2: bytes
) -> None:
    """RFC 9162 section 2.1.4.2: the tree of size2 with root2 extends size1/root1."""
    check(0 < size1 <= size2, "consistency proof between impossible sizes")
    if size1 == size2:
        check(not proof and root1 == root2, "consistency proof between equal trees")
        return
    path = [root1, *proof] if size1 & (size1 - 1) == 0 else list(proof)
    check(bool(path), "empty consistency proof")
    fn, sn = size1 - 1, size2 - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        check(sn != 0, "consistency proof too long")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while fn & 1 == 0 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    check(sn == 0, "consistency proof too short")
    check(fr == root1 and sr == root2, f"consistency from size {size1} to {size2} fails")


# The keyring, checkpoints and envelopes, as docs/export.md describes them.


@dataclass
class Key:
    name: str
    raw: bytes
    role: str
    public: Ed25519PublicKey
    not_before: int  # µs
    not_after: int | None
    revoked_at: int | None


def micros(text: str) -> int:
    moment = datetime.fromisoformat(text)
    check(moment.utcoffset() is not None, f"time {text!r} has no UTC offset")
    return int(moment.timestamp()) * 1_000_000 + moment.microsecond


def load_keyring(bundle: Path) -> dict[str, Key]:
    data = json.loads((bundle / "keyring.json").read_text())
    keys = {}
    for entry in data["keys"]:
        raw = base64.b64decode(entry["public_key"], validate=True)
        check(hashlib.sha256(raw).hexdigest() == entry["key_id"], "key id is not its key's hash")
        keys[entry["key_id"]] = Key(
            entry["name"],
            raw,
            entry["role"],
            Ed25519PublicKey.from_public_bytes(raw),
            micros(entry["not_before"]),
            micros(entry["not_after"]) if entry["not_after"] else None,
            micros(entry["revoked_at"]) if entry.get("revoked_at") else None,
        )
    return keys


def signed_by(keys: dict[str, Key], key_id: str, role: str, message: bytes, sig: bytes) -> Key:
    key = keys.get(key_id)
    check(key is not None and key.role == role, f"not signed by a {role} key of the keyring")
    assert key is not None
    try:
        key.public.verify(sig, message)
    except InvalidSignature:
        raise BundleError(f"bad {role} signature") from None
    return key


@dataclass
class Checkpoint:
    origin: str
    size: int
    root: bytes
    issued_at: int  # µs
    accounts: bytes | None = None  # the account heads map's root (docs/history.md)


def note_key_hash(name: str, raw: bytes) -> bytes:
    """C2SP signed-note: the first 4 bytes of SHA-256(name || 0x0A || 0x01 || public key)."""
    return hashlib.sha256(name.encode() + b"\n" + b"\x01" + raw).digest()[:4]


def open_note(note: str, keys: dict[str, Key], role: str) -> tuple[str, Key]:
    """A signed note's text, checked: the text (lines ending in newlines), a blank
    line, one signature line `— <name> <base64>`. C2SP: the base64 holds the
    4-byte key hash and the signature over the text, the key found by its name
    and hash. The old form: the bare signature over a prefix and the text, the
    key named by its key id."""
    text, blank, block = note.partition("\n\n")
    check(blank == "\n\n" and block.endswith("\n"), "not a signed note")
    text += "\n"
    signature_lines = block[:-1].split("\n")
    # C2SP: more signature lines may follow the log's (witnesses' cosignatures,
    # docs/export.md); the log's is the one naming a key of the keyring, and a
    # line of a key we do not hold is not ours to judge.
    for line in signature_lines:
        dash, name, encoded = line.split(" ")
        check(dash == "\u2014", "a signature line starts with an em dash")
        blob = base64.b64decode(encoded, validate=True)
        if len(blob) == 4 + 64:
            found = [
                (key_id, key)
                for key_id, key in keys.items()
                if key.name == name and note_key_hash(key.name, key.raw) == blob[:4]
            ]
            if not found:
                continue
            check(len(found) == 1, f"two keys {name} with that key hash")
            key_id, message, signature = found[0][0], text.encode(), blob[4:]
            return text, signed_by(keys, key_id, role, message, signature)
        if len(blob) == 64 and len(signature_lines) == 1:  # the old form: one line
            key_id, message, signature = name, OLD_CHECKPOINT_DOMAIN + text.encode(), blob
            return text, signed_by(keys, key_id, role, message, signature)
    raise BundleError("no signature line by a key of the keyring (4 + 64 bytes, or the old 64)")


def read_checkpoint(note: str, keys: dict[str, Key]) -> Checkpoint:
    """The text's lines: origin, size, base64 root, `time <ISO-8601>`, and in
    newer checkpoints `accounts <base64 root>`."""
    text, key = open_note(note, keys, "checkpoint")
    origin, size, root, time_line, *more = text.splitlines()
    check(time_line.startswith("time ") and size.isdigit(), "not a checkpoint")
    check(more == [] or (len(more) == 1 and more[0].startswith("accounts ")), "not a checkpoint")
    accounts = base64.b64decode(more[0][9:], validate=True) if more else None
    issued_at = micros(time_line[5:])
    check(key.not_before <= issued_at, "checkpoint signed before its key was valid")
    check(key.not_after is None or issued_at < key.not_after, "signed after its key expired")
    check(key.revoked_at is None or issued_at < key.revoked_at, "checkpoint by a revoked key")
    return Checkpoint(origin, int(size), base64.b64decode(root, validate=True), issued_at, accounts)


def heads_root(heads: dict[bytes, bytes], depth: int = 0) -> bytes:
    """The account heads map's root by docs/history.md's definition: no
    account, 32 zero bytes; one, its leaf; else SHA-256(0x03 || left || right)."""
    if len(heads) <= 1:
        return next(iter(heads.values()), bytes(32))
    bit = lambda key: int.from_bytes(key, "big") >> (255 - depth) & 1  # noqa: E731
    left = {k: v for k, v in heads.items() if not bit(k)}
    right = {k: v for k, v in heads.items() if bit(k)}
    return hashlib.sha256(
        b"\x03" + heads_root(left, depth + 1) + heads_root(right, depth + 1)
    ).digest()


def account_leaf(event: Event) -> tuple[bytes, bytes]:
    key = hashlib.sha256(event.stream.encode()).digest()
    numbers = event.version.to_bytes(8, "big") + event.position.to_bytes(8, "big")
    return key, hashlib.sha256(b"\x02" + key + numbers + event.leaf).digest()


def plain(obj: dict[str, Any]) -> Any:
    """The documented decoding of eventsourcing's typed wrappers."""
    if set(obj) == {"_type_", "_data_"}:
        if obj["_type_"] == "uuid_hex":
            return str(UUID(hex=obj["_data_"]))
        check(obj["_type_"] in ("datetime_iso", "decimal_str"), f"unknown {obj['_type_']}")
        return obj["_data_"]
    return obj


@dataclass
class Event:
    position: int
    stream: str
    version: int
    prev: str
    signed_at: int | None
    key: Key
    leaf: bytes


def read_event(record: dict[str, Any], keys: dict[str, Key]) -> Event:
    envelope = base64.b64decode(record["envelope"], validate=True)
    magic, size = envelope[:4], int.from_bytes(envelope[4:6], "big")
    check(magic in ENVELOPE_DOMAINS, "bad magic")
    header = envelope[6 : 6 + size]
    signature = envelope[6 + size : 6 + size + 64]
    payload = envelope[6 + size + 64 :]
    fields = json.loads(header)
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    check(canonical.encode() == header, "header is not canonical JSON")
    check(fields == record["header"], "decoded header differs from the envelope's")
    check(fields["stream"] == record["stream"], "stream differs from the signed one")
    check(fields["version"] == record["version"], "version differs from the signed one")
    check(fields["type"].split(":", 1)[1] == record["type"], "type differs from the signed one")
    check(hashlib.sha256(payload).hexdigest() == fields["payload_sha256"], "payload hash")
    decoded = json.loads(payload, object_hook=plain)
    decoded.pop("originator_topic", None)
    check(decoded == record["payload"], "decoded payload differs from the envelope's")
    key = signed_by(
        keys, fields["key_id"], "ledger-node", ENVELOPE_DOMAINS[magic] + header, signature
    )
    signed_at = fields.get("signed_at")
    if signed_at is not None:
        check(key.not_before <= signed_at, "signed before its key was valid")
        check(key.not_after is None or signed_at < key.not_after, "signed after its key expired")
    return Event(
        record["position"],
        fields["stream"],
        fields["version"],
        fields["prev"],
        signed_at,
        key,
        leaf_hash(header),
    )


#: docs/export.md: `Round.Opened` before version 3 names its game, the game's
#: version and its seed `variant`, `variant_version` and `dice_seed`.
OPENED_BEFORE_V3 = {"variant": "game", "variant_version": "game_version", "dice_seed": "seed_id"}


def opening(payload: dict[str, Any]) -> dict[str, Any]:
    """A `Round.Opened` payload under the names of version 3."""
    if payload.get("class_version", 1) >= 3:
        return payload
    return {OPENED_BEFORE_V3.get(key, key): value for key, value in payload.items()}


def lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)


# What the events say, checked from the docs (docs/export.md: Streams and
# events, Signed facts, When a key may sign, Randomness, Money, Re-deriving
# every round; docs/rules.md for the games): every actor's signature by a key
# of its role allowed to sign then, every RNG draw recomputed from its
# revealed seed, every settlement, void and correction re-derived with the
# round's own rules, every posting, every wallet's balance.

ACTOR_FACT_DOMAIN = b"casino-ledger/actor-fact/v1\n"
KEY_REGISTRY = str(uuid5(NAMESPACE_URL, "casino-ledger/key-registry"))
AUDIT_TRAIL = str(uuid5(NAMESPACE_URL, "casino-ledger/audit-trail"))
ERASURES = str(uuid5(NAMESPACE_URL, "casino-ledger/erasures"))
GAME_RULES = str(uuid5(NAMESPACE_URL, "casino-ledger/game-rules"))
REQUESTS = uuid5(NAMESPACE_URL, "casino-ledger/request")
DICE_DOMAIN = b"casino-ledger/dice/v1\n"
DECK_DOMAIN = b"casino-ledger/deck/v1\n"


def canonical_json(value: Any) -> bytes:
    """RFC 8785 for the values the ledger signs (docs/export.md, Conventions)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


@dataclass(frozen=True)
class When:
    """The times a signature carried by an event is judged at."""

    at: int  # the event's signing time (a v1 envelope: its first covering checkpoint's)
    covered: int | None  # the issue time of the first checkpoint covering the event


def when_of(event: Event, first: Checkpoint | None) -> When:
    covered = None if first is None else first.issued_at
    if event.signed_at is None:
        check(
            covered is not None,
            f"log position {event.position}: a v1 envelope no checkpoint covers",
        )
        assert covered is not None
        return When(covered, covered)
    return When(event.signed_at, covered)


def key_problem(key: Key, at: int, covered: int | None) -> str | None:
    """Why `key` may not sign at `at` for an event first covered at `covered`, or None."""
    if at < key.not_before:
        return "signed before its key was valid"
    if key.not_after is not None and at >= key.not_after:
        return "signed after its key expired"
    if covered is not None and at > covered:
        return "signed after the checkpoint covering it was issued"
    if key.revoked_at is not None and (covered is None or covered >= key.revoked_at):
        return "signed by a revoked key, under no checkpoint issued before the revocation"
    return None


def actor_key(
    keys: dict[str, Key], role: str, fact: dict[str, Any], signed: Any, where: str
) -> Key:
    """The key of `role` whose Ed25519 signature `signed` ({key_id, signature}) is
    over the fact: the domain prefix and the fact's canonical JSON."""
    check(isinstance(signed, dict), f"{where}: no {role} signature")
    key = keys.get(signed.get("key_id", ""))
    check(key is not None and key.role == role, f"{where}: not signed by a {role} key")
    assert key is not None
    try:
        signature = base64.b64decode(signed.get("signature", ""), validate=True)
        key.public.verify(signature, ACTOR_FACT_DOMAIN + canonical_json(fact))
    except (InvalidSignature, binascii.Error, ValueError):
        raise BundleError(f"{where}: bad {role} signature") from None
    return key


def actor_signed(
    keys: dict[str, Key], role: str, fact: dict[str, Any], signed: Any, when: When, where: str
) -> Key:
    key = actor_key(keys, role, fact, signed, where)
    problem = key_problem(key, when.at, when.covered)
    check(problem is None, f"{where}: {role} key {key.name}: {problem}")
    return key


def read_revocations(bundle: Path, keys: dict[str, Key]) -> None:
    """Every KeyRevoked of the key registry, read first (they bear on every other
    check): its envelope and its operator's signature over the revocation fact
    checked, each key's revocation the earlier of the keyring's and the log's.
    Whether the operator key could sign then is judged with the rest, once the
    checkpoints are known."""
    for record in lines(bundle / "events.jsonl"):
        if record["stream"] != KEY_REGISTRY or record["type"] != "KeyRegistry.KeyRevoked":
            continue
        read_event(record, keys)
        revoked = record["payload"]
        at = revoked["revoked_at"]
        check(type(at) is int, "a revocation's time is integer microseconds")
        fact = {"kind": "key-revoked", "key_id": revoked["key_id"], "reason": revoked["reason"]}
        where = f"log position {record['position']} (the revocation)"
        actor_key(keys, "operator", {**fact, "revoked_at": at}, revoked["operator"], where)
        target = keys.get(revoked["key_id"])
        if target is not None:
            target.revoked_at = at if target.revoked_at is None else min(at, target.revoked_at)


# The RNG (docs/export.md, Randomness).


def byte_stream(seed: bytes, message: bytes) -> Iterator[int]:
    for block in itertools.count():
        yield from hmac.digest(seed, message + b"\n" + str(block).encode(), "sha256")


def rng_dice(seed: bytes, round_id: str, counter: int) -> list[int]:
    message = DICE_DOMAIN + round_id.encode() + b"\n" + str(counter).encode()
    faces = (b % 6 + 1 for b in byte_stream(seed, message) if b < 252)
    return [next(faces) for _ in range(3)]


def rng_deck(seed: bytes, round_id: str) -> list[int]:
    deck, stream = list(range(52)), byte_stream(seed, DECK_DOMAIN + round_id.encode())
    for i in range(51, 0, -1):
        b = next(stream)
        while b >= 256 - 256 % (i + 1):
            b = next(stream)
        j = b % (i + 1)
        deck[i], deck[j] = deck[j], deck[i]
    return deck


# The games, from their rules data and docs/rules.md.

Draw = tuple[str, int] | None  # (dice or cards, how many) a move draws


@dataclass
class Move:
    actor: str
    action: str
    args: dict[str, Any]
    drawn: list[int]


@dataclass
class Step:
    """What the game says after the moves so far."""

    moves: dict[str, dict[str, Draw]]  # actor -> action -> what it draws
    settle: dict[str, int] = field(default_factory=dict)  # by the last move: bet -> returned
    void: str | None = None
    over: bool = False
    betting: bool = False
    flags: list[str] = field(default_factory=list)


Bets = dict[str, tuple[str, dict[str, Any], int]]  # bet id -> (account, bet, stake)


class ThreeDice:
    """Tài Xỉu / Sic Bo (docs/rules.md §1), paid from the rules data's paytable."""

    def __init__(self, rules: dict[str, Any]) -> None:
        self.paytable = rules["paytable"]
        self.reopens = rules["faults"]["after_fault"] == "reopen-betting"
        self.void_after = rules["faults"]["void_after"]

    def check_bet(self, bet: dict[str, Any], standing: Bets) -> None:
        check(set(bet) == {"bet"} and bet["bet"] in self.paytable, f"no such bet {bet}")

    def returned(self, bet_id: str, stake: int, dice: list[int]) -> int:
        kind, _, arg = bet_id.partition(":")
        total, triple = sum(dice), len(set(dice)) == 1
        if kind == "combination":
            low, high = (int(face) for face in arg.split("-"))
            hits = int(low in dice and high in dice)
        elif kind in ("small", "big"):
            low, high = (4, 10) if kind == "small" else (11, 17)
            hits = int(low <= total <= high and not triple)
        elif kind == "any_triple":
            hits = int(triple)
        elif kind == "total":
            hits = int(total == int(arg))
        elif kind == "single":
            hits = dice.count(int(arg))
        elif kind == "specific_triple":
            hits = int(dice.count(int(arg)) == 3)
        else:  # specific_double: a triple of N counts
            hits = int(dice.count(int(arg)) >= 2)
        pays = self.paytable[bet_id]
        return stake * (1 + (pays[hits - 1] if isinstance(pays, list) else pays)) if hits else 0

    def step(self, bets: Bets, moves: list[Move]) -> Step:
        betting, faults = True, 0
        for move in moves:
            if move.action == "throw":
                check(all(type(d) is int and 1 <= d <= 6 for d in move.drawn), "not dice")
                settle = {
                    b: self.returned(bet["bet"], s, move.drawn) for b, (_, bet, s) in bets.items()
                }
                return Step({}, settle, over=True)
            if move.action == "close_betting":
                betting = False
            elif move.action == "fault":
                faults += 1
                if faults >= self.void_after:
                    return Step({}, void=f"{faults} faulty throws", over=True)
                betting = self.reopens
        if betting:
            return Step({"dealer": {"close_betting": None}}, betting=True)
        return Step({"dealer": {"throw": ("dice", 3), "fault": None}})


RANKS = {"xi-ban": 6, "xi-dach": 5, "ngu-linh": 4, "du-tuoi": 3, "non": 2, "quac": 1}


class XiDach:
    """Xì dách (docs/rules.md §2), with the options of the rules data."""

    def __init__(self, rules: dict[str, Any]) -> None:
        fixed = (rules["deck"], rules["max_cards"], rules["rounding"], rules["deal_order"])
        check(fixed == (52, 5, "floor", "ascending-seats-then-dealer"), "unknown Xì dách rules")
        self.rules = rules

    def check_bet(self, bet: dict[str, Any], standing: Bets) -> None:
        seat = bet.get("seat")
        check(set(bet) == {"seat"} and type(seat) is int, f"not a seat: {bet}")
        check(1 <= seat <= self.rules["seats"], f"no seat {seat} at this table")
        check(all(b["seat"] != seat for _, b, _ in standing.values()), f"seat {seat} taken")

    def score(self, cards: list[int]) -> int:
        rule, ranks = self.rules["ace_rule"], [card // 4 + 1 for card in cards]
        if rule == "any":
            values: tuple[int, ...] = (1, 10, 11)
        elif rule == "one-or-ten" or len(cards) == 3:
            values = (1, 10)
        else:
            values = (10, 11) if len(cards) <= 2 else (1,)
        others = sum(min(rank, 10) for rank in ranks if rank != 1)
        totals = {
            others + sum(chosen)
            for chosen in itertools.combinations_with_replacement(values, ranks.count(1))
        }
        fitting = [total for total in totals if total <= 21]
        return max(fitting) if fitting else min(totals)

    def hand(self, cards: list[int]) -> tuple[str, int]:
        """(class, score) of a hand."""
        points = self.score(cards)
        low, high = sorted(card // 4 + 1 for card in cards) if len(cards) == 2 else (0, 0)
        if (low, high) == (1, 1):
            return "xi-ban", points
        if low == 1 and (high >= 11 or (high == 10 and self.rules["xi_dach_tens"])):
            return "xi-dach", points
        if points > 21:
            return "quac", points
        if len(cards) == 5 and points >= self.rules["ngu_linh_min"]:
            return "ngu-linh", points
        return ("du-tuoi" if points >= self.rules["min_score"] else "non"), points

    @staticmethod
    def compare(mine: tuple[str, int], theirs: tuple[str, int]) -> int:
        if RANKS[mine[0]] != RANKS[theirs[0]]:
            return 1 if RANKS[mine[0]] > RANKS[theirs[0]] else -1
        if mine[0] == "ngu-linh":  # the lower score wins
            return (mine[1] < theirs[1]) - (mine[1] > theirs[1])
        if mine[0] == "du-tuoi":
            return (mine[1] > theirs[1]) - (mine[1] < theirs[1])
        return 0

    def step(self, bets: Bets, moves: list[Move]) -> Step:
        table = XiDachRound(self, {bet["seat"]: (b, s) for b, (_, bet, s) in bets.items()})
        for move in moves:
            table.apply(move)
        return table.step()


class XiDachRound:
    """One round's state, move by move."""

    def __init__(self, game: XiDach, seats: dict[int, tuple[str, int]]) -> None:
        self.game, self.seats, self.order = game, seats, sorted(seats)
        self.hands: dict[int | None, list[int]] = {seat: [] for seat in [*self.order, None]}
        self.phase, self.turn = "betting", None
        self.done: set[int] = set()
        self.returned: dict[int, int] = {}
        self.used: set[int] = set()
        self.settle: dict[str, int] = {}
        self.flags: list[str] = []
        self.void: str | None = None

    def moves(self) -> dict[str, dict[str, Draw]]:
        if self.phase == "betting":
            return {"dealer": {"close_betting": None}}
        if self.phase == "closed":
            return {"dealer": {"deal": ("cards", 2 * len(self.order) + 2), "fault": None}}
        if self.phase != "play":
            return {}
        found: dict[str, dict[str, Draw]] = {}
        if self.turn is not None:
            found[f"seat:{self.turn}"] = {"stand": None}
            if len(self.hands[self.turn]) < 5:
                found[f"seat:{self.turn}"]["hit"] = ("cards", 1)
        dealer: dict[str, Draw] = {}
        points = self.game.score(self.hands[None])
        of_age = self.game.rules["min_score"] <= points <= 21
        if self.turn is None:
            can_draw = points <= 21 and len(self.hands[None]) < 5
            if can_draw:
                dealer["draw"] = ("cards", 1)
            if of_age or not can_draw:
                dealer["stop"] = None
        if of_age:
            dealer.update({f"check:{s}": None for s in self.order if s not in self.returned})
        found["dealer"] = {**dealer, "fault": None}
        return found

    def apply(self, move: Move) -> None:
        check(len(set(move.drawn)) == len(move.drawn), "a card drawn twice")
        for card in move.drawn:
            check(type(card) is int and 0 <= card < 52 and card not in self.used, "a card twice")
        self.used.update(move.drawn)
        self.settle, self.flags = {}, []
        action, rules = move.action, self.game.rules
        if action == "close_betting":
            self.phase = "closed" if self.order else "over"
        elif action == "fault":
            self.phase, self.turn, self.void = "voided", None, f"misdeal: {move.args['reason']}"
            return
        elif action == "deal":
            receivers: list[int | None] = [*self.order, None]
            for i, card in enumerate(move.drawn):
                self.hands[receivers[i % len(receivers)]].append(card)
            self.phase = "play"
            dealer = self.game.hand(self.hands[None])
            for seat in self.order:
                mine = self.game.hand(self.hands[seat])
                if dealer[0] in ("xi-ban", "xi-dach"):
                    self.pay(seat, self.game.compare(mine, dealer), mine[0])
                elif mine[0] in ("xi-ban", "xi-dach"):
                    self.pay(seat, 1, mine[0])
            self.next_turn()
        elif action == "hit":
            seat = self.turn
            assert seat is not None
            bust = self.game.hand(self.hands[seat])[0] == "quac"
            self.hands[seat].append(move.drawn[0])
            if bust:
                points = self.game.score(self.hands[seat])
                self.flags.append(f"den-bai: seat {seat} drew while bust, now {points}: loses")
                self.pay(seat, -1)
            if bust or len(self.hands[seat]) == 5:
                self.done.add(seat)
                self.next_turn()
        elif action == "stand":
            assert self.turn is not None
            self.done.add(self.turn)
            self.next_turn()
        elif action == "draw":
            self.hands[None].append(move.drawn[0])
            if self.game.score(self.hands[None]) >= rules["dealer_bust_pays_all_at"]:
                for seat in self.order:
                    if seat not in self.returned:
                        self.pay(seat, 1)
        elif action == "stop":
            for seat in self.order:
                if seat not in self.returned:
                    self.check_seat(seat)
        else:  # check:N
            seat = int(action.partition(":")[2])
            self.check_seat(seat)
            if self.turn == seat:
                self.next_turn()
        if len(self.returned) == len(self.order):
            self.phase, self.turn = "over", None

    def check_seat(self, seat: int) -> None:
        dealer = self.game.hand(self.hands[None])
        self.pay(seat, self.game.compare(self.game.hand(self.hands[seat]), dealer))

    def pay(self, seat: int, outcome: int, natural: str = "") -> None:
        rules = self.game.rules
        pays = {"xi-ban": rules["xi_ban_pays"], "xi-dach": rules["xi_dach_pays"]}
        bet, stake = self.seats[seat]
        numerator, denominator = pays.get(natural, rules["win_pays"])
        amount = stake + stake * numerator // denominator if outcome > 0 else stake * (outcome == 0)
        self.returned[seat] = self.settle[bet] = amount
        self.done.add(seat)

    def next_turn(self) -> None:
        self.turn = next((seat for seat in self.order if seat not in self.done), None)

    def step(self) -> Step:
        over = self.phase in ("over", "voided")
        betting = self.phase == "betting"
        return Step(self.moves(), dict(self.settle), self.void, over, betting, list(self.flags))


Game = ThreeDice | XiDach


def game_of(rules: dict[str, Any]) -> Game:
    kind = rules.get("game")
    check(kind in ("three-dice", "xidach"), f"no game {kind!r} this verifier knows")
    return ThreeDice(rules) if kind == "three-dice" else XiDach(rules)


def load_games(bundle: Path) -> dict[tuple[str, str], Game]:
    """games.jsonl: each profile's rules, which must hash to its rules hash."""
    found = {}
    for line in lines(bundle / "games.jsonl"):
        check(line["rules"] is not None, f"the rules of {line['game']} are missing")
        digest = hashlib.sha256(canonical_json(line["rules"])).hexdigest()
        check(digest == line["rules_hash"], f"the rules of {line['game']} do not hash")
        found[(line["game"], line["rules_hash"])] = game_of(line["rules"])
    return found


# Money (docs/export.md, Money).


def posting(account: str, amount: int, currency: str) -> dict[str, Any]:
    return {"account": account, "amount": amount, "currency": currency}


def settlement_postings(
    round_id: str, house: str, currency: str, results: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """What a settlement posts for its results (docs/export.md, Money)."""
    legs = []
    for result in results:
        stake, returned = result["stake"], result["returned"]
        legs.append(posting(f"in-play:{round_id}", -stake, currency))
        if returned:
            legs.append(posting(f"wallet:{result['account_id']}", returned, currency))
        if stake != returned:
            legs.append(posting(f"wallet:{house}", stake - returned, currency))
    return legs


def negated(legs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**leg, "amount": -leg["amount"]} for leg in legs]


# Rounds, re-derived.


@dataclass
class Life:
    """A round as its events have told it so far."""

    round_id: str
    table: str
    game: Game
    seed: str | None  # an RNG round's committed seed id; None at a physical table
    house: str
    currency: str
    api: int
    bets: Bets = field(default_factory=dict)
    moves: list[Move] = field(default_factory=list)
    step: Step = field(default_factory=lambda: Step({}))
    betting: bool = True  # bets may be placed and withdrawn now
    throws: int = 0  # the throw counter
    dealt: list[int] = field(default_factory=list)  # cards dealt, in order
    drew: bool = False  # randomness drawn: no operator void from now on
    pending: Step | None = None  # a move's settlement or void still to come
    in_force: dict[str, tuple[int | None, dict[str, Any]]] = field(default_factory=dict)
    settled_postings: list[dict[str, Any]] = field(default_factory=list)  # API 1: in force
    outcome: dict[str, Any] | None = None  # API 1: the outcome recorded
    status: str = "open"  # open, over or voided
    faults: int = 0
    requests: set[str] = field(default_factory=set)  # the request ids that placed its bets

    @property
    def where_paid(self) -> tuple[str, str, str]:
        """The round, its house and currency: what its settlements post to."""
        return self.round_id, self.house, self.currency


@dataclass
class Contents:
    """What the events were found to say."""

    actor_signatures: dict[str, int] = field(default_factory=dict)  # by role
    rounds: int = 0  # rounds whose every event was re-derived
    settlements: int = 0  # settlements and corrections re-derived
    bets: int = 0  # bet returns re-derived
    voids: int = 0
    corrections: int = 0
    rng_dice: int = 0  # throws recomputed from revealed seeds
    rng_cards: int = 0  # card draws recomputed from revealed seeds
    rng_pending: int = 0  # draws whose seed the bundle does not reveal
    movements: int = 0  # postings lists that balance
    wallets: int = 0  # wallets whose events match their postings
    revocations: int = 0
    runs: int = 0  # recorded verification runs
    erasures: int = 0  # recorded erasures of personal data
    rules_recorded: int = 0  # rules data recorded in the rules register


# An RNG draw to recompute: seed id, round, throw counter (dice) or deck
# positions (cards), what was drawn, where.
RngDraw = tuple[str, str, int | list[int], list[int], str]


class ContentAudit:
    """Follows the events in log order; `finish` checks what needs them all."""

    def __init__(self, keys: dict[str, Key], games: dict[tuple[str, str], Game], kind: str):
        self.keys, self.games = keys, games
        self.whole = kind == "all"  # else a round's or a range of log positions
        self.whole_rounds = kind != "range"  # every round holds all its events so far
        self.found = Contents()
        self.rounds: dict[str, Life] = {}
        self.commitments: dict[str, tuple[str, str]] = {}  # seed id -> (table, commitment)
        self.table_kinds: dict[str, str | None] = {}  # table -> rng, physical, None (v1)
        self.revealed: dict[str, bytes] = {}
        self.draws: list[RngDraw] = []
        self.kinds: dict[str, str] = {}  # account -> player or house
        self.currencies: dict[str, str] = {}  # account -> its currency
        self.balances: dict[str, int] = {}  # account -> as its own events say
        self.posted: dict[str, int] = {}  # ledger account -> sum of its postings
        self.leaves: list[bytes] = []

    def signed(self, role: str, fact: dict[str, Any], signed: Any, when: When, where: str) -> None:
        actor_signed(self.keys, role, fact, signed, when, where)
        self.found.actor_signatures[role] = self.found.actor_signatures.get(role, 0) + 1

    def observe(self, record: dict[str, Any], event: Event, first: Checkpoint | None) -> None:
        kind, payload, stream = record["type"], record["payload"], record["stream"]
        where = f"log position {event.position} ({kind})"
        when = when_of(event, first)
        self.leaves.append(event.leaf)
        owner = kind.partition(".")[0]
        fixed = {
            "KeyRegistry": KEY_REGISTRY,
            "AuditTrail": AUDIT_TRAIL,
            "Erasures": ERASURES,
            "GameRules": GAME_RULES,
        }
        check((stream in fixed.values()) == (owner in fixed), f"{where}: on the wrong stream")
        check(owner not in fixed or stream == fixed[owner], f"{where}: on the wrong stream")
        if "postings" in payload:
            self.movement(payload["postings"], where)
        if owner == "Round":
            self.round_event(kind, stream, payload, when, where)
        elif owner == "Account":
            self.account_event(kind, stream, payload, where)
        elif owner == "GameTable":
            self.table_event(kind, stream, payload, where)
        elif kind == "Request.Completed":
            check(stream == str(uuid5(REQUESTS, payload["request_id"])), f"{where}: stream id")
        elif kind == "KeyRegistry.KeyRevoked":
            operator = self.keys[payload["operator"]["key_id"]]
            problem = key_problem(operator, when.at, when.covered)
            check(problem is None, f"{where}: the revocation's operator key: {problem}")
            self.found.actor_signatures["operator"] = (
                self.found.actor_signatures.get("operator", 0) + 1
            )
            self.found.revocations += 1
        elif kind == "AuditTrail.VerificationRecorded":
            self.recorded_run(payload, event, when, where)
        elif kind == "AuditTrail.SelfVerificationRecorded":  # the node's own: its envelope signs
            self.run_claims(payload["run"], event, where)
        elif kind == "Erasures.SubjectErased":
            fact = {"kind": "personal-data-erased", "subject": payload["subject"]}
            self.signed(
                "operator", {**fact, "reason": payload["reason"]}, payload["operator"], when, where
            )
            self.found.erasures += 1
        elif kind == "GameRules.RulesRecorded":  # the data behind a rules hash
            rules_hash = hashlib.sha256(canonical_json(payload["rules"])).hexdigest()
            check(rules_hash == payload["rules_hash"], f"{where}: rules that are not its hash's")
            self.found.rules_recorded += 1

    # Money.

    def movement(self, postings: list[dict[str, Any]], where: str) -> None:
        total: dict[str, int] = {}
        for leg in postings:
            check(type(leg["amount"]) is int, f"{where}: an amount that is not an integer")
            total[leg["currency"]] = total.get(leg["currency"], 0) + leg["amount"]
            self.posted[leg["account"]] = self.posted.get(leg["account"], 0) + leg["amount"]
        check(not any(total.values()), f"{where}: postings do not balance")
        self.found.movements += 1

    def account_event(self, kind: str, account: str, payload: dict[str, Any], where: str) -> None:
        if kind == "Account.Opened":
            self.kinds[account], self.currencies[account] = payload["kind"], payload["currency"]
            self.balances[account] = 0
            return
        if account not in self.kinds:  # a partial bundle: the account opened before it
            return
        sign = {"Deposited": 1, "Withdrawn": -1, "Debited": -1, "Credited": 1}
        name = kind.partition(".")[2]
        if name in ("Deposited", "Withdrawn"):
            amount, currency = payload["amount"], self.currencies[account]
            legs = [
                posting(f"cashier:{currency}", -amount, currency),
                posting(f"wallet:{account}", amount, currency),
            ]
            expected = legs if name == "Deposited" else negated(legs)[::-1]
            check(payload["postings"] == expected, f"{where}: postings are not the movement's")
        if name in sign:
            check(payload["amount"] > 0, f"{where}: an amount that is not positive")
            self.balances[account] += sign[name] * payload["amount"]
            if self.kinds[account] == "player":
                check(self.balances[account] >= 0, f"{where}: the wallet goes below zero")

    def table_event(self, kind: str, table: str, payload: dict[str, Any], where: str) -> None:
        if kind == "GameTable.Opened":
            check(payload.get("kind") in ("rng", "physical", None), f"{where}: a table's kind")
            self.table_kinds[table] = payload.get("kind")
        elif kind == "GameTable.SeedCommitted":
            check(self.table_kinds.get(table) != "physical", f"{where}: a seed on a physical table")
            self.commitments[payload["seed_id"]] = (table, payload["commitment"])
        elif kind == "GameTable.SeedRevealed":
            seed = bytes.fromhex(payload["seed"])
            committed = self.commitments.get(payload["seed_id"])
            if committed is not None or self.whole:
                check(
                    committed == (table, hashlib.sha256(seed).hexdigest()),
                    f"{where}: the revealed seed is not the one committed",
                )
            self.revealed[payload["seed_id"]] = seed

    # Rounds.

    def round_event(
        self, kind: str, round_id: str, payload: dict[str, Any], when: When, where: str
    ) -> None:
        if kind == "Round.Opened":
            self.opened(round_id, payload, where)
            return
        life = self.rounds.get(round_id)
        if life is None:  # a range bundle: the round opened before it
            return
        name = kind.partition(".")[2]
        where = f"round {round_id}: {where}"
        check(life.status == "open" or name == "Corrected", f"{where}: after the round ended")
        check(
            life.pending is None or name in ("Settled", "Voided"),
            f"{where}: a settlement is missing",
        )
        if name in ("BetPlaced", "BetWithdrawn"):
            self.bet(life, name, payload, where)
        elif name == "ActionRecorded":
            self.action(life, payload, when, where)
        elif name in ("BettingClosed", "OutcomeRecorded", "FaultRecorded", "BettingReopened"):
            self.legacy(life, name, payload, when, where)
        elif name == "Settled":
            self.settled(life, payload, where)
        elif name == "Voided":
            self.voided(life, payload, when, where)
        elif name == "Resumed":
            fact = {"action": "resume", "round": round_id, "reason": payload["reason"]}
            self.signed("operator", fact, payload["operator"], when, where)
        elif name == "Corrected":
            self.corrected(life, payload, when, where)

    def opened(self, round_id: str, payload: dict[str, Any], where: str) -> None:
        version = payload.get("class_version", 1)
        api = payload.get("settlement_api", 1) if version >= 2 else 1
        payload = opening(payload)
        game = self.games.get((payload["game"], payload["rules_hash"]))
        check(game is not None, f"{where}: no rules for {payload['game']} in games.jsonl")
        assert game is not None
        seed = payload["seed_id"]
        table_kind = self.table_kinds.get(payload["table_id"])  # None: v1, or before the bundle
        check(table_kind != "rng" or seed is not None, f"{where}: an RNG table's round, no seed")
        check(table_kind != "physical" or seed is None, f"{where}: a physical table's seed")
        if seed is not None and self.whole:
            committed = self.commitments.get(seed)
            check(
                committed is not None and committed[0] == payload["table_id"],
                f"{where}: its seed was never committed on its table",
            )
            check(seed not in self.revealed, f"{where}: its seed was revealed already")
        life = Life(
            round_id,
            payload["table_id"],
            game,
            seed,
            payload["house_account"],
            payload["currency"],
            api,
        )
        life.step = game.step({}, [])
        self.rounds[round_id] = life
        self.found.rounds += 1

    def bet(self, life: Life, name: str, payload: dict[str, Any], where: str) -> None:
        check(life.betting, f"{where}: a bet changed while betting was closed")
        bet_id, account, stake = payload["bet_id"], payload["account_id"], payload["stake"]
        legs = [
            posting(f"wallet:{account}", -stake, life.currency),
            posting(f"in-play:{life.round_id}", stake, life.currency),
        ]
        if name == "BetPlaced":
            check(bet_id not in life.bets and stake > 0, f"{where}: a bet placed twice")
            check(payload["request_id"] not in life.requests, f"{where}: a request placed twice")
            life.requests.add(payload["request_id"])
            life.game.check_bet(payload["bet"], life.bets)
            life.bets[bet_id] = (account, payload["bet"], stake)
        else:
            placed = life.bets.pop(bet_id, None)
            check(placed is not None and placed[::2] == (account, stake), f"{where}: no such bet")
            legs = negated(legs)[::-1]
        check(payload["postings"] == legs, f"{where}: postings are not the bet's")

    def offered(self, life: Life, move: Move, where: str) -> Draw:
        offered = life.step.moves.get(move.actor, {})
        check(move.action in offered, f"{where}: {move.actor} {move.action} is not offered")
        draw = offered[move.action]
        check(len(move.drawn) == (0 if draw is None else draw[1]), f"{where}: drew the wrong count")
        return draw

    def advance(self, life: Life, move: Move) -> None:
        life.moves.append(move)
        life.step = life.game.step(life.bets, life.moves)
        life.drew = life.drew or bool(move.drawn)

    def action(self, life: Life, payload: dict[str, Any], when: When, where: str) -> None:
        check(life.api == 2 and payload["step"] == len(life.moves), f"{where}: out of order")
        move = Move(payload["actor"], payload["action"], payload["args"], payload["drawn"])
        draw = self.offered(life, move, where)
        if move.action == "fault":
            reason = move.args.get("reason")
            check(set(move.args) == {"reason"} and isinstance(reason, str), f"{where}: args")
            check(reason.strip() != "" and len(reason) <= 200, f"{where}: a fault's reason")
        else:
            check(move.args == {}, f"{where}: a move that takes no arguments has some")
        self.source(life, move, draw, payload["source"], payload["step"], when, where)
        self.advance(life, move)
        step = life.step
        check(payload["betting"] == step.betting, f"{where}: betting is not as the game says")
        check(payload["flags"] == step.flags, f"{where}: the flags are not the game's")
        life.betting = step.betting
        if step.void is not None or step.settle or step.over:
            life.pending = step

    def source(
        self,
        life: Life,
        move: Move,
        draw: Draw,
        source: dict[str, Any],
        number: int,
        when: When,
        where: str,
    ) -> None:
        """Who attests the move (docs/export.md, the `source` of an action)."""
        kind = source.get("kind")
        decision = not move.drawn and move.action != "fault"
        if "by" in source:
            check(kind in ("command", "rng"), f"{where}: a {kind} source names who asked")
            by = source["by"]
            check(set(by) == {"token", "role"} and 0 < len(by["token"]) <= 64, f"{where}: by")
        if life.seed is not None:  # an RNG table
            check(move.action != "fault", f"{where}: a fault at an RNG table")
            if decision:
                check(kind == "command", f"{where}: a {kind} source for a command")
                return
            check(kind == "rng" and source["seed_id"] == life.seed, f"{where}: not its seed")
            check(source["draw"] == (draw[0] if draw else None), f"{where}: the wrong draw")
            check(source["seed_id"] not in self.revealed, f"{where}: drawn after its seed's reveal")
            if source["draw"] == "dice":
                check(source["counter"] == life.throws, f"{where}: a throw out of sequence")
                self.draws.append((life.seed, life.round_id, life.throws, move.drawn, where))
                life.throws += 1
            else:
                positions = list(range(len(life.dealt), len(life.dealt) + len(move.drawn)))
                check(source["positions"] == positions, f"{where}: the wrong deck positions")
                self.draws.append((life.seed, life.round_id, positions, move.drawn, where))
                life.dealt += move.drawn
            return
        if decision and life.betting and kind == "command":
            return  # the node closes betting at a physical table
        check(kind == "device", f"{where}: a {kind} source at a physical table")
        check(source.get("draw") == (draw[0] if draw else None), f"{where}: the wrong draw")
        round_id, signed = life.round_id, source.get("signed")
        if signed == "throw":
            outcome = {draw[0]: move.drawn} if draw else move.args
            fact = {"action": "throw", "round": round_id, "throw": life.throws, "outcome": outcome}
        elif signed == "fault":
            check(move.action == "fault", f"{where}: a fault's report for another move")
            fact = {
                "action": "fault",
                "round": round_id,
                "throw": life.throws,
                "reason": move.args["reason"],
            }
        else:
            check(signed is None, f"{where}: signed as {signed!r}")
            fact = {
                "action": "act",
                "round": round_id,
                "step": number,
                "actor": move.actor,
                "move": move.action,
                "args": move.args,
                "drawn": move.drawn,
            }
        self.signed("dealer-device", fact, source, when, where)
        if draw is not None and draw[0] == "cards":
            life.dealt += move.drawn
        elif not decision or signed == "throw":
            life.throws += 1

    def legacy(
        self, life: Life, name: str, payload: dict[str, Any], when: When, where: str
    ) -> None:
        """Settlement API 1: closing betting, an outcome, a fault, betting reopened."""
        check(life.api == 1, f"{where}: an event of settlement API 1 in a round of API 2")
        if name == "BettingReopened":
            check(
                not life.betting and life.step.betting,
                f"{where}: betting reopened against its rules",
            )
            life.betting = True
            return
        if name == "BettingClosed":
            actor = next(
                (a for a, offered in life.step.moves.items() if "close_betting" in offered), ""
            )
            move = Move(actor, "close_betting", {}, [])
        elif name == "FaultRecorded":
            actor = next((a for a, offered in life.step.moves.items() if "fault" in offered), "")
            move = Move(actor, "fault", {"reason": payload["reason"]}, [])
        else:
            found = [
                (a, action, d)
                for a, offered in life.step.moves.items()
                for action, d in offered.items()
                if action not in ("fault", "close_betting")
            ]
            check(len(found) == 1, f"{where}: an outcome when the game takes none")
            actor, action, d = found[0]
            drawn = payload["outcome"].get(d[0], []) if d else []
            move = Move(actor, action, {} if d else payload["outcome"], list(drawn))
            check(not d or payload["outcome"] == {d[0]: drawn}, f"{where}: not an outcome")
        self.offered(life, move, where)
        check(life.betting == (name == "BettingClosed"), f"{where}: betting is open or not")
        if name != "BettingClosed":
            self.legacy_source(life, name, payload, payload["source"], when, where)
        self.advance(life, move)
        life.betting = False
        if name == "FaultRecorded":
            life.faults += 1
            check(payload["faults"] == life.faults, f"{where}: faults miscounted")
            if life.step.void is not None:
                life.pending = life.step
        if name == "OutcomeRecorded":
            life.outcome = payload["outcome"]

    def legacy_source(
        self,
        life: Life,
        name: str,
        payload: dict[str, Any],
        source: dict[str, Any],
        when: When,
        where: str,
    ) -> None:
        if life.seed is not None:
            check(name == "OutcomeRecorded", f"{where}: a faulty throw at an RNG table")
            check(
                source == {"kind": "rng", "seed_id": life.seed, "counter": life.throws},
                f"{where}: not its seed's next throw",
            )
            check(life.seed not in self.revealed, f"{where}: drawn after its seed's reveal")
            drawn = payload["outcome"]["dice"]
            self.draws.append((life.seed, life.round_id, life.throws, drawn, where))
        else:
            check(source.get("kind") == "device", f"{where}: not a dealer device's report")
            fact: dict[str, Any] = {"action": "throw", "round": life.round_id, "throw": life.throws}
            if name == "FaultRecorded":
                fact = {**fact, "action": "fault", "reason": payload["reason"]}
            else:
                fact["outcome"] = payload["outcome"]
            self.signed("dealer-device", fact, source, when, where)
        life.throws += 1

    def results(
        self, life: Life, recorded: list[dict[str, Any]], returns: dict[str, int], where: str
    ) -> None:
        """Exactly the bets `returns` settles, each for the right player, stake and return."""
        check(len(recorded) == len(returns), f"{where}: settles other bets than the rules")
        for result in recorded:
            bet = result["bet_id"]
            check(bet in returns and bet in life.bets, f"{where}: bet {bet} is not settled now")
            account, _, stake = life.bets[bet]
            check(
                (result["account_id"], result["stake"]) == (account, stake),
                f"{where}: bet {bet} settled for the wrong player or stake",
            )
            check(
                result["returned"] == returns[bet],
                f"{where}: bet {bet} returned {result['returned']}, the rules pay {returns[bet]}",
            )
        self.found.bets += len(recorded)

    def settled(self, life: Life, payload: dict[str, Any], where: str) -> None:
        results = payload["results"]
        step = payload.get("step") if payload.get("class_version", 1) >= 2 else None
        over = payload.get("over", True)
        if life.api == 2:
            pending = life.pending
            check(pending is not None and pending.void is None, f"{where}: no move settles now")
            assert pending is not None
            check(step == len(life.moves) - 1, f"{where}: the settlement names another move")
            self.results(life, results, pending.settle, where)
            check(not set(pending.settle) & set(life.in_force), f"{where}: a bet settled twice")
            check(over == pending.over, f"{where}: over is not as the game says")
        else:
            check(life.outcome is not None and step is None and over, f"{where}: no outcome")
            check(life.step.over and set(life.step.settle) == set(life.bets), f"{where}: not all")
            self.results(life, results, life.step.settle, where)
            life.settled_postings = payload["postings"]
        check(
            payload["postings"] == settlement_postings(*life.where_paid, results),
            f"{where}: postings",
        )
        life.in_force.update({r["bet_id"]: (step, r) for r in results})
        life.pending = None
        life.status = "over" if over else life.status
        self.found.settlements += 1

    def voided(self, life: Life, payload: dict[str, Any], when: When, where: str) -> None:
        if payload["operator"] is None:  # the game's own void
            check(
                life.pending is not None and life.pending.void is not None,
                f"{where}: voided without an operator, but the rules do not void it",
            )
        else:
            check(life.pending is None, f"{where}: an operator voided a round its move settles")
            check(
                not life.drew and life.outcome is None and not life.in_force,
                f"{where}: an operator voided a round that drew its outcome",
            )
            fact = {"action": "void", "round": life.round_id, "reason": payload["reason"]}
            self.signed("operator", fact, payload["operator"], when, where)
        standing = {b: (a, s) for b, (a, _, s) in life.bets.items() if b not in life.in_force}
        returns = {r["bet_id"]: (r["account_id"], r["stake"]) for r in payload["returns"]}
        check(
            returns == standing and len(returns) == len(payload["returns"]),
            f"{where}: the void does not return every standing stake",
        )
        check(all(r["returned"] == r["stake"] for r in payload["returns"]), f"{where}: in full")
        legs = []
        for result in payload["returns"]:
            legs += [
                posting(f"in-play:{life.round_id}", -result["stake"], life.currency),
                posting(f"wallet:{result['account_id']}", result["stake"], life.currency),
            ]
        check(payload["postings"] == legs, f"{where}: postings are not the void's")
        life.status, life.pending = "voided", None
        self.found.voids += 1

    def corrected(self, life: Life, payload: dict[str, Any], when: When, where: str) -> None:
        check(life.seed is None, f"{where}: a correction at an RNG table")
        check(life.status == "over", f"{where}: a correction of a round not settled")
        step = payload.get("step")
        wrong, right = payload["wrong_outcome"], payload["right_outcome"]
        fact = {
            "action": "correct",
            "round": life.round_id,
            "reason": payload["reason"],
            "wrong": wrong,
            "right": right,
        }
        self.signed(
            "operator",
            fact if step is None else {**fact, "step": step},
            payload["operator"],
            when,
            where,
        )
        if step is None:
            self.corrected_outcome(life, payload, where)
        else:
            self.corrected_move(life, payload, step, where)
        self.found.corrections += 1
        self.found.settlements += 1

    def replay(self, life: Life, moves: list[Move], where: str) -> list[Step]:
        steps = [life.game.step(life.bets, [])]
        for n, move in enumerate(moves):
            offered = steps[-1].moves.get(move.actor, {})
            check(move.action in offered, f"{where}: corrected, move {n} is not offered")
            draw = offered[move.action]
            check(len(move.drawn) == (0 if draw is None else draw[1]), f"{where}: move {n}")
            steps.append(life.game.step(life.bets, moves[: n + 1]))
        return steps

    def corrected_move(self, life: Life, payload: dict[str, Any], step: int, where: str) -> None:
        check(0 <= step < len(life.moves), f"{where}: no move {step}")
        done, wrong, right = life.moves[step], payload["wrong_outcome"], payload["right_outcome"]
        if done.drawn:
            kind = next(iter(wrong), "")
            check(wrong == {kind: done.drawn} and set(right) == {kind}, f"{where}: not its draw")
            fixed = Move(done.actor, done.action, done.args, right[kind])
        else:
            check(wrong == done.args, f"{where}: not the move's arguments")
            fixed = Move(done.actor, done.action, right, [])
        moves = [*life.moves[:step], fixed, *life.moves[step + 1 :]]
        steps = self.replay(life, moves, where)
        settles: dict[str, tuple[int, int]] = {}
        for number, after in enumerate(steps[1:]):
            if number >= step:
                check(after.void is None, f"{where}: corrected, the game voids the round")
                settles.update({bet: (number, paid) for bet, paid in after.settle.items()})
        check(steps[-1].over, f"{where}: corrected, the round is not over")
        in_force = {b: r for b, (n, r) in life.in_force.items() if n is not None and n >= step}
        reversed_results = {r["bet_id"]: r for r in payload["reversed_results"]}
        check(
            reversed_results == in_force and len(in_force) == len(payload["reversed_results"]),
            f"{where}: reverses other settlements than those in force",
        )
        check(set(settles) == set(in_force), f"{where}: re-settles other bets")
        self.results(life, payload["results"], {b: paid for b, (_, paid) in settles.items()}, where)
        check(payload["settled_at"] == {b: n for b, (n, _) in settles.items()}, f"{where}: at")
        legs = negated(settlement_postings(*life.where_paid, payload["reversed_results"]))
        legs += settlement_postings(*life.where_paid, payload["results"])
        check(payload["postings"] == legs, f"{where}: postings are not the correction's")
        life.moves = moves
        life.in_force.update(
            {r["bet_id"]: (settles[r["bet_id"]][0], r) for r in payload["results"]}
        )

    def corrected_outcome(self, life: Life, payload: dict[str, Any], where: str) -> None:
        wrong, right = payload["wrong_outcome"], payload["right_outcome"]
        check(wrong == life.outcome and right != wrong, f"{where}: not the outcome recorded")
        done, kind = life.moves[-1], next(iter(right), "")
        check(set(right) == {kind} and isinstance(right[kind], list), f"{where}: not an outcome")
        moves = [*life.moves[:-1], Move(done.actor, done.action, done.args, right[kind])]
        last = self.replay(life, moves, where)[-1]
        check(last.over and set(last.settle) == set(life.bets), f"{where}: corrected, not over")
        in_force = {b: r for b, (_, r) in life.in_force.items()}
        check(
            {r["bet_id"]: r for r in payload["reversed_results"]} == in_force,
            f"{where}: reverses another settlement than the one in force",
        )
        self.results(life, payload["results"], last.settle, where)
        new = settlement_postings(*life.where_paid, payload["results"])
        check(payload["postings"] == negated(life.settled_postings) + new, f"{where}: postings")
        life.moves, life.outcome, life.settled_postings = moves, right, new
        life.in_force = {r["bet_id"]: (None, r) for r in payload["results"]}

    # The audit trail.

    def recorded_run(self, payload: dict[str, Any], event: Event, when: When, where: str) -> None:
        run = payload["run"]
        fact = {"kind": "verification-run", **run}
        key = actor_key(self.keys, "auditor", fact, payload["auditor"], where)
        for moment in (run["verified_at"], when.at):
            problem = key_problem(key, moment, when.covered)
            check(problem is None, f"{where}: auditor key {key.name}: {problem}")
        self.run_claims(run, event, where)
        self.found.actor_signatures["auditor"] = self.found.actor_signatures.get("auditor", 0) + 1
        self.found.runs += 1

    def run_claims(self, run: dict[str, Any], event: Event, where: str) -> None:
        """What a recorded run says of the log: its time, its size, its roots."""
        check(event.signed_at is None or run["verified_at"] <= event.signed_at, f"{where}: late")
        check(run["tree_size"] <= event.position, f"{where}: a run over events after it")
        if self.whole and run["root"] is not None:
            root = merkle_root(self.leaves[: run["tree_size"]]).hex()
            check(run["root"] == root, f"{where}: the run's root is not the log's")
        if self.whole and run["checkpoint"] is not None:
            size, root = run["checkpoint"]["size"], run["checkpoint"]["root"]
            check(merkle_root(self.leaves[:size]).hex() == root, f"{where}: its checkpoint")

    def finish(self) -> Contents:
        for life in self.rounds.values() if self.whole_rounds else ():
            check(life.pending is None, f"round {life.round_id}: a settlement is missing")
        for seed_id, round_id, how, drawn, where in self.draws:
            seed = self.revealed.get(seed_id)
            if seed is None:
                self.found.rng_pending += 1
            elif isinstance(how, int):
                check(rng_dice(seed, round_id, how) == drawn, f"{where}: not what the seed throws")
                self.found.rng_dice += 1
            else:
                deck = rng_deck(seed, round_id)
                check([deck[p] for p in how] == drawn, f"{where}: not what the seed deals")
                self.found.rng_cards += 1
        if self.whole:
            for account, balance in self.balances.items():
                check(
                    self.posted.get(f"wallet:{account}", 0) == balance,
                    f"account {account}: its events and its postings disagree",
                )
            for name, amount in self.posted.items():
                kind, _, ident = name.partition(":")
                known = {"wallet": self.balances, "in-play": self.rounds}.get(kind)
                check(known is None or ident in known, f"postings name {name}, not in the log")
                life = self.rounds.get(ident) if kind == "in-play" else None
                if life is not None and life.status != "open":
                    check(amount == 0, f"round {ident} ended with stakes still in play")
            self.found.wallets = len(self.balances)
        return self.found


@dataclass
class Verified:
    events: int
    streams: int
    checkpoints: int
    proofs: int
    contents: Contents = field(default_factory=Contents)


def verify_bundle(bundle: Path) -> Verified:
    manifest = json.loads((bundle / "manifest.json").read_text())
    check(manifest["schema_version"] == 1, "unknown schema_version")
    keys = load_keyring(bundle)
    read_revocations(bundle, keys)
    audit = ContentAudit(keys, load_games(bundle), manifest["selection"]["kind"])
    checkpoints = {}
    for record in lines(bundle / "checkpoints.jsonl"):
        checkpoint = read_checkpoint(record["note"], keys)
        check(checkpoint.size == record["tree_size"], "checkpoint row size differs from its note")
        kept = checkpoints.get(checkpoint.size)
        if kept is None or checkpoint.issued_at < kept.issued_at:
            checkpoints[checkpoint.size] = checkpoint
    check(len({c.origin for c in checkpoints.values()}) <= 1, "checkpoints of several logs")
    whole = manifest["selection"]["kind"] == "all"
    proofs = None if whole else lines(bundle / "proofs.jsonl")
    extends = set()  # (older size, newer size), proven
    if not whole:
        for record in lines(bundle / "consistency.jsonl"):
            older, newer = checkpoints[record["from_size"]], checkpoints[record["to_size"]]
            path = [base64.b64decode(p, validate=True) for p in record["proof"]]
            check_consistency(older.size, newer.size, path, older.root, newer.root)
            extends.add((older.size, newer.size))
    heads: dict[str, tuple[int, bytes]] = {}
    leaves: list[bytes] = []
    accounts: list[Event] = []  # every account event, for the account heads maps
    last_position, proven = -1, 0
    for record in lines(bundle / "events.jsonl"):
        event = read_event(record, keys)
        # Log order: the whole log is positions 0..n-1; a part, increasing positions.
        if whole:
            check(event.position == len(leaves), f"log position {event.position} out of order")
        check(event.position > last_position, "events out of log order")
        last_position = event.position
        head = heads.get(event.stream)
        if head is None:
            check(event.version == 1 or not whole, "a stream starts after version 1")
            check(event.version != 1 or event.prev == GENESIS, "first event names a previous")
        else:
            check(event.version == head[0] + 1, f"stream {event.stream} skips a version")
            check(event.prev == head[1].hex(), f"stream {event.stream}: chain broken")
        heads[event.stream] = (event.version, event.leaf)
        if record["type"].startswith("Account."):
            accounts.append(event)
        if proofs is not None:
            proof = next(proofs)
            check(proof["position"] == event.position, "proof for another event")
            checkpoint = checkpoints[proof["tree_size"]]
            path = [base64.b64decode(p, validate=True) for p in proof["proof"]]
            root = root_from_inclusion(event.position, checkpoint.size, event.leaf, path)
            check(root == checkpoint.root, f"log position {event.position}: not included")
            first = first_covering(checkpoints, event.position)
            proven_under = first.size == checkpoint.size or (first.size, checkpoint.size) in extends
            check(proven_under, f"log position {event.position}: no consistency proof")
            proven += 1
        else:
            leaves.append(event.leaf)
            first = first_covering(checkpoints, event.position)
        judge_key(event, first)
        audit.observe(record, event, first)
    if whole:
        for size, checkpoint in checkpoints.items():
            check(size <= len(leaves), f"checkpoint of size {size} covers missing events")
            check(merkle_root(leaves[:size]) == checkpoint.root, f"root of size {size} differs")
            if checkpoint.accounts is not None:
                under = dict(account_leaf(e) for e in accounts if e.position < size)
                check(heads_root(under) == checkpoint.accounts, f"accounts of size {size} differ")
    count = len(leaves) if whole else proven
    check(count == manifest["events"], "the manifest's count is not the events'")
    return Verified(count, len(heads), len(checkpoints), proven, audit.finish())


def first_covering(checkpoints: dict[int, Checkpoint], position: int) -> Checkpoint | None:
    covering = [c for c in checkpoints.values() if c.size > position]
    return min(covering, key=lambda c: c.size) if covering else None


def judge_key(event: Event, first: Checkpoint | None) -> None:
    """Signed no later than the first checkpoint covering it was issued; a revoked
    key's signature only under a checkpoint issued before the revocation."""
    if first is not None:
        check(event.signed_at is None or event.signed_at <= first.issued_at, "late")
    revoked_at = event.key.revoked_at
    if revoked_at is not None:
        check(
            first is not None
            and first.issued_at < revoked_at
            and (event.signed_at is None or event.signed_at < revoked_at),
            f"log position {event.position}: signed by a revoked key",
        )


# The bundles: exports of a store with dice and card tables, its ledger-node
# key replaced and revoked between two simulated sessions.


REPRODUCIBLE = Path(__file__).resolve().parents[1] / "reproducible.py"


def ledger(*argv: str, cwd: Path, seed: int | None = None) -> str:
    """`ledger ARGS` (with a `seed`, in a session that is the same every run:
    tests/reproducible.py); with no background anchor, so the checkpoints are
    the ones simulate and `checkpoint` sign, whatever the machine's speed."""
    env = os.environ | {
        "LEDGER_PASSPHRASE": "independent",
        "LEDGER_PROGRESS_INTERVAL": "off",
        "LEDGER_ANCHOR_SECONDS": "0",
        "LEDGER_ANCHOR_EVENTS": "0",
    }
    command = [str(LEDGER)] if seed is None else [sys.executable, str(REPRODUCIBLE), str(seed)]
    done = subprocess.run(
        [*command, *argv], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("independent")
    ledger("simulate", "--rounds", "10", "--players", "4", "--tables", "1", cwd=where, seed=3)
    ledger("keys", "create", "ledger-node-2", "--role", "ledger-node", cwd=where)
    ledger("keys", "use", "ledger-node-2", cwd=where)
    ledger("keys", "create", "ops", "--role", "operator", cwd=where)
    ledger("keys", "revoke", "ledger-node", "--reason", "rotated", cwd=where)
    ledger("simulate", "--rounds", "2", "--players", "2", "--tables", "1", cwd=where, seed=4)
    ledger("export", "whole", cwd=where)
    rounds: dict[str, str] = {}
    for record in lines(where / "whole" / "events.jsonl"):
        if record["type"] == "Round.Opened":
            kind = "cards" if opening(record["payload"])["game"].startswith("xidach") else "dice"
            rounds.setdefault(kind, record["stream"])
    bundles = {"whole": where / "whole"}
    for kind, round_id in rounds.items():
        ledger("export", kind, "--round", round_id, cwd=where)
        bundles[kind] = where / kind
    ledger("export", "range", "--from", "20", "--to", "60", cwd=where)
    bundles["range"] = where / "range"
    return bundles


def test_a_whole_log_bundle_verifies_independently(exported: dict[str, Path]) -> None:
    verified = verify_bundle(exported["whole"])
    assert verified.events > 100 and verified.checkpoints >= 1 and verified.streams > 10
    # This release writes C2SP notes: the reader above took its C2SP branch.
    for record in lines(exported["whole"] / "checkpoints.jsonl"):
        encoded = record["note"].rstrip("\n").rsplit(" ", 1)[1]
        assert len(base64.b64decode(encoded)) == 4 + 64


@pytest.mark.parametrize("kind", ["dice", "cards"])
def test_a_round_bundle_verifies_independently(exported: dict[str, Path], kind: str) -> None:
    verified = verify_bundle(exported[kind])
    assert verified.streams == 1 and verified.proofs == verified.events >= 3


def test_a_range_bundle_verifies_independently(exported: dict[str, Path]) -> None:
    verified = verify_bundle(exported["range"])
    assert verified.proofs == verified.events == 41
    # Signed by the key revoked since, proven under the checkpoint issued before
    # the revocation: the newest checkpoint extends it.
    keys = json.loads((exported["range"] / "keyring.json").read_text())["keys"]
    assert [k["name"] for k in keys if k.get("revoked_at")] == ["ledger-node"]
    assert len(list(lines(exported["range"] / "consistency.jsonl"))) == 1


def _edited(bundle: Path, target: Path, line: int, change: Any) -> Path:
    target.mkdir()
    for file in bundle.iterdir():
        if file.is_dir():  # tlog-proofs/
            shutil.copytree(file, target / file.name)
        else:
            (target / file.name).write_bytes(file.read_bytes())
    records = list(lines(target / "events.jsonl"))
    change(records[line])
    (target / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return target


def test_the_independent_verifier_can_fail(exported: dict[str, Path], tmp_path: Path) -> None:
    """Its checks are real: an edited bundle is refused by it too."""

    def flip_signature(record: dict[str, Any]) -> None:
        envelope = bytearray(base64.b64decode(record["envelope"]))
        envelope[6 + int.from_bytes(envelope[4:6], "big")] ^= 1
        record["envelope"] = base64.b64encode(bytes(envelope)).decode()

    def inflate(record: dict[str, Any]) -> None:
        record["payload"]["timestamp"] = "2020-01-01T00:00:00+00:00"

    def move(record: dict[str, Any]) -> None:
        record["position"] += 1

    cases = [(flip_signature, "bad ledger-node signature"), (inflate, "decoded payload")]
    for number, (change, message) in enumerate(cases):
        for kind in ("whole", "cards"):
            edited = _edited(exported[kind], tmp_path / f"{kind}{number}", 2, change)
            with pytest.raises(BundleError, match=message):
                verify_bundle(edited)
    with pytest.raises(BundleError, match="out of order"):
        verify_bundle(_edited(exported["whole"], tmp_path / "moved", 2, move))
    with pytest.raises(BundleError, match=r"proof for another event|not included"):
        verify_bundle(_edited(exported["dice"], tmp_path / "moved-dice", 0, move))
    # A consistency proof edited, or removed; a revocation moved before every checkpoint.
    edited = _edited(exported["range"], tmp_path / "consistency", 0, lambda record: None)
    (proof,) = lines(edited / "consistency.jsonl")
    proof["proof"][0] = base64.b64encode(bytes(32)).decode()
    (edited / "consistency.jsonl").write_text(json.dumps(proof) + "\n")
    with pytest.raises(BundleError, match=r"consistency from size \d+ to \d+ fails"):
        verify_bundle(edited)
    (edited / "consistency.jsonl").write_text("")
    with pytest.raises(BundleError, match="no consistency proof"):
        verify_bundle(edited)
    edited = _edited(exported["whole"], tmp_path / "revoked", 0, lambda record: None)
    keyring = json.loads((edited / "keyring.json").read_text())
    for key in keyring["keys"]:
        if key.get("revoked_at"):
            key["revoked_at"] = key["not_before"]
    (edited / "keyring.json").write_text(json.dumps(keyring))
    with pytest.raises(BundleError, match="log position 0: signed by a revoked key"):
        verify_bundle(edited)
    # Rules data a round did not pin: the rounds are settled by their rules hash.
    # (A node that lies about payouts or forges actors: see the lying node below.)
    edited = _edited(exported["whole"], tmp_path / "rules", 0, lambda record: None)
    games = list(lines(edited / "games.jsonl"))
    games[0]["rules"]["tampered"] = True
    (edited / "games.jsonl").write_text("".join(json.dumps(g) + "\n" for g in games))
    with pytest.raises(BundleError, match="do not hash"):
        verify_bundle(edited)


def test_the_note_reader_meets_the_signed_note_known_answer() -> None:
    """C2SP signed-note's published example (Go's note package), read by this
    module's own reader: so the checkpoints above are checked as C2SP says."""
    vector = json.loads(SIGNED_NOTE.read_text())
    name, hash_hex, encoded = vector["verifier_key"].split("+")
    raw = base64.b64decode(encoded)[1:]  # after the algorithm byte 0x01
    assert note_key_hash(name, raw).hex() == hash_hex
    key = Key(name, raw, "checkpoint", Ed25519PublicKey.from_public_bytes(raw), 0, None, None)
    text, _ = open_note(vector["note"], {"any": key}, "checkpoint")
    assert text == vector["text"]
    with pytest.raises(BundleError, match="bad checkpoint signature"):
        open_note(vector["note"].replace("problem,", "problem;"), {"any": key}, "checkpoint")


# Every kind of event: a store made by a separate program (tests/independent_store.py,
# which uses the ledger as `ledger` does), and the stores of releases 0.1 and 0.2.

BUILDER = Path(__file__).resolve().parents[1] / "independent_store.py"
RELEASES = Path(__file__).resolve().parents[1] / "data"
# Stores written before: releases 0.1 and 0.2, and the code before the game's
# rename (opening events of version 2, with the older names).
OLD_STORES = {"0.1": "release-0.1-store", "0.2": "release-0.2-store", "v2": "pre-rename-store"}
PASSPHRASE = b"independent"


@pytest.fixture(scope="module")
def every(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("every")
    env = os.environ | {"LEDGER_PASSPHRASE": PASSPHRASE.decode(), "LEDGER_PROGRESS_INTERVAL": "off"}
    store = f"sqlite:///{where / 'ledger.db'}"
    done = subprocess.run(
        [sys.executable, str(BUILDER), store, str(where / "keys")],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    ledger("export", "whole", cwd=where)
    bundles = {"whole": where / "whole", "keys": where / "keys"}
    # Round bundles of physical Xì dách rounds: a misdeal, a corrected card.
    physical, chosen = set(), {}
    for record in lines(where / "whole" / "events.jsonl"):
        payload, stream = record["payload"], record["stream"]
        if record["type"] == "Round.Opened" and opening(payload)["game"] == "xidach":
            if opening(payload)["seed_id"] is None:
                physical.add(stream)
        elif record["type"] == "Round.Voided" and stream in physical and not payload["operator"]:
            chosen.setdefault("misdeal", stream)
        elif record["type"] == "Round.Corrected" and stream in physical:
            chosen.setdefault("corrected", stream)
    for kind, round_id in chosen.items():
        ledger("export", kind, "--round", round_id, cwd=where)
        bundles[kind] = where / kind
    for release, store in OLD_STORES.items():
        copy = where / f"release-{release}"
        for file in (RELEASES / store).rglob("*"):
            target = copy / file.relative_to(RELEASES / store)
            if file.is_dir():
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(file.read_bytes())
        ledger(
            "--store",
            f"sqlite:///{copy / 'ledger.db'}",
            "--keys",
            str(copy / "keys"),
            "export",
            f"bundle-{release}",
            cwd=where,
        )
        bundles[release] = where / f"bundle-{release}"
    return bundles


def test_every_kind_of_event_verifies_independently(every: dict[str, Path]) -> None:
    """Every actor's signature, every draw, every settlement, void and correction,
    every posting and wallet, the revocation and the recorded run."""
    found = verify_bundle(every["whole"]).contents
    assert found.actor_signatures["dealer-device"] > 40
    # Two voids, a resume, two corrections, a revocation, an erasure.
    assert found.actor_signatures["operator"] == 7 and found.erasures == 1
    assert found.rules_recorded == 4  # the four games installed here: their rules data
    assert found.actor_signatures["auditor"] == found.runs == found.revocations == 1
    assert (
        found.corrections == 2 and found.voids >= 4
    )  # two operators', a fault policy's, a misdeal
    assert found.rng_dice > 0 and found.rng_cards > 0 and found.rng_pending == 0
    assert found.rounds > 30 and found.settlements > 30 and found.bets > 30
    assert found.wallets > 10 and found.movements > 80


def test_physical_round_bundles_check_their_actors(every: dict[str, Path]) -> None:
    """Round bundles: their device reports and operator signatures checked, each
    settlement re-derived (`ledger verify --bundle` checks neither signature)."""
    misdeal = verify_bundle(every["misdeal"]).contents  # a natural paid, then a misdeal
    assert misdeal.actor_signatures == {"dealer-device": 2}  # the deal, the fault
    assert (misdeal.rounds, misdeal.settlements, misdeal.voids) == (1, 1, 1)
    corrected = verify_bundle(every["corrected"]).contents  # deal, hit, stand, stop
    assert corrected.actor_signatures == {"dealer-device": 4, "operator": 1}
    assert (corrected.rounds, corrected.settlements, corrected.corrections) == (1, 2, 1)


@pytest.mark.parametrize("release", ["0.1", "0.2"])
def test_the_old_releases_verify_independently(every: dict[str, Path], release: str) -> None:
    """Release 0.1: v1 envelopes (judged by the first checkpoint covering them),
    old checkpoints. Release 0.2: rounds of settlement API 1 with faulty
    draws, a correction and an operator's void."""
    verified = verify_bundle(every[release])
    found = verified.contents
    assert found.rng_dice == 30 if release == "0.1" else found.rng_dice == 20
    first = next(lines(every[release] / "events.jsonl"))
    assert ("signed_at" in first["header"]) == (release == "0.2")
    if release == "0.2":
        assert found.corrections == 1 and found.voids == 1
        assert found.actor_signatures == {"dealer-device": 22, "operator": 2}


def test_opening_events_of_version_2_verify_independently(every: dict[str, Path]) -> None:
    """The store of the code before the rename: its `Round.Opened` and
    `GameTable.Opened` are version 2, their game (and a round's seed) under
    the older names docs/export.md gives; dice and cards, RNG and physical."""
    records = list(lines(every["v2"] / "events.jsonl"))
    opened = [r["payload"] for r in records if r["type"] == "Round.Opened"]
    tables = [r["payload"] for r in records if r["type"] == "GameTable.Opened"]
    assert {p["class_version"] for p in opened + tables} == {2}
    assert all("variant" in p and "game" not in p for p in opened + tables)
    found = verify_bundle(every["v2"]).contents
    assert found.rounds == 40 and found.rng_dice == 14 and found.rng_cards == 14
    assert found.actor_signatures == {"dealer-device": 48}


# A lying node: whoever holds the node's and the checkpoint's private keys
# rewrites the log consistently (every envelope re-signed, every chain relinked,
# every checkpoint re-signed over the recomputed roots). Only what the actors
# signed and what the rules say can give it away.


class Forger:
    def __init__(self, keys_dir: Path) -> None:
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            PublicFormat,
            load_pem_private_key,
        )

        self.private = {}
        for pem in keys_dir.glob("*.pem"):
            key = load_pem_private_key(pem.read_bytes(), PASSPHRASE)
            raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
            self.private[hashlib.sha256(raw).hexdigest()] = key

    def sign(self, key_id: str, message: bytes) -> bytes:
        return self.private[key_id].sign(message)  # type: ignore[union-attr]

    def resign_run(self, payload: dict[str, Any], leaves: list[bytes]) -> None:
        run = payload["run"]
        if run["root"] is not None:
            run["root"] = merkle_root(leaves[: run["tree_size"]]).hex()
        if run["checkpoint"] is not None:
            run["checkpoint"]["root"] = merkle_root(leaves[: run["checkpoint"]["size"]]).hex()
        if "auditor" not in payload:  # the node's own run: its envelope, resealed, signs it
            return
        signed = payload["auditor"]
        signed["signature"] = self.fact(signed["key_id"], {"kind": "verification-run", **run})

    def fact(self, key_id: str, fact: dict[str, Any]) -> str:
        return base64.b64encode(
            self.sign(key_id, ACTOR_FACT_DOMAIN + canonical_json(fact))
        ).decode()

    def rewrite(self, bundle: Path, edit: Any, runs: bool = True) -> None:
        """`edit(records)` changes decoded payloads and returns the indexes changed.
        With `runs`, the recorded verification runs are signed again (the forger
        holds the auditor's key too) over the roots of the rewritten log."""
        records = list(lines(bundle / "events.jsonl"))
        changed = set(edit(records))
        heads: dict[str, str] = {}
        leaves: list[bytes] = []
        for index, record in enumerate(records):
            if runs and record["type"] == "AuditTrail.VerificationRecorded":
                self.resign_run(record["payload"], leaves)
                changed.add(index)
            if record["type"] == "AuditTrail.SelfVerificationRecorded":  # the node key's own
                self.resign_run(record["payload"], leaves)
                changed.add(index)
            envelope = base64.b64decode(record["envelope"])
            size = int.from_bytes(envelope[4:6], "big")
            header, payload = envelope[6 : 6 + size], envelope[6 + size + 64 :]
            if index in changed:
                payload = json.dumps(record["payload"], separators=(",", ":")).encode()
            fields = json.loads(header) | {
                "payload_sha256": hashlib.sha256(payload).hexdigest(),
                "prev": heads.get(record["stream"], GENESIS),
            }
            resealed = canonical_json(fields)
            if resealed != header or index in changed:
                magic = envelope[:4]
                signature = self.sign(fields["key_id"], ENVELOPE_DOMAINS[magic] + resealed)
                envelope = magic + len(resealed).to_bytes(2, "big") + resealed + signature + payload
                record["envelope"], record["header"] = base64.b64encode(envelope).decode(), fields
            heads[record["stream"]] = leaf_hash(resealed).hex()
            leaves.append(leaf_hash(resealed))
        (bundle / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        by_name = {
            k["name"]: k["key_id"]
            for k in json.loads((bundle / "keyring.json").read_text())["keys"]
        }
        notes = []
        for line in lines(bundle / "checkpoints.jsonl"):
            origin, size_text, _, time_line = line["note"].split("\n")[:4]
            name, blob = line["note"].rstrip("\n").rsplit("\n", 1)[1].split(" ")[1:]
            root = base64.b64encode(merkle_root(leaves[: int(size_text)])).decode()
            text = f"{origin}\n{size_text}\n{root}\n{time_line}\n"
            signature = self.sign(by_name[name], text.encode())
            signed = base64.b64encode(base64.b64decode(blob)[:4] + signature).decode()
            notes.append({**line, "note": f"{text}\n\u2014 {name} {signed}\n"})
        (bundle / "checkpoints.jsonl").write_text("".join(json.dumps(n) + "\n" for n in notes))


def copied(bundle: Path, target: Path) -> Path:
    target.mkdir()
    for file in bundle.iterdir():
        (target / file.name).write_bytes(file.read_bytes())
    return target


def flipped(signature: str) -> str:
    raw = bytearray(base64.b64decode(signature))
    raw[5] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def first(records: list[dict[str, Any]], test: Any) -> int:
    return next(i for i, r in enumerate(records) if test(r))


def test_the_independent_verifier_catches_a_lying_node(
    every: dict[str, Path], tmp_path: Path
) -> None:
    forger = Forger(every["keys"])
    opened = {
        r["stream"]: opening(r["payload"])
        for r in lines(every["whole"] / "events.jsonl")
        if r["type"] == "Round.Opened"
    }

    def nothing(records: list[dict[str, Any]]) -> list[int]:
        return [first(records, lambda r: r["type"] == "Round.Opened")]  # re-encoded only

    def device(records: list[dict[str, Any]]) -> list[int]:
        i = first(records, lambda r: r["payload"].get("source", {}).get("kind") == "device")
        source = records[i]["payload"]["source"]
        source["signature"] = flipped(source["signature"])
        return [i]

    def signature_of(kind: str, member: str) -> Any:
        def edit(records: list[dict[str, Any]]) -> list[int]:
            i = first(records, lambda r: r["type"] == kind and r["payload"].get(member))
            signed = records[i]["payload"][member]
            signed["signature"] = flipped(signed["signature"])
            return [i]

        return edit

    def payout(game: str) -> Any:
        def edit(records: list[dict[str, Any]]) -> list[int]:
            i = first(
                records,
                lambda r: (
                    r["type"] == "Round.Settled"
                    and opened[r["stream"]]["game"] == game
                    and any(x["returned"] for x in r["payload"]["results"])
                ),
            )
            payload, round_id = records[i]["payload"], records[i]["stream"]
            won = next(x for x in payload["results"] if x["returned"])
            won["returned"] += won["stake"]  # paid once more, the postings made to match
            house, currency = opened[round_id]["house_account"], opened[round_id]["currency"]
            payload["postings"] = settlement_postings(round_id, house, currency, payload["results"])
            return [i]

        return edit

    def seed(records: list[dict[str, Any]]) -> list[int]:
        """Another seed, committed and revealed: its commitment holds, its draws do not."""
        other = hashlib.sha256(b"another seed").digest()
        committed = first(records, lambda r: r["type"] == "GameTable.SeedCommitted")
        seed_id = records[committed]["payload"]["seed_id"]
        revealed = first(
            records,
            lambda r: r["type"] == "GameTable.SeedRevealed" and r["payload"]["seed_id"] == seed_id,
        )
        records[committed]["payload"]["commitment"] = hashlib.sha256(other).hexdigest()
        records[revealed]["payload"]["seed"] = other.hex()
        return [committed, revealed]

    def revoked_earlier(records: list[dict[str, Any]]) -> list[int]:
        """The revocation moved back before the device's reports, re-signed by the
        operator (whose key the forger holds too); the keyring still says later."""
        i = first(records, lambda r: r["type"] == "KeyRegistry.KeyRevoked")
        payload = records[i]["payload"]
        reports = [
            r["header"]["signed_at"]
            for r in records
            if r["payload"].get("source", {}).get("key_id") == payload["key_id"]
        ]
        payload["revoked_at"] = min(reports) - 1
        fact = {
            "kind": "key-revoked",
            **{k: payload[k] for k in ("key_id", "reason", "revoked_at")},
        }
        payload["operator"]["signature"] = forger.fact(payload["operator"]["key_id"], fact)
        return [i]

    def request_twice(records: list[dict[str, Any]]) -> list[int]:
        """A bet's request id given to the round's next bet: a retry placed twice."""
        i = first(records, lambda r: r["type"] == "Round.BetPlaced")
        j = first(
            records,
            lambda r: (
                r["type"] == "Round.BetPlaced"
                and r["stream"] == records[i]["stream"]
                and r is not records[i]
            ),
        )
        records[j]["payload"]["request_id"] = records[i]["payload"]["request_id"]
        return [j]

    control = copied(every["whole"], tmp_path / "control")
    forger.rewrite(control, nothing)
    assert verify_bundle(control).contents.settlements > 30  # the forgery itself holds
    # A forger without the auditor's key: the run's signed root pins the log.
    unsigned = copied(every["whole"], tmp_path / "unsigned")
    forger.rewrite(unsigned, nothing, runs=False)
    with pytest.raises(BundleError, match="the run's root is not the log's"):
        verify_bundle(unsigned)
    cases = [
        (device, "bad dealer-device signature"),
        (signature_of("Round.Voided", "operator"), "bad operator signature"),
        (signature_of("Round.Resumed", "operator"), "bad operator signature"),
        (signature_of("Round.Corrected", "operator"), "bad operator signature"),
        (signature_of("KeyRegistry.KeyRevoked", "operator"), r"\(the revocation\): bad operator"),
        # (the run left as it was signed, but for the flipped signature)
        (signature_of("AuditTrail.VerificationRecorded", "auditor"), "bad auditor signature"),
        (payout("taixiu"), r"returned \d+, the rules pay \d+"),
        (payout("xidach"), r"returned \d+, the rules pay \d+"),
        (seed, "not what the seed (throws|deals)"),
        (revoked_earlier, "dealer-device key dealer-device-2: signed by a revoked key"),
        (request_twice, "a request placed twice"),
    ]
    for number, (edit, message) in enumerate(cases):
        forged = copied(every["whole"], tmp_path / f"forged-{number}")
        forger.rewrite(forged, edit, runs="auditor" not in message)
        with pytest.raises(BundleError, match=message):
            verify_bundle(forged)


def test_this_module_imports_nothing_from_ledger() -> None:
    import ast

    tree = ast.parse(Path(__file__).read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert "ledger" not in imported and "tests" not in imported
    assert imported <= set(sys.stdlib_module_names) | {"pytest", "cryptography", "__future__"}
