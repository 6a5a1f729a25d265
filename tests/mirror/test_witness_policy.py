"""`verify --trusted` and `verify --bundle` with a witness policy (k of n), on
both stores, and the attacks on it: a forged cosignature, a "witness" whose key
is the log's own or an operator's, cosignatures moved from an old checkpoint
onto another, a witness that never cosigned (down), a policy that does not
parse."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.cli.main import main
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.cosignature import Cosigner, cosign, cosigner_verifier_key
from ledger.crypto.keys import Role
from ledger.crypto.note import SignatureLine, verifier_key
from ledger.errors import VerificationError
from ledger.node import Node
from ledger.store.witnessing import WITNESSES_ENV
from tests.conftest import PASSPHRASE
from tests.mirror.test_witness_submission import log_witness
from tests.witness_support import ServedWitness, record, signer


def run(node: Node, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = main(["--store", node.app.store_url, "--keys", str(node.keys.path), *argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.out + captured.err


@pytest.fixture
def cosigned(
    node: Node,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Iterator[tuple[ServedWitness, Path]]:
    """20 events, checkpointed by `ledger checkpoint --export`, one witness cosigning."""
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    record(node, 20)
    with ServedWitness(log_witness(node, tmp_path)) as served:
        monkeypatch.setenv(WITNESSES_ENV, served.setting)
        kept = tmp_path / "kept.txt"
        code, out = run(node, capsys, "checkpoint", "--export", str(kept))
        assert code == 0, out
        yield served, kept


def policy(tmp_path: Path, *keys: str, quorum: int, log: str | None = None) -> Path:
    path = tmp_path / "policy.txt"
    lines = ["# the auditor's witnesses"]
    lines += [f"log {log}"] if log else []
    lines += [f"witness {key}  # one of ours" for key in keys] + [f"quorum {quorum}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def log_key(node: Node) -> str:
    (key,) = node.keyring.with_role(Role.CHECKPOINT)
    return verifier_key(key.name, key.public_key)


def test_the_kept_checkpoint_is_cosigned_and_meets_the_policy(
    node: Node,
    cosigned: tuple[ServedWitness, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    served, kept = cosigned
    note = kept.read_text()
    assert f"\u2014 {served.witness.name} " in note  # the witness's line, in the kept note
    rules = policy(tmp_path, served.verifier_key, quorum=1, log=log_key(node))
    code, out = run(node, capsys, "verify", "--trusted", str(kept), "--witness-policy", str(rules))
    assert code == 0, out
    label = Cosigner.parse(served.verifier_key).label
    assert f"1 of 1 witnesses cosigned it (quorum 1): valid: {label}" in out
    # Two witnesses required, one of them never cosigned: refused, naming it.
    absent = cosigner_verifier_key("witness.example/absent", signer(Role.WITNESS, "a").public_key)
    rules = policy(tmp_path, served.verifier_key, absent, quorum=2)
    code, out = run(node, capsys, "verify", "--trusted", str(kept), "--witness-policy", str(rules))
    assert code == 1
    assert "1 valid cosignatures, the policy needs 2 of 2" in out
    assert f"missing: {Cosigner.parse(absent).label}" in out


def test_a_forged_or_moved_cosignature_is_refused(
    node: Node,
    cosigned: tuple[ServedWitness, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    served, kept = cosigned
    rules = policy(tmp_path, served.verifier_key, quorum=1)
    checkpoint = Checkpoint.from_note(kept.read_text())
    (line,) = checkpoint.others
    # A flipped bit in the signature, then in the timestamp.
    for at in (-1, 6):
        blob = bytearray(line.blob)
        blob[at] ^= 1
        forged = kept.parent / f"forged{at}.txt"
        forged.write_text(
            Checkpoint.to_note(_with_others(checkpoint, (SignatureLine(line.name, bytes(blob)),)))
        )
        code, out = run(
            node, capsys, "verify", "--trusted", str(forged), "--witness-policy", str(rules)
        )
        assert code == 1, out
        assert "does not verify" in out and "invalid:" in out
    # The replay: the cosignature of the kept checkpoint, moved onto the next one.
    record(node, 5)
    code, out = run(node, capsys, "checkpoint", "--export", str(tmp_path / "newer.txt"))
    assert code == 0
    newer = Checkpoint.from_note((tmp_path / "newer.txt").read_text()).bare()
    moved = tmp_path / "moved.txt"
    moved.write_text(_with_others(newer, (line,)).to_note())
    code, out = run(node, capsys, "verify", "--trusted", str(moved), "--witness-policy", str(rules))
    assert code == 1
    assert "does not verify" in out


def _with_others(checkpoint: Checkpoint, others: tuple[SignatureLine, ...]) -> Checkpoint:
    from dataclasses import replace

    return replace(checkpoint, others=others)


def test_a_witness_with_a_key_of_another_role_is_refused(
    node: Node,
    cosigned: tuple[ServedWitness, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The house presents its own keys as a witness: the log's checkpoint key,
    or an operator key, cosigning in the witness format. Both cosignatures
    verify, and the policy is refused for naming them."""
    _, kept = cosigned
    checkpoint = Checkpoint.from_note(kept.read_text())
    node.keys.create("ops", Role.OPERATOR, PASSPHRASE)
    for role, name in ((Role.CHECKPOINT, "checkpoint"), (Role.OPERATOR, "ops")):
        key = node.keys.signer(role, PASSPHRASE, name)
        line = cosign(checkpoint.text, "witness.example/house", key, key.public_key, 2**33)
        fake = tmp_path / f"house-{name}.txt"
        fake.write_text(_with_others(checkpoint, (*checkpoint.others, line)).to_note())
        vkey = cosigner_verifier_key("witness.example/house", key.public_key)
        rules = policy(tmp_path, vkey, quorum=1)
        code, out = run(
            node, capsys, "verify", "--trusted", str(fake), "--witness-policy", str(rules)
        )
        assert code == 2, out
        assert f"has the key of the keyring's {role.value} key {name!r}" in out
    # The log's own signature presented as the witness's cosignature: under the
    # witness's name it is not the witness's line (another key ID); with the
    # witness's key ID too, it is no cosignature (68 bytes, another message).
    served, _ = cosigned
    rules = policy(tmp_path, served.verifier_key, quorum=1)
    witness = Cosigner.parse(served.verifier_key)
    own = checkpoint.own_line
    for blob, said in ((own.blob, "missing: "), (witness.key_id + own.blob[4:], "holds 68 bytes")):
        fake = tmp_path / "renamed.txt"
        fake.write_text(_with_others(checkpoint, (SignatureLine(witness.name, blob),)).to_note())
        code, out = run(
            node, capsys, "verify", "--trusted", str(fake), "--witness-policy", str(rules)
        )
        assert code == 1, out
        assert "0 valid cosignatures" in out and said in out


