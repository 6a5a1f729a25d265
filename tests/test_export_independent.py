"""An auditor's own verifier of an export bundle, written from docs/export.md
alone: it imports nothing from `ledger` (the standard library and an Ed25519
implementation, `cryptography`), and runs the `ledger` command only as a
separate program to make the bundles it checks. If the format and its
documentation drift apart, this module fails.

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
key, that checkpoint issued before the revocation). The bundles come from a
store whose first ledger-node key was revoked between two sessions.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

LEDGER = Path(sys.executable).parent / "ledger"
ENVELOPE_DOMAINS = {
    b"LSE2": b"casino-ledger/event-envelope/v2\n",
    b"LSE1": b"casino-ledger/event-envelope/v1\n",
}
OLD_CHECKPOINT_DOMAIN = b"casino-ledger/checkpoint/v1\n"  # release 0.2 and before
SIGNED_NOTE = Path(__file__).resolve().parent / "data" / "signed-note" / "vector.json"
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


def note_key_hash(name: str, raw: bytes) -> bytes:
    """C2SP signed-note: the first 4 bytes of SHA-256(name || 0x0A || 0x01 || public key)."""
    return hashlib.sha256(name.encode() + b"\n" + b"\x01" + raw).digest()[:4]


def open_note(note: str, keys: dict[str, Key], role: str) -> tuple[str, Key]:
    """A signed note's text, checked: the text (lines ending in newlines), a blank
    line, one signature line `— <name> <base64>`. C2SP: the base64 holds the
    4-byte key hash and the signature over the text, the key found by its name
    and hash. The old form: the bare signature over a prefix and the text, the
    key named by its key id."""
    text, blank, signature_line = note.partition("\n\n")
    check(blank == "\n\n" and signature_line.endswith("\n"), "not a signed note")
    text += "\n"
    dash, name, encoded = signature_line[:-1].split(" ")
    check(dash == "\u2014", "a signature line starts with an em dash")
    blob = base64.b64decode(encoded, validate=True)
    if len(blob) == 4 + 64:
        found = [
            (key_id, key)
            for key_id, key in keys.items()
            if key.name == name and note_key_hash(key.name, key.raw) == blob[:4]
        ]
        check(len(found) == 1, f"no key {name} with that key hash")
        key_id, message, signature = found[0][0], text.encode(), blob[4:]
    else:
        check(len(blob) == 64, "a signature is 64 bytes, or 4 + 64")
        key_id, message, signature = name, OLD_CHECKPOINT_DOMAIN + text.encode(), blob
    return text, signed_by(keys, key_id, role, message, signature)


def read_checkpoint(note: str, keys: dict[str, Key]) -> Checkpoint:
    """The text's lines: origin, size, base64 root, `time <ISO-8601>`."""
    text, key = open_note(note, keys, "checkpoint")
    origin, size, root, time_line = text.splitlines()
    check(time_line.startswith("time ") and size.isdigit(), "not a checkpoint")
    issued_at = micros(time_line[5:])
    check(key.not_before <= issued_at, "checkpoint signed before its key was valid")
    check(key.not_after is None or issued_at < key.not_after, "signed after its key expired")
    return Checkpoint(origin, int(size), base64.b64decode(root, validate=True), issued_at)


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


def lines(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            yield json.loads(line)


@dataclass
class Verified:
    events: int
    streams: int
    checkpoints: int
    proofs: int


def verify_bundle(bundle: Path) -> Verified:
    manifest = json.loads((bundle / "manifest.json").read_text())
    check(manifest["schema_version"] == 1, "unknown schema_version")
    keys = load_keyring(bundle)
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
    if whole:
        for size, checkpoint in checkpoints.items():
            check(size <= len(leaves), f"checkpoint of size {size} covers missing events")
            check(merkle_root(leaves[:size]) == checkpoint.root, f"root of size {size} differs")
    count = len(leaves) if whole else proven
    check(count == manifest["events"], "the manifest's count is not the events'")
    return Verified(count, len(heads), len(checkpoints), proven)


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


def ledger(*argv: str, cwd: Path) -> str:
    env = os.environ | {"LEDGER_PASSPHRASE": "independent", "LEDGER_PROGRESS_INTERVAL": "off"}
    done = subprocess.run(
        [str(LEDGER), *argv], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("independent")
    ledger(
        "simulate", "--rounds", "10", "--players", "4", "--tables", "1", "--seed", "3", cwd=where
    )
    ledger("keys", "create", "ledger-node-2", "--role", "ledger-node", cwd=where)
    ledger("keys", "use", "ledger-node-2", cwd=where)
    ledger("keys", "create", "ops", "--role", "operator", cwd=where)
    ledger("keys", "revoke", "ledger-node", "--reason", "rotated", cwd=where)
    ledger("simulate", "--rounds", "2", "--players", "2", "--tables", "1", "--seed", "4", cwd=where)
    ledger("export", "whole", cwd=where)
    rounds: dict[str, str] = {}
    for record in lines(where / "whole" / "events.jsonl"):
        if record["type"] == "Round.Opened":
            kind = "cards" if record["payload"]["variant"].startswith("xidach") else "dice"
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
