"""`ledger export --round ID` writes a C2SP tlog-proof per event (tlog-proofs/);
`verify --bundle` checks each alone, and so does Go's x/mod (tests/go/tlogcheck);
every edit of one fails. A proof is also held to the bundle's own checkpoints:
one under a checkpoint the real key signed for the same size but another root
(a split view, each file valid alone) fails, in a round or a range bundle."""

from __future__ import annotations

import base64
import io
import json
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ledger.cli.main import main
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Keyring, Role
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.merkle import hash_leaf, inclusion_proof, root_of, subtree_from_leaves
from ledger.crypto.note import verifier_key
from ledger.crypto.signing import InMemorySigner
from ledger.crypto.tlog_proof import MAGIC, TlogProof
from ledger.errors import VerificationError
from tests.conftest import PASSPHRASE
from tests.go_tlog import check_tlog_proof
from tests.reproducible import reproducible_session


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    base = tmp_path_factory.mktemp("tlog-proof")
    argv = ["--store", f"sqlite:///{base / 'ledger.db'}", "--keys", str(base / "keys")]
    patch = pytest.MonkeyPatch()
    patch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    patch.setattr(sys, "stdin", io.StringIO(""))
    try:
        with reproducible_session(7) as seeds:
            assert main([*argv, "simulate", "--rounds", "4", "--players", "3", "--tables", "1",
                         *seeds]) == 0  # fmt: skip
        # A second session: the log then holds two checkpoints, the proofs are
        # against the newer one.
        with reproducible_session(8) as seeds:
            assert main([*argv, "simulate", "--rounds", "1", "--players", "2", "--tables", "1",
                         *seeds]) == 0  # fmt: skip
        yield argv
    finally:
        patch.undo()


