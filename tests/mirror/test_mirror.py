"""`ledger mirror` (issue 21, items 4 and 5): a regulator's copy of a node's
log, verified as it arrives, that refuses a source rewriting its history."""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ledger.audit.findings import Findings, Step
from ledger.audit.verify import Level, Sinks, VerifyOptions, verify_store
from ledger.audit.verify_state import VerifyState
from ledger.cli.mirror import follow_source
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.envelope import now_micros, open_envelope, seal
from ledger.crypto.keys import Role
from ledger.errors import ConfigError, StoreUnavailableError, VerificationError
from ledger.export.records import split_envelope
from ledger.mirror.copy import REFUSED_FILE
from ledger.node import Node, open_node, origin
from ledger.revocation import revoke_key
from ledger.store.application import LedgerApplication
from ledger.store.merkle_log import stream_of
from tests.attacker import Attacker
from tests.conftest import PASSPHRASE
from tests.http_support import Api, all_games
from tests.installed import installed_games
from tests.mirror_support import ClientSource, mirror_url, opened_mirror, source_api, write_events


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    return source_api(node, tmp_path)


@pytest.fixture
def mirror_store(store_url: str, tmp_path: Path) -> Iterator[str]:
    yield from mirror_url(store_url, tmp_path)


def all_rows(app: LedgerApplication) -> list[tuple[object, ...]]:
    rows, after = [], 0
    while batch := app.tables.rows_after(after, 500):
        rows += [tuple(r[1:]) for r in batch]
        after = batch[-1][0]
    return rows


