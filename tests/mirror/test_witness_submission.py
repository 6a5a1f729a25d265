"""The checkpointer hands each checkpoint to the configured witnesses, in the
background, and stores what they cosign (both stores): a witness that is down
or hangs delays no checkpoint and is retried at the next one, a witness that
trickles its answer or stays silent delays no other witness's cosignature
(each exchange has one deadline), and a witness
that saw another log refuses, which the node records as a `split-view`
significant event."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger.audit.significant import iter_significant
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.cosignature import Cosigner
from ledger.crypto.keys import Role
from ledger.crypto.merkle import hash_leaf
from ledger.crypto.witness_policy import WitnessPolicy
from ledger.errors import VerificationError
from ledger.export.tiles import write_tiles
from ledger.node import Node, origin
from ledger.outbound import DeadlinePassed
from ledger.store.witnessing import (
    WITNESSES_ENV,
    CosignatureTable,
    Outcome,
    WitnessEndpoint,
    WitnessSubmitter,
    http_post,
    parse_witnesses,
)
from ledger.witness.state import WitnessState
from ledger.witness.witness import Witness
from tests.conftest import PASSPHRASE
from tests.peers import SlowLoris
from tests.witness_support import ServedWitness, record, signer


def log_witness(node: Node, tmp_path: Path, name: str = "witness.example/w1") -> Witness:
    """A witness that follows this node's log (its checkpoint key, its origin)."""
    (key,) = node.keyring.with_role(Role.CHECKPOINT)
    state = WitnessState(tmp_path / f"{name.replace('/', '_')}.db")
    return Witness(name, signer(Role.WITNESS, "w"), {origin(): [(key.name, key.public_key)]}, state)


def policy_for(*witnesses: Witness, quorum: int) -> WitnessPolicy:
    return WitnessPolicy(tuple(Cosigner(w.name, w.signer.public_key) for w in witnesses), quorum)


def in_process(witness: Witness, url: str = "http://w1.test") -> WitnessEndpoint:
    return WitnessEndpoint(url, Cosigner(witness.name, witness.signer.public_key))


def direct(witness: Witness) -> object:
    def post(url: str, body: bytes, timeout: float) -> tuple[int, str, bytes]:
        answer = witness.add_checkpoint(body)
        return answer.status, answer.content_type, answer.body

    return post


@pytest.fixture
def served(node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServedWitness]:
    with ServedWitness(log_witness(node, tmp_path)) as witness:
        monkeypatch.setenv(WITNESSES_ENV, witness.setting)
        yield witness


def test_each_checkpoint_goes_to_the_witness_and_its_cosignature_is_stored(
    node: Node, served: ServedWitness
) -> None:
    record(node, 20)
    node.checkpointer(batch_size=8).catch_up()
    assert node.witnesses is not None
    node.witnesses.close(wait=10)
    newest = node.app.tables.latest_checkpoint()
    assert newest is not None and newest.size == 20
    assert served.witness.state.known(origin()).size == 20
    cosigned = CosignatureTable(node.app.tables).cosigned(newest)
    report = policy_for(served.witness, quorum=1).check(cosigned)
    assert report.valid == [Cosigner(served.witness.name, served.witness.signer.public_key).label]
    # The cosigned note is still the log's checkpoint to anyone without the policy.
    Checkpoint.from_note(cosigned.to_note()).verify(node.keyring)
    # More events: the next checkpoint goes with a proof from size 20.
    record(node, 5)
    node.witnesses = None
    node.checkpointer().catch_up()
    assert node.witnesses is not None
    node.witnesses.close(wait=10)
    assert served.witness.state.known(origin()).size == 25
    assert served.witness.state.refusals() == []


def test_a_witness_that_hangs_or_is_down_delays_no_checkpoint(node: Node, tmp_path: Path) -> None:
    witness = log_witness(node, tmp_path)
    release = threading.Event()
    calls: list[int] = []

    def hanging(url: str, body: bytes, timeout: float) -> tuple[int, str, bytes]:
        calls.append(len(body))
        if len(calls) == 1:
            raise OSError("connection refused")  # down
        release.wait()  # then hanging until released
        answer = witness.add_checkpoint(body)
        return answer.status, answer.content_type, answer.body

    node.witnesses = WitnessSubmitter(node.app.tables, [in_process(witness)], post=hanging)
    record(node, 10)
    node.checkpointer().catch_up()  # the witness is down: nothing cosigned
    node.witnesses.close(wait=10)
    assert calls and witness.state.known(origin()).size == 0
    node.witnesses = WitnessSubmitter(node.app.tables, [in_process(witness)], post=hanging)
    for _ in range(3):  # the witness hangs: every checkpoint is signed all the same
        record(node, 4)
        made = node.checkpointer().catch_up()
        assert made is not None
    assert node.app.tables.latest_checkpoint().size == 22  # type: ignore[union-attr]
    assert witness.state.known(origin()).size == 0
    release.set()  # it answers again: the newest checkpoint offered is cosigned
    node.witnesses.close(wait=10)
    assert witness.state.known(origin()).size == 22
    assert CosignatureTable(node.app.tables).notes(22)