def _round_of(store: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    whole = tmp_path / "whole"
    assert main([*store, "export", str(whole)]) == 0
    records = [json.loads(line) for line in (whole / "events.jsonl").read_text().splitlines()]
    round_id = next(r["stream"] for r in records if r["type"] == "Round.Settled")
    bundle = tmp_path / "round"
    assert main([*store, "export", str(bundle), "--round", round_id]) == 0
    capsys.readouterr()
    return bundle


@pytest.fixture
def bundle(store: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    return _round_of(store, tmp_path, capsys)


def _events(bundle: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (bundle / "events.jsonl").read_text().splitlines()]


def _vkey(bundle: Path) -> str:
    keyring = Keyring.load(bundle / "keyring.json")
    note = json.loads((bundle / "checkpoints.jsonl").read_text().splitlines()[-1])["note"]
    record = Checkpoint.from_note(note).key_record(keyring)
    assert record is not None
    return verifier_key(record.name, record.public_key)


def verify(bundle: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["verify", "--bundle", str(bundle), "--level", "signatures"])
    out, err = capsys.readouterr()
    return code, out + err


def test_every_event_of_a_round_has_its_tlog_proof(
    bundle: Path, capsys: pytest.CaptureFixture[str], tlogcheck: Path
) -> None:
    events = _events(bundle)
    files = sorted((bundle / "tlog-proofs").iterdir())
    assert [p.name for p in files] == sorted(f"{e['position']}.tlog-proof" for e in events)
    keyring = Keyring.load(bundle / "keyring.json")
    proofs = [json.loads(line) for line in (bundle / "proofs.jsonl").read_text().splitlines()]
    for event, inclusion in zip(events, proofs, strict=True):
        text = (bundle / "tlog-proofs" / f"{event['position']}.tlog-proof").read_text()
        assert text.startswith(f"{MAGIC}\nextra ")
        proof = TlogProof.parse(text)
        assert proof.format() == text
        envelope = base64.b64decode(str(event["envelope"]))
        header = envelope[6 : 6 + int.from_bytes(envelope[4:6], "big")]  # docs/export.md
        assert proof.extra == header
        assert proof.index == event["position"]
        assert [base64.b64encode(h).decode() for h in proof.proof] == inclusion["proof"]
        assert proof.check(hash_leaf(header), keyring).size == inclusion["tree_size"]
        # Go's note and tlog packages accept it, from the file and the key alone.
        done = check_tlog_proof(tlogcheck, bundle / "tlog-proofs" / f"{proof.index}.tlog-proof",
                                _vkey(bundle))  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"OK entry {proof.index} is in the tree of size" in done.stdout
    code, out = verify(bundle, capsys)
    assert code == 0, out
    assert f"{len(events)} C2SP tlog-proofs (tlog-proofs/) checked alone" in out


def _lines(text: str) -> tuple[list[str], str]:
    head, _, note = text.partition("\n\n")
    return head.split("\n"), note


def _wrong_hash(text: str, bundle: Path) -> str:
    head, note = _lines(text)
    hashed = bytearray(base64.b64decode(head[3]))
    hashed[0] ^= 1
    head[3] = base64.b64encode(bytes(hashed)).decode()
    return "\n".join(head) + "\n\n" + note


def _wrong_index(text: str, bundle: Path) -> str:
    head, note = _lines(text)
    index = int(head[2].removeprefix("index "))
    head[2] = f"index {index + 1}"
    return "\n".join(head) + "\n\n" + note


def _older_checkpoint(text: str, bundle: Path) -> str:
    """The proof's path, but another (genuine, signed) checkpoint of the log."""
    head, note = _lines(text)
    notes = [
        json.loads(line)["note"] for line in (bundle / "checkpoints.jsonl").read_text().splitlines()
    ]
    other = next(n for n in notes if n != note)
    return "\n".join(head) + "\n\n" + other


def _forged_checkpoint(text: str, bundle: Path) -> str:
    head, note = _lines(text)
    lines = note.split("\n")
    lines[1] = str(int(lines[1]) + 1)  # a larger size, same signature
    return "\n".join(head) + "\n\n" + "\n".join(lines)


def _other_entry(text: str, bundle: Path) -> str:
    head, note = _lines(text)
    entry = bytearray(base64.b64decode(head[1].removeprefix("extra ")))
    entry[-3] ^= 1
    head[1] = "extra " + base64.b64encode(bytes(entry)).decode()
    return "\n".join(head) + "\n\n" + note


def _no_entry(text: str, bundle: Path) -> str:
    head, note = _lines(text)
    del head[1]
    return "\n".join(head) + "\n\n" + note


def _dropped_hash(text: str, bundle: Path) -> str:
    head, note = _lines(text)
    del head[-1]
    return "\n".join(head) + "\n\n" + note


def _trailing_space(text: str, bundle: Path) -> str:
    head, note = _lines(text)
    head[2] += " "
    return "\n".join(head) + "\n\n" + note


EDITS: dict[str, Callable[[str, Path], str]] = {
    "a wrong proof hash": _wrong_hash,
    "a wrong index": _wrong_index,
    "another genuine checkpoint": _older_checkpoint,
    "an edited checkpoint": _forged_checkpoint,
    "another entry": _other_entry,
    "no entry": _no_entry,
    "a hash left out": _dropped_hash,
    "a trailing space": _trailing_space,
}


@pytest.mark.parametrize("edit", EDITS)
def test_an_edited_tlog_proof_fails_verify_bundle(
    bundle: Path, capsys: pytest.CaptureFixture[str], tlogcheck: Path, edit: str
) -> None:
    position = _events(bundle)[-1]["position"]
    path = bundle / "tlog-proofs" / f"{position}.tlog-proof"
    path.write_text(EDITS[edit](path.read_text(), bundle))
    code, out = verify(bundle, capsys)
    assert code == 1, out
    assert f"bundle tlog-proofs/{position}.tlog-proof" in out
    if edit not in ("a trailing space", "no entry"):  # Go's reader is not strict about spelling
        assert check_tlog_proof(tlogcheck, path, _vkey(bundle)).returncode == 1


def test_a_missing_or_stray_proof_fails(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, last = _events(bundle)[0]["position"], _events(bundle)[-1]["position"]
    shutil.copy(bundle / "tlog-proofs" / f"{first}.tlog-proof",
                bundle / "tlog-proofs" / "999999.tlog-proof")  # fmt: skip
    code, out = verify(bundle, capsys)
    assert code == 1 and "999999.tlog-proof: a file that is no event's proof" in out
    (bundle / "tlog-proofs" / "999999.tlog-proof").unlink()
    (bundle / "tlog-proofs" / f"{last}.tlog-proof").unlink()
    code, out = verify(bundle, capsys)
    assert code == 1 and f"{last}.tlog-proof is missing" in out


def test_parse_is_strict() -> None:
    for text in (
        "",
        "c2sp.org/tlog-proof@v2\nindex 0\n\nx",
        f"{MAGIC}\nindex 01\n\nx",
        f"{MAGIC}\nextra !!\nindex 0\n\nx",
        f"{MAGIC}\nindex 0\nAAAA\n\nx",
    ):
        with pytest.raises(VerificationError):
            TlogProof.parse(text)


def test_a_proof_replaced_by_a_directory_fails(
    bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    last = _events(bundle)[-1]["position"]
    (bundle / "tlog-proofs" / f"{last}.tlog-proof").unlink()
    (bundle / "tlog-proofs" / f"{last}.tlog-proof").mkdir()
    code, out = verify(bundle, capsys)
    assert code == 1 and f"{last}.tlog-proof cannot be read" in out


def test_export_says_it_wrote_them(
    store: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = _round_of(store, tmp_path, capsys)
    round_id = json.loads((bundle / "manifest.json").read_text())["selection"]["round"]
    assert main([*store, "export", str(tmp_path / "again"), "--round", round_id]) == 0
    assert "(and as a C2SP tlog-proof in tlog-proofs/)" in capsys.readouterr().out


def _headers(bundle: Path) -> dict[int, bytes]:
    """Each event's envelope header (its tlog entry) by log position (docs/export.md)."""
    headers = {}
    for event in _events(bundle):
        envelope = base64.b64decode(str(event["envelope"]))
        headers[int(str(event["position"]))] = envelope[
            6 : 6 + int.from_bytes(envelope[4:6], "big")
        ]
    return headers


def _checkpoint_key(store: list[str]) -> InMemorySigner:
    """The log's real checkpoint key: the attacker of a split view holds it."""
    return KeyDirectory(Path(store[store.index("--keys") + 1])).signer(Role.CHECKPOINT, PASSPHRASE)


def _proof_under(
    store: list[str], leaves: list[bytes], entry: bytes, position: int, like: Checkpoint, size: int
) -> str:
    """A tlog-proof of entry `position` of the tree of `leaves` (its first `size`),
    under a checkpoint the real key signs for it, at the time of `like`."""
    tree = leaves[:size]
    checkpoint = Checkpoint.sign(
        origin=like.origin,
        size=size,
        root=root_of(tree),
        signer=_checkpoint_key(store),
        now=like.issued_at,
    )
    path = inclusion_proof(position, size, subtree_from_leaves(tree))
    return TlogProof(position, tuple(path), checkpoint.to_note(), extra=entry).format()


def _forked(leaves: list[bytes], position: int) -> list[bytes]:
    """The log's leaves with another entry than `position`'s changed: a tree in
    which `position` still has its entry, under another root."""
    other = 0 if position else 1
    return [hash_leaf(b"a forked entry") if i == other else leaf for i, leaf in enumerate(leaves)]


def _split_view(
    bundle: Path, store: list[str], whole: Path, position: int, keyring: Keyring
) -> Path:
    """The event's proof replaced by one under a checkpoint of the same size as
    the bundle's, signed by the real key, with another root and a valid path."""
    path = bundle / "tlog-proofs" / f"{position}.tlog-proof"
    genuine = TlogProof.parse(path.read_text()).checkpoint
    leaves = _forked(list(map(hash_leaf, _headers(whole).values())), position)
    entry = _headers(bundle)[position]
    path.write_text(_proof_under(store, leaves, entry, position, genuine, genuine.size))
    forged = TlogProof.parse(path.read_text())
    assert forged.checkpoint.size == genuine.size and forged.checkpoint.root != genuine.root
    assert forged.check(hash_leaf(entry), keyring) == forged.checkpoint  # valid on its own
    return path


def test_a_proof_under_a_forked_checkpoint_of_the_same_size_is_a_split_view(
    store: list[str], bundle: Path, capsys: pytest.CaptureFixture[str], tlogcheck: Path
) -> None:
    position = int(str(_events(bundle)[-1]["position"]))
    keyring = Keyring.load(bundle / "keyring.json")
    path = _split_view(bundle, store, bundle.parent / "whole", position, keyring)
    # Alone, the file is a proof Go's x/mod accepts: only the bundle's checkpoint shows the fork.
    assert check_tlog_proof(tlogcheck, path, _vkey(bundle)).returncode == 0
    code, out = verify(bundle, capsys)
    assert code == 1, out
    assert f"bundle tlog-proofs/{position}.tlog-proof: its checkpoint of size" in out
    assert "a split view" in out


def test_a_proof_under_a_checkpoint_the_bundle_does_not_hold_fails(
    store: list[str], bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A genuine tree and the real key, but a size no checkpoint of the bundle has:
    nothing in the bundle says that checkpoint is of the log the bundle shows."""
    position = int(str(_events(bundle)[-1]["position"]))
    path = bundle / "tlog-proofs" / f"{position}.tlog-proof"
    genuine = TlogProof.parse(path.read_text()).checkpoint
    leaves = list(map(hash_leaf, _headers(bundle.parent / "whole").values()))
    sizes = {Checkpoint.from_note(json.loads(line)["note"]).size
             for line in (bundle / "checkpoints.jsonl").read_text().splitlines()}  # fmt: skip
    size = position + 1
    assert size not in sizes
    path.write_text(
        _proof_under(store, leaves, _headers(bundle)[position], position, genuine, size)
    )
    code, out = verify(bundle, capsys)
    assert code == 1, out
    assert f"bundle tlog-proofs/{position}.tlog-proof: its checkpoint of size {size} is none" in out


def test_a_range_bundles_tlog_proofs_are_held_to_its_checkpoints(
    store: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A range bundle carries no tlog-proofs, but one given them checks each as a
    round bundle's: genuine ones pass, a split view fails."""
    whole = tmp_path / "whole"
    assert main([*store, "export", str(whole)]) == 0
    part = tmp_path / "part"
    assert main([*store, "export", str(part), "--from", "3", "--to", "9"]) == 0
    capsys.readouterr()
    leaves = list(map(hash_leaf, _headers(whole).values()))
    notes = [
        json.loads(line)["note"] for line in (part / "checkpoints.jsonl").read_text().splitlines()
    ]
    newest = max(map(Checkpoint.from_note, notes), key=lambda c: c.size)
    (part / "tlog-proofs").mkdir()
    for position, entry in _headers(part).items():
        path = inclusion_proof(position, newest.size, subtree_from_leaves(leaves[: newest.size]))
        proof = TlogProof(position, tuple(path), newest.to_note(), extra=entry)
        (part / "tlog-proofs" / f"{position}.tlog-proof").write_text(proof.format())
    code, out = verify(part, capsys)
    assert code == 0, out
    assert "7 C2SP tlog-proofs (tlog-proofs/) checked" in out
    keyring = Keyring.load(part / "keyring.json")
    _split_view(part, store, whole, 9, keyring)
    code, out = verify(part, capsys)
    assert code == 1, out
    assert (
        "bundle tlog-proofs/9.tlog-proof: its checkpoint of size" in out and "a split view" in out
    )


def test_a_whole_log_bundle_with_tlog_proofs_fails(
    store: list[str], bundle: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ledger writes none in a whole-log bundle (its roots are recomputed from
    its events): a proof put there is no part of it, whatever checkpoint it names."""
    whole = bundle.parent / "whole"
    shutil.copytree(bundle / "tlog-proofs", whole / "tlog-proofs")
    code, out = verify(whole, capsys)
    assert code == 1, out
    assert "bundle tlog-proofs: a whole-log bundle carries no tlog-proofs" in out
