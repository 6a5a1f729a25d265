"""The archive workers' envelope checks (`ledger.archive.envelopes`), in C runs
and in Python alone, on every batch an attacker could hand them: both give
the same first bad envelope, named the same. The C runs only ever say "these
passed"; anything they do not pass goes back to the Python checks, which word
it. So any difference here is an envelope the C runs passed and Python would
not, or the reverse.

The batch is signed by two ledger-node keys in turn (each change of key goes
back to Python, whose pass makes it the run's key), with envelopes of an
operator key and of a key not in the keyring among the mutations."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.archive.envelopes import EnvelopeCheck, Sent
from ledger.crypto.envelope import GENESIS_HASH, seal
from ledger.crypto.keys import Keyring, Role
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.native import native
from tests.conftest import PASSPHRASE

# Under CI=true the C fast path is built (tools/bootstrap.py): its absence fails, never skips.
needs_native = pytest.mark.skipif(
    native is None and os.environ.get("CI") != "true", reason="no C fast path built here"
)
_AT = 1_790_000_000_000_000  # a signing time inside the keys' validity


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Keyring, list[Sent], dict[str, Any]]:
    """Streams of chained events, interleaved, signed by `node-a` then `node-b`
    in turns of five; `signers` also holds an operator's key and a stranger's."""
    keys = KeyDirectory(tmp_path_factory.mktemp("envelopes") / "keys")
    for name, role in (("node-a", Role.LEDGER_NODE), ("node-b", Role.LEDGER_NODE)):
        keys.create(name, role, PASSPHRASE)
    keys.create("op", Role.OPERATOR, PASSPHRASE)
    stranger = KeyDirectory(tmp_path_factory.mktemp("stranger") / "keys")
    stranger.create("node-x", Role.LEDGER_NODE, PASSPHRASE)
    signers = {
        "a": keys.signer(Role.LEDGER_NODE, PASSPHRASE, "node-a"),
        "b": keys.signer(Role.LEDGER_NODE, PASSPHRASE, "node-b"),
        "operator": keys.signer(Role.OPERATOR, PASSPHRASE, "op"),
        "stranger": stranger.signer(Role.LEDGER_NODE, PASSPHRASE, "node-x"),
    }
    streams = [str(UUID(int=n + 1)) for n in range(4)]
    heads = dict.fromkeys(streams, (0, GENESIS_HASH))
    batch: list[Sent] = []
    for number in range(40):
        stream = streams[number % len(streams)]
        version, prev = heads[stream]
        payload = b'{"n":%d,"stake":%d}' % (number, 100 * number)
        state, entry = seal(
            stream=stream,
            version=version + 1,
            event_type="ledger.domain.round:Round." + ("Opened" if version == 0 else "BetPlaced"),
            prev_hash=prev,
            payload=payload,
            signer=signers["a" if number // 5 % 2 == 0 else "b"],
            signed_at=_AT + number,
        )
        heads[stream] = (version + 1, entry)
        batch.append((stream, version + 1, state))
    return keys.keyring(), batch, signers


def _resealed(stream: str, version: int, state: bytes, signer: Any, payload: bytes) -> bytes:
    header_size = int.from_bytes(state[4:6], "big")
    header = state[6 : 6 + header_size].decode()
    prev = bytes.fromhex(header.split('"prev":"')[1][:64])
    event_type = header.split('"type":"')[1].split('"')[0]
    return seal(
        stream=stream,
        version=version,
        event_type=event_type,
        prev_hash=prev,
        payload=payload,
        signer=signer,
        signed_at=_AT,
    )[0]


MUTATIONS = [
    "flip",  # one byte anywhere: header, signature or payload
    "flip-header",  # one byte among the header's signed fields
    "truncate",
    "stream",  # the row's stream, as sent
    "version",
    "payload",  # another payload, the header's hash left as signed
    "payload-hash-fixed",  # another payload and its hash in the header: the signature fails
    "operator",  # re-sealed by an operator's key (in the keyring, not a ledger node's)
    "stranger",  # re-sealed by a key not in the keyring
    "other-node",  # re-sealed by the other ledger-node key: still good
    "swap",
    "duplicate",
    "v1",  # the magic of a release-0.1 envelope
]


def _mutated(batch: list[Sent], signers: dict[str, Any], data: st.DataObject) -> list[Sent]:
    rows = [list(row) for row in batch]
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        at = data.draw(st.integers(0, len(rows) - 1), label="row")
        kind = data.draw(st.sampled_from(MUTATIONS), label="kind")
        stream, version, state = rows[at]
        size = 6 + int.from_bytes(state[4:6], "big")
        if kind == "flip":
            index = data.draw(st.integers(0, len(state) - 1))
            rows[at][2] = state[:index] + bytes([state[index] ^ 1]) + state[index + 1 :]
        elif kind == "flip-header":
            index = data.draw(st.integers(6, size - 1))
            mask = data.draw(st.sampled_from([1, 2, 32, 64]))
            rows[at][2] = state[:index] + bytes([state[index] ^ mask]) + state[index + 1 :]
        elif kind == "truncate":
            rows[at][2] = state[: data.draw(st.integers(0, len(state) - 1))]
        elif kind == "stream":
            rows[at][0] = data.draw(st.sampled_from([rows[(at + 1) % len(rows)][0], "é", 'a"b']))
        elif kind == "version":
            rows[at][1] = data.draw(st.sampled_from([0, version + 1, version - 1, 1 << 60]))
        elif kind == "payload":
            rows[at][2] = state[: size + 64] + state[size + 64 :].replace(b"0", b"1", 1) + b" "
        elif kind == "payload-hash-fixed":
            payload = state[size + 64 :] + b" "
            digest = hashlib.sha256(payload).hexdigest().encode()
            start = state.index(b'"payload_sha256":"') + 18
            rows[at][2] = state[:start] + digest + state[start + 64 : size + 64] + payload
        elif kind in ("operator", "stranger", "other-node"):
            signer = signers[kind if kind != "other-node" else data.draw(st.sampled_from("ab"))]
            rows[at][2] = _resealed(stream, version, state, signer, state[size + 64 :])
        elif kind == "swap":
            other = data.draw(st.integers(0, len(rows) - 1))
            rows[at], rows[other] = rows[other], rows[at]
        elif kind == "duplicate" and at + 1 < len(rows):
            rows[at + 1] = list(rows[at])
        elif kind == "v1":
            rows[at][2] = b"LSE1" + state[4:]
    return [(str(s), int(v), bytes(b)) for s, v, b in rows]


def both_ways(keyring: Keyring, batch: list[Sent]) -> tuple[Any, Any]:
    return (
        EnvelopeCheck(keyring, use_native=True).first_bad(batch),
        EnvelopeCheck(keyring, use_native=False).first_bad(batch),
    )


@needs_native
def test_an_untouched_batch_passes_both_ways_and_in_c_runs(world: Any) -> None:
    keyring, batch, _ = world
    check = EnvelopeCheck(keyring)
    explained = []
    python_checks = check.checked

    def counted(stream: str, version: int, state: bytes) -> bytes:
        explained.append(version)
        return python_checks(stream, version, state)

    check.checked = counted  # type: ignore[method-assign]
    assert check.first_bad(batch) is None
    assert both_ways(keyring, batch) == (None, None)
    assert len(explained) == 8  # the first envelope of each turn of a key, no more


@needs_native
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_every_altered_batch_is_judged_the_same_both_ways(world: Any, data: st.DataObject) -> None:
    keyring, batch, signers = world
    altered = _mutated(batch, signers, data)
    in_c, in_python = both_ways(keyring, altered)
    assert in_c == in_python


@pytest.mark.parametrize("use_native", [True, False])
@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("payload", "its payload is not the one its envelope signs"),
        ("payload-hash-fixed", "its envelope signature is invalid"),
        ("operator", "signed by an operator key, not a ledger-node key"),
        ("stranger", "which is not in the keyring"),
    ],
)
def test_each_bad_envelope_is_named(
    world: Any, tmp_path: Path, use_native: bool, kind: str, said: str
) -> None:
    keyring, batch, signers = world

    class Drawn:
        def __init__(self) -> None:
            self.values = iter([1, 17, kind])

        def draw(self, strategy: Any, label: str | None = None) -> Any:
            return next(self.values)

    altered = _mutated(batch, signers, Drawn())  # type: ignore[arg-type]
    found = EnvelopeCheck(keyring, use_native=use_native).first_bad(altered)
    assert found is not None and found[0] == 17 and said in found[1], found