def test_the_witnesses_setting() -> None:
    key = Cosigner("w.example/1", bytes(32)).verifier_key
    (endpoint,) = parse_witnesses(f" https://w.example/witness/  {key} ;\n")
    assert endpoint.url == "https://w.example/witness"
    from ledger.errors import ConfigError

    for bad in ("https://w.example", f"ftp://w.example {key}", "https://w.example AAAA"):
        with pytest.raises(ConfigError, match=WITNESSES_ENV):
            parse_witnesses(bad)


def test_a_split_view_is_recorded_as_a_significant_event(node: Node, tmp_path: Path) -> None:
    """The house shows the witness a forked checkpoint of size 8 signed with the
    log's own key; the log's real checkpoint then does not extend it (422)."""
    witness = log_witness(node, tmp_path)
    record(node, 8)
    key = node.keys.signer(Role.CHECKPOINT, PASSPHRASE)
    fork = Checkpoint.sign(origin=origin(), size=8, root=hash_leaf(b"fork"), signer=key)
    from ledger.crypto.witness_wire import AddCheckpoint

    assert witness.add_checkpoint(AddCheckpoint(0, (), fork.to_note()).encode()).status == 200
    record(node, 4)
    node.witnesses = WitnessSubmitter(
        node.app.tables,
        [in_process(witness)],
        post=direct(witness),  # type: ignore[arg-type]
        on_split_view=node.record_split_view,
    )
    node.checkpointer(batch_size=8).catch_up()
    node.witnesses.close(wait=10)
    found = [e for e in iter_significant(node.app) if e.kind == "split-view"]
    assert found, "the refusal was not recorded"
    event = found[-1]
    assert event.details["witness"] == Cosigner(witness.name, witness.signer.public_key).label
    assert event.details["status"] in (409, 422)
    assert event.details["witness_size"] == 8
    assert "refused" in event.details["reason"]
    assert witness.state.known(origin()).size == 8  # the witness kept its view
    assert [r.status for r in witness.state.refusals()] != []


@pytest.mark.parametrize(
    "statement", ["UPDATE {cosignatures} SET note = note", "DELETE FROM {cosignatures}"]
)
def test_stored_cosignatures_are_append_only(node: Node, statement: str) -> None:
    CosignatureTable(node.app.tables).add(1, "w+00000000", "note")
    recorder = node.app.sealed_recorder
    with pytest.raises(Exception, match="append-only"), recorder.write() as cursor:
        cursor.execute(recorder.sql(statement))
    assert CosignatureTable(node.app.tables).notes() == [(1, "w+00000000", "note")]