def test_the_bundle_carries_the_cosignatures(
    node: Node,
    cosigned: tuple[ServedWitness, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    served, _ = cosigned
    bundle = tmp_path / "bundle"
    code, out = run(node, capsys, "export", str(bundle))
    assert code == 0, out
    rules = policy(tmp_path, served.verifier_key, quorum=1)
    verify = [
        "verify",
        "--bundle",
        str(bundle),
        "--level",
        "signatures",
        "--witness-policy",
        str(rules),
    ]
    code, out = run(node, capsys, *verify)
    assert code == 0, out
    assert "the bundle's newest checkpoint (size 20): 1 of 1 witnesses cosigned it" in out
    # Without the policy the cosigned copy is the same signed statement: still OK,
    # for `ledger verify` and for the auditor's own verifier written from the docs.
    code, out = run(node, capsys, "verify", "--bundle", str(bundle), "--level", "signatures")
    assert code == 0, out
    from tests.export.test_export_independent import verify_bundle

    notes = [json.loads(x)["note"] for x in (bundle / "checkpoints.jsonl").read_text().splitlines()]
    assert any(f"\u2014 {served.witness.name} " in note for note in notes)
    verify_bundle(bundle)
    # A forged cosignature in the bundle.
    path = bundle / "checkpoints.jsonl"
    lines = path.read_text().splitlines()
    last = json.loads(lines[-1])
    text, _, signature = last["note"].rpartition(f"\u2014 {served.witness.name} ")
    blob = bytearray(base64.b64decode(signature))
    blob[-1] ^= 1
    last["note"] = f"{text}\u2014 {served.witness.name} {base64.b64encode(bytes(blob)).decode()}\n"
    path.write_text("\n".join([*lines[:-1], json.dumps(last)]) + "\n")
    code, out = run(node, capsys, *verify)
    assert code == 1
    assert "0 valid cosignatures, the policy needs 1 of 1" in out
    # The cosigned line removed: the witness is missing.
    path.write_text("\n".join(lines[:-1]) + "\n")
    code, out = run(node, capsys, *verify)
    assert code == 1
    assert f"missing: {Cosigner.parse(served.verifier_key).label}" in out


def test_a_down_witness_leaves_the_checkpoint_uncosigned(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.ports import free_port

    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    key = cosigner_verifier_key("witness.example/down", signer(Role.WITNESS, "d").public_key)
    monkeypatch.setenv(WITNESSES_ENV, f"http://127.0.0.1:{free_port()} {key}")  # nothing there
    record(node, 6)
    kept = tmp_path / "kept.txt"
    code, out = run(node, capsys, "checkpoint", "--export", str(kept))
    assert code == 0, out  # the checkpoint is made and kept
    assert Checkpoint.from_note(kept.read_text()).others == ()
    rules = policy(tmp_path, key, quorum=1)
    code, out = run(node, capsys, "verify", "--trusted", str(kept), "--witness-policy", str(rules))
    assert code == 1
    assert "0 valid cosignatures" in out and "missing: witness.example/down+" in out


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("quorum 1\n", "names no witness"),
        ("witness {w}\n", "no 'quorum <k>' line"),
        ("witness {w}\nquorum 2\n", "quorum 2 but only 1 witnesses"),
        ("witness {w}\nquorum 0\n", "not a whole number"),
        ("witness {w}\nwitness {w}\nquorum 1\n", "twice"),
        ("witness {log}\nquorum 1\n", "not a cosignature/v1 Ed25519 key"),
        ("witness {w}\nquorum 1\nkeep all\n", "'keep' is not"),
        ("log {logw}\nwitness {logw}\nquorum 1\n", "the log's own key"),
    ],
)
def test_a_bad_policy_is_one_line_and_exit_2(
    node: Node,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    error: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    record(node, 2)
    kept = tmp_path / "kept.txt"
    assert run(node, capsys, "checkpoint", "--export", str(kept))[0] == 0
    w = cosigner_verifier_key("w.example/1", signer(Role.WITNESS, "w").public_key)
    (key,) = node.keyring.with_role(Role.CHECKPOINT)
    logw = cosigner_verifier_key(key.name, key.public_key)
    if "log {logw}" in text:
        text = text.replace("log {logw}", f"log {log_key(node)}")
        text = text.replace("{logw}", cosigner_verifier_key("x", key.public_key))
    rules = tmp_path / "p.txt"
    rules.write_text(text.format(w=w, log=log_key(node), logw=logw))
    code, out = run(node, capsys, "verify", "--trusted", str(kept), "--witness-policy", str(rules))
    assert code == 2, out
    assert error in out and len(out.strip().splitlines()) == 1
    code, out = run(node, capsys, "verify", "--witness-policy", str(rules))
    assert code == 2 and "--trusted FILE" in out


def test_an_attacker_with_database_rights_cannot_add_or_keep_cosignatures(
    node: Node,
    cosigned: tuple[ServedWitness, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`ledger_cosignatures` is the attacker's to edit: a forged cosignature
    row for a second witness, and the real row rewritten, are both refused by
    the policy (what `checkpoint --export` merges in is never trusted)."""
    from tests.attacker import Attacker

    served, kept = cosigned
    other = signer(Role.WITNESS, "o")
    other_key = cosigner_verifier_key("witness.example/other", other.public_key)
    rules = policy(tmp_path, served.verifier_key, other_key, quorum=2)
    checkpoint = Checkpoint.from_note(kept.read_text()).bare()
    # A cosignature "by" the other witness, signed with a key the attacker holds.
    fake = cosign(
        checkpoint.text, "witness.example/other", signer(Role.WITNESS, "x"), other.public_key, 2**33
    )
    attacker = Attacker(node.app.store_url)
    try:
        attacker.sql(
            "INSERT INTO ledger_cosignatures (tree_size, witness, note) VALUES (?, ?, ?)",
            (
                checkpoint.size,
                Cosigner.parse(other_key).label,
                checkpoint.to_note() + fake.format(),
            ),
        )
        exported = tmp_path / "exported.txt"
        assert run(node, capsys, "checkpoint", "--no-sign", "--export", str(exported))[0] == 0
        assert fake.format() in exported.read_text()
        code, out = run(
            node, capsys, "verify", "--trusted", str(exported), "--witness-policy", str(rules)
        )
        assert code == 1
        assert "1 valid cosignatures, the policy needs 2 of 2" in out
        assert "witness.example/other+" in out and "does not verify" in out
        # A row with a line claiming the log's key, and one of a note's size: left
        # out, so the exported checkpoint still verifies as the log's.
        own = checkpoint.own_line
        bogus = SignatureLine(own.name, bytes(68)).format() + SignatureLine("x", bytes(68)).format()
        attacker.sql(
            "INSERT INTO ledger_cosignatures (tree_size, witness, note) VALUES (?, ?, ?)",
            (checkpoint.size, "bogus+00000000", checkpoint.to_note() + bogus),
        )
        assert run(node, capsys, "checkpoint", "--no-sign", "--export", str(exported))[0] == 0
        assert bogus not in exported.read_text()
        Checkpoint.from_note(exported.read_text()).verify(node.keyring)
        # The real witness's row rewritten to another checkpoint's text: it no
        # longer attaches to this checkpoint at all.
        attacker.sql("UPDATE ledger_cosignatures SET note = replace(note, 'time ', 'tame ')")
        assert run(node, capsys, "checkpoint", "--no-sign", "--export", str(exported))[0] == 0
        assert Checkpoint.from_note(exported.read_text()).others == ()
    finally:
        attacker.conn.close()


def test_a_read_only_checkpointer_records_a_split_view(
    node: Node,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`ledger checkpoint` (a node opened read-only) told of a split view by
    its witness records it with this keys directory's ledger-node key."""
    from ledger.audit.significant import iter_significant
    from ledger.crypto.merkle import hash_leaf
    from ledger.crypto.witness_wire import AddCheckpoint
    from ledger.node import origin

    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    record(node, 6)
    with ServedWitness(log_witness(node, tmp_path)) as served:
        key = node.keys.signer(Role.CHECKPOINT, PASSPHRASE)
        fork = Checkpoint.sign(origin=origin(), size=6, root=hash_leaf(b"x"), signer=key)
        body = AddCheckpoint(0, (), fork.to_note()).encode()
        assert served.witness.add_checkpoint(body).status == 200
        monkeypatch.setenv(WITNESSES_ENV, served.setting)
        code, out = run(node, capsys, "checkpoint", "--export", str(tmp_path / "k.txt"))
        assert code == 0, out
    reports = [e for e in iter_significant(node.app) if e.kind == "split-view"]
    # Checkpoint 6's first. The witness is asked in the background: when the
    # command checkpointed the report itself before it ended (a loaded machine),
    # the witness refused that larger checkpoint too, and said so again.
    sizes = [Checkpoint.from_note(e.details["checkpoint"]).size for e in reports]
    assert sizes[:1] == [6] and sizes == sorted(set(sizes)), sizes
    event = reports[0]
    assert event.details["status"] == 409  # the same size, another root
    assert event.details["reason"].startswith("split view:")
    assert "refused the checkpoint of size 6" in event.summary
    code, out = run(node, capsys, "events", "--significant")
    assert code == 0 and "split-view" in out
    # The report is an event of the log like any other: sealed, checkpointed, verified.
    assert run(node, capsys, "checkpoint")[0] == 0
    code, out = run(node, capsys, "verify", "--level", "settlement")
    assert code == 0, out


def test_max_age_refuses_an_old_cosigned_checkpoint_replayed_as_current(tmp_path: Path) -> None:
    """A checkpoint cosigned long ago is still validly cosigned; a policy with
    `max-age` refuses to take it as the log's current state."""
    from datetime import UTC, datetime, timedelta

    from ledger.crypto.witness_policy import WitnessPolicy
    from tests.witness_support import Log, make_witness

    log = Log(8)
    witness = make_witness(tmp_path, log)
    issued = datetime.now(UTC).replace(microsecond=0)
    checkpoint = log.checkpoint(8, issued)
    witness.clock = lambda: issued.timestamp() + 10
    from ledger.crypto.witness_wire import AddCheckpoint

    body = AddCheckpoint(0, (), checkpoint.to_note()).encode()
    cosigned = Checkpoint.from_note(
        checkpoint.to_note() + witness.add_checkpoint(body).body.decode()
    )
    key = cosigner_verifier_key(witness.name, witness.signer.public_key)
    policy = WitnessPolicy.parse(f"witness {key}\nquorum 1\nmax-age 3600\n")
    assert policy.check(cosigned, now=issued + timedelta(minutes=30)).valid
    with pytest.raises(VerificationError, match="older than the policy's max-age"):
        policy.check(cosigned, now=issued + timedelta(hours=2))
    # Without max-age it counts (what a kept newer checkpoint, --trusted, is for).
    assert (
        WitnessPolicy.parse(f"witness {key}\nquorum 1\n")
        .check(cosigned, now=issued + timedelta(hours=2))
        .valid
    )
    # A cosignature dated before the checkpoint's own time, or in the future.
    for offset, said in ((-3600, "before the checkpoint"), (7200, "in the future")):
        witness.clock = lambda offset=offset: issued.timestamp() + offset  # type: ignore[misc]
        again = witness.add_checkpoint(AddCheckpoint(8, (), checkpoint.to_note()).encode())
        stamped = Checkpoint.from_note(checkpoint.to_note() + again.body.decode())
        with pytest.raises(VerificationError, match=said):
            WitnessPolicy.parse(f"witness {key}\nquorum 1\n").check(stamped, now=issued)