def test_one_shot_catch_up_copies_the_sealed_rows_and_the_roots(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    write_events(node)
    source = ClientSource(api)
    with opened_mirror(mirror_store, node.keyring, source, tmp_path / "m") as mirror:
        done = mirror.sync()
        assert done.events == node.app.tables.event_count()[0] > 0
        assert mirror.sync().events == 0  # nothing new: nothing copied twice
        copy = mirror.app
        assert all_rows(copy) == all_rows(node.app)
        report = verify_store(
            copy,
            node.keyring,
            VerifyOptions(level=Level.SETTLEMENT, workers=1, games=installed_games()),
        )
        theirs = verify_store(
            node.app, node.keyring, VerifyOptions(level=Level.SIGNATURES, workers=1)
        )
        assert report.root == theirs.root and report.checkpoint_root == theirs.checkpoint_root
        write_events(node, accounts=2)
        assert mirror.sync().events > 0
        assert all_rows(copy) == all_rows(node.app)


def test_an_event_edited_in_the_source_after_it_was_copied_is_refused(
    node: Node, api: Api, mirror_store: str, store_url: str, tmp_path: Path
) -> None:
    write_events(node)
    source = ClientSource(api)
    with opened_mirror(mirror_store, node.keyring, source, tmp_path / "m") as mirror:
        mirror.sync()
        held = mirror.app.tables.event_count()[0]
        row = node.app.tables.rows_after(0, 3)[2]
        attacker = Attacker(store_url)
        try:
            altered = bytes(row[4]).replace(b'"amount":500', b'"amount":900')
            assert altered != bytes(row[4])
            attacker.set_state(stream_of(row[1]), row[2], altered)
        finally:
            attacker.close()
        write_events(node, accounts=1)
        with pytest.raises(VerificationError, match="history was rewritten"):
            mirror.sync()
        assert mirror.app.tables.event_count()[0] == held
    assert "rewritten" in (tmp_path / "m" / "refused.jsonl").read_text()


def forged_checkpoint(node: Node, size: int, root: bytes) -> str:
    """A checkpoint the house signs with its own checkpoint key: validly signed,
    so only its content can give it away."""
    signer = node.keys.signer(Role.CHECKPOINT, PASSPHRASE)
    return Checkpoint.sign(origin=origin(), size=size, root=root, signer=signer).to_note()


def notes_changed(path: str, answer: Any, change: Callable[[Checkpoint], str]) -> Any:
    """The source's checkpoint answers with each note replaced by `change(it)`:
    its newest one, and every one its checkpoint list serves."""

    def changed(entry: dict[str, Any]) -> dict[str, Any]:
        return {**entry, "note": change(Checkpoint.from_note(entry["note"]))}

    if path == "/checkpoints/newest":
        return changed(answer)
    if path == "/checkpoints":
        listed = [changed(c) for c in answer["checkpoints"]]
        return {**answer, "checkpoints": listed}
    return answer


def copied(node: Node, api: Api, mirror_store: str, tmp_path: Path) -> int:
    """Mirror the source once; the size copied."""
    write_events(node)
    with opened_mirror(mirror_store, node.keyring, ClientSource(api), tmp_path / "m") as mirror:
        return mirror.sync().size


def refused(
    node: Node,
    api: Api,
    mirror_store: str,
    tmp_path: Path,
    tamper: Callable[[int, str, Any], Any],
    match: str,
    batch: int = 10_000,
) -> None:
    """After a clean copy and more events at the source, a pass whose answers go
    through `tamper(held, path, answer)` is refused naming `match`, writes
    nothing and is recorded."""
    held = copied(node, api, mirror_store, tmp_path)
    write_events(node, accounts=2)
    source = ClientSource(api, lambda path, answer: tamper(held, path, answer))
    with opened_mirror(mirror_store, node.keyring, source, tmp_path / "m", batch=batch) as m:
        before = all_rows(m.app), m.app.tables.checkpoint_rows(), m.app.tables.tail()
        with pytest.raises(VerificationError, match=match) as caught:
            m.sync()
        assert "\n" not in str(caught.value)
        assert f"nothing written past log position {held - 1}" in str(caught.value)
        assert (all_rows(m.app), m.app.tables.checkpoint_rows(), m.app.tables.tail()) == before
    log = (tmp_path / "m" / REFUSED_FILE).read_text().splitlines()
    assert json.loads(log[-1] if "refused" in log[-1] else log[0])
    # The honest source is copied in full afterwards: the refusal cost nothing but time.
    with opened_mirror(mirror_store, node.keyring, ClientSource(api), tmp_path / "m") as m:
        assert m.sync().size == node.app.tables.event_count()[0]
        assert all_rows(m.app) == all_rows(node.app)


def new_events(held: int, path: str, answer: Any) -> list[dict[str, Any]]:
    """The records of a feed page past what the mirror held (the ones it copies)."""
    if path != "/events":
        return []
    return [record for record in answer["events"] if record["position"] >= held]


def test_a_checkpoint_of_the_same_size_with_another_root_is_a_fork(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    held = copied(node, api, mirror_store, tmp_path)
    forged = forged_checkpoint(node, held, b"\x07" * 32)
    source = ClientSource(api, lambda path, a: notes_changed(path, a, lambda c: forged))
    with opened_mirror(mirror_store, node.keyring, source, tmp_path / "m") as mirror:
        with pytest.raises(VerificationError, match="forked checkpoint"):
            mirror.sync()
        assert mirror.app.tables.event_count()[0] == held


def test_a_new_checkpoint_that_does_not_extend_the_old_is_refused(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    def fork(held: int, path: str, answer: Any) -> Any:
        return notes_changed(path, answer, lambda c: forged_checkpoint(node, c.size, b"\x09" * 32))

    refused(node, api, mirror_store, tmp_path, fork, "Merkle root of the first")


def test_an_older_checkpoint_than_the_mirror_holds_is_a_rollback(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    held = copied(node, api, mirror_store, tmp_path)
    older = forged_checkpoint(node, held - 3, b"\x01" * 32)
    source = ClientSource(api, lambda path, a: notes_changed(path, a, lambda c: older))
    with (
        opened_mirror(mirror_store, node.keyring, source, tmp_path / "m") as mirror,
        pytest.raises(VerificationError, match="rolled back"),
    ):
        mirror.sync()


def test_a_feed_that_skips_an_event_is_refused(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    def skip(held: int, path: str, answer: Any) -> Any:
        events = new_events(held, path, answer)
        if len(events) > 2:
            answer["events"].remove(events[1])
        return answer

    refused(node, api, mirror_store, tmp_path, skip, "skipped an event")


def test_a_feed_that_skips_an_event_and_renumbers_is_refused(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    def hide(held: int, path: str, answer: Any) -> Any:
        events = new_events(held, path, answer)
        if len(events) > 2:
            answer["events"].remove(events[1])
            for record in events[2:]:
                record["position"] -= 1
        return answer

    refused(node, api, mirror_store, tmp_path, hide, "Merkle root of the first")


def test_a_feed_that_repeats_an_event_is_refused(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    def repeat(held: int, path: str, answer: Any) -> Any:
        events = new_events(held, path, answer)
        if len(events) > 2:
            answer["events"].insert(answer["events"].index(events[1]), dict(events[0]))
        return answer

    refused(node, api, mirror_store, tmp_path, repeat, "repeated an event")


def test_an_envelope_with_a_bad_signature_is_refused(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    def forge(held: int, path: str, answer: Any) -> Any:
        events = new_events(held, path, answer)
        if len(events) > 2:
            raw = bytearray(base64.b64decode(events[1]["envelope"]))
            payload = split_envelope(bytes(raw))[3]
            at = len(raw) - len(payload) - 1  # the signature's last byte
            raw[at] ^= 0x01
            events[1]["envelope"] = base64.b64encode(bytes(raw)).decode()
        return answer

    refused(node, api, mirror_store, tmp_path, forge, "envelope signature is invalid")


def test_a_feed_that_ends_before_its_checkpoint_is_refused(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    def cut(held: int, path: str, answer: Any) -> Any:
        if path == "/events":  # nothing past the first new event, on any page
            answer["events"] = [e for e in answer["events"] if e["position"] <= held]
        return answer

    refused(node, api, mirror_store, tmp_path, cut, "events are missing")


def test_a_crash_between_the_commit_and_the_saved_state_copies_nothing_twice(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    write_events(node)
    directory = tmp_path / "m"
    with opened_mirror(mirror_store, node.keyring, ClientSource(api), directory) as mirror:
        mirror.sync()
        first = mirror.size
    saved = {p.name: p.read_bytes() for p in (directory / "state").iterdir()}
    write_events(node, accounts=2)
    with opened_mirror(mirror_store, node.keyring, ClientSource(api), directory) as mirror:
        assert mirror.sync().events > 0
    for name, data in saved.items():  # the state as the crash left it: one commit behind
        (directory / "state" / name).write_bytes(data)
    with opened_mirror(mirror_store, node.keyring, ClientSource(api), directory) as mirror:
        assert mirror.size == node.app.tables.event_count()[0] > first  # recovered from the store
        assert mirror.sync().events == 0
        assert all_rows(mirror.app) == all_rows(node.app)
    shutil.rmtree(directory / "state")  # no state at all: the store verified in full
    write_events(node, accounts=1)
    with opened_mirror(mirror_store, node.keyring, ClientSource(api), directory) as mirror:
        assert mirror.sync().events > 0
        assert all_rows(mirror.app) == all_rows(node.app)


def test_a_row_changed_in_the_mirror_store_itself_is_named_as_the_mirrors(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    held = copied(node, api, mirror_store, tmp_path)
    write_events(node, accounts=1)
    with opened_mirror(mirror_store, node.keyring, ClientSource(api), tmp_path / "m") as mirror:
        row = mirror.app.tables.rows_after(0, 5)[4]
        attacker = Attacker(mirror_store)
        try:
            attacker.set_state(stream_of(row[1]), row[2], bytes(row[4])[:-1] + b" ")
        finally:
            attacker.close()
        with pytest.raises(VerificationError, match="mirror store's own rows no longer verify"):
            mirror.sync()
        assert mirror.app.tables.event_count()[0] == held


def test_an_event_removed_from_the_source_after_it_was_copied_is_refused(
    node: Node, api: Api, mirror_store: str, store_url: str, tmp_path: Path
) -> None:
    held = copied(node, api, mirror_store, tmp_path)
    assert held == node.app.tables.event_count()[0] > 6  # all of it, the sixth row among them
    row = node.app.tables.rows_after(0, 6)[5]
    attacker = Attacker(store_url)
    try:
        attacker.delete(stream_of(row[1]), row[2])
    finally:
        attacker.close()
    with (
        opened_mirror(mirror_store, node.keyring, ClientSource(api), tmp_path / "m") as mirror,
        pytest.raises(VerificationError, match=f"copied {held} events from it: events are missing"),
    ):
        mirror.sync()
    with opened_mirror(mirror_store, node.keyring, ClientSource(api), tmp_path / "m") as mirror:
        assert mirror.size == held


def checkpointed_steps(node: Node, steps: int) -> list[int]:
    """Events in `steps` runs, each under a checkpoint of its own: their sizes."""
    sizes = []
    for _ in range(steps):
        write_events(node, accounts=1, deposits=2)
        sizes.append(node.app.tables.event_count()[0])
    return sizes


def held_checkpoints(app: LedgerApplication) -> list[int]:
    return sorted(int(size) for size, _ in app.tables.checkpoint_rows())  # type: ignore[call-overload]


def test_a_catch_up_commits_checkpoint_by_checkpoint_and_resumes(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    sizes = checkpointed_steps(node, 4)
    directory = tmp_path / "m"
    # A batch smaller than the gap between two checkpoints: each commit reaches
    # the next checkpoint, written with it, never events past it.
    with opened_mirror(mirror_store, node.keyring, ClientSource(api), directory, batch=1) as m:
        m.stop = lambda: True  # told to stop: it ends after its first commit
        done = m.sync()
        assert done.events == m.size == done.checkpoint == sizes[0]
        assert held_checkpoints(m.app) == sizes[:1]
        report = verify_store(m.app, node.keyring, VerifyOptions(level=Level.SIGNATURES, workers=1))
        assert report.events == sizes[0] and report.unanchored is None
    # A batch that reaches two checkpoints on: both are written with their events.
    reach = sizes[2] - sizes[0]
    with opened_mirror(mirror_store, node.keyring, ClientSource(api), directory, batch=reach) as m:
        m.stop = lambda: True
        assert m.sync().checkpoint == m.size == sizes[2]
        assert held_checkpoints(m.app) == sizes[:3]
    with opened_mirror(mirror_store, node.keyring, ClientSource(api), directory, batch=1) as m:
        done = m.sync()
        assert done.events == sizes[3] - sizes[2] and done.checkpoint == sizes[3]
        assert all_rows(m.app) == all_rows(node.app)
        assert held_checkpoints(m.app) == held_checkpoints(node.app) == sizes


def unknown_key_checkpoint(size: int, root: bytes) -> str:
    """A checkpoint signed by a key the mirror's keyring does not hold."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ledger.crypto.signing import InMemorySigner

    signer = InMemorySigner(Ed25519PrivateKey.generate(), Role.CHECKPOINT, "checkpoint")
    return Checkpoint.sign(origin=origin(), size=size, root=root, signer=signer).to_note()


def test_events_under_a_checkpoint_that_never_verifies_are_not_written(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    """Issue 37, attack 2: genuine events, their checkpoints signed by a key the
    mirror does not know; in batches smaller than the events. Nothing is written."""

    def unknown(held: int, path: str, answer: Any) -> Any:
        return notes_changed(path, answer, lambda c: unknown_key_checkpoint(c.size, c.root))

    refused(node, api, mirror_store, tmp_path, unknown, "checkpoint", batch=2)


def forked_feed(node: Node) -> Callable[[int, str, Any], Any]:
    """A feed whose last event before the newest checkpoint is re-sealed with the
    node's real key (a signing time 1 µs later): a fork that every signature
    and chain link accepts, only the Merkle root at the checkpoint refuses."""
    signer = node.keys.signer(Role.LEDGER_NODE, PASSPHRASE)

    def fork(held: int, path: str, answer: Any) -> Any:
        if path != "/events":
            return answer
        newest = node.app.tables.event_count()[0]
        for record in answer["events"]:
            if record["position"] == newest - 1 and record["position"] >= held:
                raw = base64.b64decode(record["envelope"])
                envelope = open_envelope(raw, stream=record["stream"], version=record["version"])
                forged, _ = seal(
                    stream=envelope.stream,
                    version=envelope.version,
                    event_type=envelope.event_type,
                    prev_hash=envelope.prev_hash,
                    payload=envelope.payload,
                    signer=signer,
                    signed_at=envelope.signed_at + 1,
                )
                record["envelope"] = base64.b64encode(forged).decode()
        return answer

    return fork


def test_a_forked_batch_is_not_written_and_the_honest_source_is_copied_after(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    """Issue 37, attack 3: forked events re-signed with the real node key, in
    batches smaller than the events: nothing written, the mirror not poisoned."""
    refused(node, api, mirror_store, tmp_path, forked_feed(node), "Merkle root", batch=2)


def test_at_level_settlement_the_money_is_re_derived_as_it_arrives(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    write_events(node)
    games = all_games()
    directory = tmp_path / "m"
    source = ClientSource(api)
    with opened_mirror(
        mirror_store, node.keyring, source, directory, level=Level.SETTLEMENT, games=games
    ) as mirror:
        mirror.sync()
    assert (directory / "state" / "rounds.bin").is_file()  # the settlement audit's state
    write_events(node, accounts=1)
    with opened_mirror(
        mirror_store, node.keyring, source, directory, level=Level.SETTLEMENT, games=games
    ) as mirror:
        assert mirror.sync().events > 0
        assert mirror.state is not None and mirror.state.settlement is not None
    with pytest.raises(ConfigError, match="level settlement"):  # one level for its life
        opened_mirror(mirror_store, node.keyring, source, directory).__enter__()


def test_the_saved_state_is_made_again_once_small_passes_left_it_in_pieces(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    directory = tmp_path / "m"
    chunks = []
    for _ in range(4):
        write_events(node, accounts=1, deposits=1)
        with opened_mirror(
            mirror_store, node.keyring, ClientSource(api), directory, compact_after=3
        ) as mirror:
            mirror.sync()
            assert mirror.state is not None
            chunks.append(len(mirror.state.chunks))
    assert max(chunks) <= 3  # made again whenever it passed 3 (one run's own chunking)
    assert any(b < a for a, b in itertools.pairwise(chunks)), chunks  # it was
    assert chunks[-1] == len(VerifyState.load(directory / "state").chunks)
    with opened_mirror(mirror_store, node.keyring, ClientSource(api), directory) as mirror:
        write_events(node, accounts=1)
        assert mirror.sync().events > 0
        assert all_rows(mirror.app) == all_rows(node.app)


def test_a_follower_waits_out_a_source_it_cannot_reach(
    node: Node, api: Api, mirror_store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_events(node)
    down = {"calls": 2}

    def flaky(path: str, answer: Any) -> Any:
        if down["calls"]:
            down["calls"] -= 1
            raise StoreUnavailableError("cannot reach the source http://source.test: refused")
        return answer

    stopped = threading.Event()
    with opened_mirror(mirror_store, node.keyring, ClientSource(api, flaky), tmp_path / "m") as m:
        follower = threading.Thread(target=follow_source, args=(m, Level.SIGNATURES, 0.01, stopped))
        follower.start()
        deadline = time.monotonic() + 60
        while m.size < node.app.tables.event_count()[0] and time.monotonic() < deadline:
            time.sleep(0.05)
        stopped.set()
        follower.join(timeout=60)
        assert m.size == node.app.tables.event_count()[0]
    said = capsys.readouterr().err
    assert said.count("cannot reach the source") == 2 and "trying again" in said


# Issue 37, attacks 4 and 5: a node key rotated and revoked.


@contextmanager
def rotated_node(node: Node, store_url: str) -> Iterator[Node]:
    """The node's ledger-node key replaced by a new one and revoked (the log
    anchored first, as `ledger keys revoke` does): the node reopened with the
    new key, which seals what comes after."""
    node.keys.create("revoker", Role.OPERATOR, PASSPHRASE)
    node.keys.create("ledger-node-2", Role.LEDGER_NODE, PASSPHRASE)
    node.keys.use("ledger-node-2")
    renewed = open_node(
        store_url, str(node.keys.path), passphrase=PASSPHRASE, anchor_seconds=0, anchor_events=0
    )
    try:
        renewed.checkpointer().catch_up()
        revoker = renewed.keys.signer(Role.OPERATOR, PASSPHRASE, "revoker")
        revoke_key(renewed.app, renewed.keys, "ledger-node", "stolen", revoker, now_micros())
        yield renewed
    finally:
        renewed.close()


def test_a_new_mirror_starts_after_a_node_key_was_revoked(
    node: Node, mirror_store: str, store_url: str, tmp_path: Path
) -> None:
    write_events(node)
    with rotated_node(node, store_url) as renewed:
        write_events(renewed)  # sealed by the new key, under a checkpoint after the revocation
        assert verify_store(
            renewed.app, renewed.keyring, VerifyOptions(level=Level.SIGNATURES, workers=1)
        )
        api = source_api(renewed, tmp_path)
        keyring = renewed.keys.keyring()  # what the casino gives the regulator now
        with opened_mirror(mirror_store, keyring, ClientSource(api), tmp_path / "m") as mirror:
            done = mirror.sync()
            assert done.size == renewed.app.tables.event_count()[0]
            assert all_rows(mirror.app) == all_rows(renewed.app)
            copy = verify_store(
                mirror.app, keyring, VerifyOptions(level=Level.SIGNATURES, workers=1)
            )
            assert copy.revocations == 1 and copy.findings.items == []


def test_a_following_mirror_goes_on_after_a_revocation_it_passed_between(
    node: Node, mirror_store: str, store_url: str, tmp_path: Path
) -> None:
    """Its last pass ran after the revocation, before a checkpoint covered the
    revocation: its state judged the history without it. The next pass verifies
    the whole copy again, as `verify` in full does, and goes on."""
    write_events(node)
    pinned = node.keys.keyring()  # the keyring the regulator was given at the start
    directory = tmp_path / "m"
    with opened_mirror(
        mirror_store, pinned, ClientSource(source_api(node, tmp_path)), directory
    ) as m:
        m.sync()
    write_events(node, accounts=1)
    with rotated_node(node, store_url) as renewed:
        api = source_api(renewed, tmp_path)
        with opened_mirror(mirror_store, pinned, ClientSource(api), directory) as m:
            done = m.sync()  # between the revocation and the checkpoint over it
            assert done.events > 0 and done.size < renewed.app.tables.event_count()[0]
        write_events(renewed)
        keyring = renewed.keys.keyring()  # the new key, and the old one revoked
        with opened_mirror(mirror_store, keyring, ClientSource(api), directory) as m:
            assert m.sync().size == renewed.app.tables.event_count()[0]
            assert all_rows(m.app) == all_rows(renewed.app)
            write_events(renewed, accounts=1)  # and the pass after it resumes as usual
            assert m.sync().events > 0
            assert all_rows(m.app) == all_rows(renewed.app)


# Issue 37, attack 6: the mirror's own Merkle rows edited.


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE ledger_merkle_leaves SET leaf_hash = ? WHERE leaf_index = 3",
        "UPDATE ledger_merkle_nodes SET hash = ? WHERE level = 2 AND idx = 1",
    ],
    ids=["leaf", "node"],
)
def test_a_merkle_row_changed_in_the_mirror_store_fails_the_next_pass(
    node: Node, api: Api, mirror_store: str, tmp_path: Path, statement: str
) -> None:
    held = copied(node, api, mirror_store, tmp_path)
    write_events(node, accounts=1)
    attacker = Attacker(mirror_store)
    try:
        attacker.sql(statement, (bytes(32),))
    finally:
        attacker.close()
    with opened_mirror(mirror_store, node.keyring, ClientSource(api), tmp_path / "m") as mirror:
        with pytest.raises(VerificationError, match="mirror store's own rows no longer verify"):
            mirror.sync()
        assert mirror.app.tables.event_count()[0] == held
        report = verify_store(
            mirror.app,
            node.keyring,
            VerifyOptions(workers=1, games=installed_games()),
            sinks=Sinks(findings=Findings()),
        )
        assert [f.step for f in report.findings.items] == [Step.MERKLE]


def test_a_following_mirror_re_reads_its_merkle_rows_once_a_period(
    node: Node, api: Api, mirror_store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Following, the Merkle rows the state vouches for are read again every
    `recheck_every` seconds, not every pass (two rows an event: most of a pass's
    reading); the first pass once due refuses an edit made meanwhile."""
    write_events(node)
    source = ClientSource(api)
    with opened_mirror(mirror_store, node.keyring, source, tmp_path / "m", recheck_every=60) as m:
        assert m.sync().events > 0
        attacker = Attacker(mirror_store)
        try:
            attacker.sql(
                "UPDATE ledger_merkle_leaves SET leaf_hash = ? WHERE leaf_index = 3", (bytes(32),)
            )
        finally:
            attacker.close()
        write_events(node, accounts=1)
        assert m.sync().events > 0  # within the period: the rows vouched for are not read
        write_events(node, accounts=1)
        held = m.app.tables.event_count()[0]
        later = time.monotonic() + 61
        monkeypatch.setattr("ledger.mirror.copy.time.monotonic", lambda: later)
        with pytest.raises(VerificationError, match="mirror store's own rows no longer verify"):
            m.sync()
        assert m.app.tables.event_count()[0] == held


def test_a_state_of_an_earlier_format_is_made_again_from_the_copy(
    node: Node, api: Api, mirror_store: str, tmp_path: Path
) -> None:
    held = copied(node, api, mirror_store, tmp_path)
    path = tmp_path / "m" / "state" / "state.json"
    state = json.loads(path.read_text())
    path.write_text(json.dumps({**state, "format": 3}))  # as an earlier release left it
    write_events(node, accounts=1)
    with opened_mirror(mirror_store, node.keyring, ClientSource(api), tmp_path / "m") as mirror:
        assert mirror.size == held  # the copy verified in full, its state made again
        assert mirror.sync().events > 0
        assert all_rows(mirror.app) == all_rows(node.app)
    assert json.loads(path.read_text())["format"] == state["format"]


def test_the_checkpoint_list_serves_the_valid_ones_above_a_size_by_size(
    node: Node, api: Api, store_url: str
) -> None:
    sizes = checkpointed_steps(node, 4)
    listed = api.get("/v1/checkpoints", after=0, limit=1000).json()
    assert [c["size"] for c in listed["checkpoints"]] == sizes and listed["next_after"] == sizes[-1]
    for entry in listed["checkpoints"]:
        assert Checkpoint.from_note(entry["note"]).size == entry["size"]
    page = api.get("/v1/checkpoints", after=sizes[0], limit=2).json()
    assert [c["size"] for c in page["checkpoints"]] == sizes[1:3]
    attacker = Attacker(store_url)  # a row edited behind the node's back is not served
    try:
        note = attacker.checkpoint_note(sizes[1])
        attacker.sql(
            "UPDATE ledger_checkpoints SET note = ? WHERE tree_size = ?",
            (note.replace("\n", "\n\n", 1), sizes[1]),
        )
    finally:
        attacker.close()
    served = api.get("/v1/checkpoints", after=0).json()["checkpoints"]
    assert [c["size"] for c in served] == [sizes[0], *sizes[2:]]
    assert api.get("/v1/checkpoints", after=sizes[-1]).json() == {
        "checkpoints": [],
        "next_after": None,
    }