def test_keys_list_shows_a_witness_key_in_the_witness_form(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    from ledger.cli.main import main

    record_ = node.keys.create("w1", Role.WITNESS, PASSPHRASE)
    assert main(["--keys", str(node.keys.path), "keys", "list"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if " w1 " in x]
    assert line.split()[1] == "witness"
    shown = line.split("witness-key ")[1].split()[0]
    assert Cosigner.parse(shown) == Cosigner("w1", record_.public_key)


def test_a_witness_ahead_of_this_node_is_no_split_view(node: Node, tmp_path: Path) -> None:
    """Two writing nodes checkpoint one store: the witness may already have
    cosigned a newer checkpoint than the one a lagging node sends. That is
    'ahead', not a split view: nothing is recorded."""
    witness = log_witness(node, tmp_path)
    views: list[object] = []
    submitter = WitnessSubmitter(
        node.app.tables,
        [in_process(witness)],
        post=direct(witness),  # type: ignore[arg-type]
        on_split_view=views.append,
    )
    record(node, 16)
    node.checkpointer(batch_size=8).catch_up()
    older, newer = node.app.tables.checkpoints()
    assert [o.result for o in submitter.submit(newer)] == ["cosigned"]
    lagging = WitnessSubmitter(
        node.app.tables,
        [in_process(witness)],
        post=direct(witness),  # type: ignore[arg-type]
        on_split_view=views.append,
    )
    (outcome,) = lagging.submit(older)  # the witness's 409 says 16
    assert (outcome.result, outcome.detail) == ("ahead", "it cosigned size 16 already")
    assert views == [] and witness.state.refusals() == []


def test_a_witness_that_never_answers_times_out(node: Node, tmp_path: Path) -> None:
    """A real socket that accepts and never answers: the request times out and
    the outcome says the witness is unreachable (the next checkpoint retries)."""
    import socket

    witness = log_witness(node, tmp_path)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        endpoint = WitnessEndpoint(f"http://127.0.0.1:{port}", in_process(witness).cosigner)
        submitter = WitnessSubmitter(node.app.tables, [endpoint], timeout=0.5)
        record(node, 4)
        node.checkpointer().catch_up()
        newest = node.app.tables.latest_checkpoint()
        assert newest is not None
        (outcome,) = submitter.submit(newest)
    assert outcome.result == "unreachable" and "timed out" in outcome.detail
    assert CosignatureTable(node.app.tables).notes() == []


def test_a_submitter_learns_the_witness_size_from_its_409(node: Node, tmp_path: Path) -> None:
    witness = log_witness(node, tmp_path)
    record(node, 16)
    node.checkpointer(batch_size=8).catch_up()
    older, newer = node.app.tables.checkpoints()
    from ledger.crypto.witness_wire import AddCheckpoint

    # The witness cosigned size 8 through someone else: nothing of it is stored here.
    assert witness.add_checkpoint(AddCheckpoint(0, (), older.to_note()).encode()).status == 200
    sent: list[bytes] = []

    def post(url: str, body: bytes, timeout: float) -> tuple[int, str, bytes]:
        sent.append(body)
        answer = witness.add_checkpoint(body)
        return answer.status, answer.content_type, answer.body

    submitter = WitnessSubmitter(node.app.tables, [in_process(witness)], post=post)
    assert [o.result for o in submitter.submit(newer)] == ["cosigned"]
    assert [AddCheckpoint.decode(b).old_size for b in sent] == [0, 8]  # 409 "8", then the proof
    assert len(AddCheckpoint.decode(sent[1]).proof) > 0


def test_a_stored_size_hint_cannot_silence_a_witness(node: Node, tmp_path: Path) -> None:
    """An attacker's row claiming the witness cosigned a huge size: the
    submitter asks the witness instead of believing it, and is cosigned."""
    from tests.attacker import Attacker

    witness = log_witness(node, tmp_path)
    label = in_process(witness).cosigner.label
    attacker = Attacker(node.app.store_url)
    try:
        attacker.sql(
            "INSERT INTO ledger_cosignatures (tree_size, witness, note) VALUES (?, ?, ?)",
            (10**12, label, "junk"),
        )
    finally:
        attacker.conn.close()
    record(node, 5)
    node.checkpointer().catch_up()
    newest = node.app.tables.latest_checkpoint()
    assert newest is not None
    submitter = WitnessSubmitter(
        node.app.tables,
        [in_process(witness)],
        post=direct(witness),  # type: ignore[arg-type]
    )
    assert [o.result for o in submitter.submit(newest)] == ["cosigned"]
    assert witness.state.known(origin()).size == 5


def test_the_published_tiles_checkpoint_carries_the_cosignatures(
    node: Node, tmp_path: Path
) -> None:
    """`ledger tiles` publishes the checkpoint as witnesses cosigned it, also a
    cosignature that came in after the tiles of its size were written; a
    forged cosignature row goes out too but counts for no policy."""
    witness = log_witness(node, tmp_path)
    record(node, 20)
    node.checkpointer(batch_size=8).catch_up()  # no witness configured yet
    tiles = tmp_path / "tiles"
    write_tiles(node.app, node.keyring, tiles, origin=origin())
    first = Checkpoint.from_note((tiles / "checkpoint").read_text())
    assert first.size == 20 and first.others == ()
    # The witness cosigns the checkpoint of size 20 afterwards.
    newest = node.app.tables.latest_checkpoint()
    assert newest is not None
    submitter = WitnessSubmitter(node.app.tables, [in_process(witness)], post=direct(witness))
    submitter.submit(newest)
    submitter.close(wait=10)
    written = write_tiles(node.app, node.keyring, tiles, origin=origin())
    assert written is not None and written.size == 20
    published = Checkpoint.from_note((tiles / "checkpoint").read_text())
    published.verify(node.keyring)
    assert policy_for(witness, quorum=1).check(published).valid
    # An attacker's row under another witness's name goes out but counts for nothing.
    other = log_witness(node, tmp_path, name="witness.example/w2")
    (stored,) = [str(row[2]) for row in CosignatureTable(node.app.tables).notes(20)]
    renamed = stored.replace(f"\u2014 {witness.name} ", f"\u2014 {other.name} ")
    assert renamed != stored
    CosignatureTable(node.app.tables).add(20, other.name, renamed)
    write_tiles(node.app, node.keyring, tiles, origin=origin())
    published = Checkpoint.from_note((tiles / "checkpoint").read_text())
    assert len(published.others) == 2
    published.verify(node.keyring)
    with pytest.raises(VerificationError, match="0 valid cosignatures"):
        policy_for(other, quorum=1).check(published)


# Issue 37, item 1: a slow witness starves no honest one. Each hostile witness
# below is a real socket listed FIRST; each byte it trickles comes well inside
# any time-out per read, so only a deadline for the whole exchange cuts it off.
SLACK = 15.0  # seconds: generous, for a loaded machine; an upper bound only


def hostile_setting(peer: SlowLoris, name: str) -> str:
    """A `LEDGER_WITNESSES` entry for `peer`, under a witness key of its own."""
    return f"{peer.url} {Cosigner(name, signer(Role.WITNESS, 'w').public_key).verifier_key}"


def cosigned_sizes(node: Node, witness: Witness) -> set[int]:
    label = Cosigner(witness.name, witness.signer.public_key).label
    rows = CosignatureTable(node.app.tables).notes()
    return {int(str(size)) for size, name, _ in rows if name == label}


def test_a_slow_or_silent_witness_listed_first_delays_only_its_own_cosignature(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As `checkpoint --follow` runs: the node's submitter from LEDGER_WITNESSES
    (its default deadline), a checkpoint at a time; the honest witness, listed
    last, cosigns each one offered while the others trickle or stay silent."""
    with (
        SlowLoris(trickle="headers") as trickler,
        SlowLoris(trickle=None) as silent,
        ServedWitness(log_witness(node, tmp_path)) as honest,
    ):
        settings = [
            hostile_setting(trickler, "slow.example/w"),
            hostile_setting(silent, "mute.example/w"),
        ]
        monkeypatch.setenv(WITNESSES_ENV, ";".join([*settings, honest.setting]))
        offered = []
        for _ in range(4):
            record(node, 3)
            made = node.checkpointer().catch_up()
            assert made is not None
            offered.append(made.size)
            give_up = time.monotonic() + SLACK
            while made.size not in cosigned_sizes(node, honest.witness):
                assert time.monotonic() < give_up, f"checkpoint {made.size} not cosigned"
                time.sleep(0.02)
        assert cosigned_sizes(node, honest.witness) == set(offered)


def test_one_submission_is_over_within_the_deadline(node: Node, tmp_path: Path) -> None:
    deadline = 1.0
    with (
        SlowLoris(trickle="headers") as headers,
        SlowLoris(trickle="body") as body,
        SlowLoris(trickle=None) as silent,
        ServedWitness(log_witness(node, tmp_path)) as honest,
    ):
        hostile = [
            parse_witnesses(hostile_setting(peer, f"w{i}.example/slow"))[0]
            for i, peer in enumerate((headers, body, silent))
        ]
        (fair,) = parse_witnesses(honest.setting)
        submitter = WitnessSubmitter(node.app.tables, [*hostile, fair], timeout=deadline)
        record(node, 4)
        newest = node.checkpointer().catch_up()
        assert newest is not None
        outcomes: list[Outcome] = []
        asking = threading.Thread(target=lambda: outcomes.extend(submitter.submit(newest)))
        asking.daemon = True  # on a submitter without a deadline it would never end
        started = time.monotonic()
        asking.start()
        asking.join(deadline + SLACK)
        assert not asking.is_alive(), "the submission outlived its deadline"
        assert time.monotonic() - started <= deadline + SLACK
        assert headers.sent > 0 and body.sent > 0  # cut off mid-trickle, not refused at once
        # In the background too: each witness's thread ends, none hangs on its witness.
        submitter.offer(newest)
        assert submitter.close(wait=deadline + SLACK), "a witness's thread outlived its deadline"
    assert [o.result for o in outcomes] == ["unreachable"] * 3 + ["cosigned"]
    assert all("timed out" in o.detail for o in outcomes[:3]), outcomes
    assert newest.size in cosigned_sizes(node, honest.witness)


@pytest.mark.parametrize("trickle", ["headers", "body"])
def test_a_post_is_cut_off_at_its_deadline_not_per_read(trickle: str) -> None:
    deadline = 1.0
    failures: list[BaseException] = []

    def ask(url: str) -> None:
        try:
            http_post(f"{url}/add-checkpoint", b"old 0\n", deadline)
        except BaseException as exc:
            failures.append(exc)

    with SlowLoris(trickle) as peer:
        asking = threading.Thread(target=ask, args=(peer.url,), daemon=True)
        asking.start()
        asking.join(deadline + SLACK)
        assert not asking.is_alive(), "the request outlived its deadline"
    (failure,) = failures
    assert isinstance(failure, DeadlinePassed), repr(failure)  # not a truncated answer
