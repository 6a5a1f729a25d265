"""A synthetic log for the witness tests: leaves, roots, proofs and signed
checkpoints, built with the project's RFC 9162 code (held to the
transparency-dev vectors by tests/crypto/test_merkle.py)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Role
from ledger.crypto.merkle import consistency_proof, hash_leaf, root_of, subtree_from_leaves
from ledger.crypto.note import verifier_key
from ledger.crypto.signing import InMemorySigner
from ledger.crypto.witness_wire import AddCheckpoint
from ledger.node import Node
from ledger.witness.state import WitnessState
from ledger.witness.witness import Witness

ORIGIN = "casino.example/ledger"
WITNESS_NAME = "witness.example/w1"


def signer(role: Role, name: str) -> InMemorySigner:
    return InMemorySigner(Ed25519PrivateKey.generate(), role, name)


class Log:
    """A log of `leaves`, signed by its checkpoint key; `fork` changes one leaf."""

    def __init__(self, size: int, key: InMemorySigner | None = None, salt: bytes = b"") -> None:
        self.key = key or signer(Role.CHECKPOINT, "log-key")
        self.leaves = [hash_leaf(salt + i.to_bytes(8, "big")) for i in range(size)]
        # One time for all its checkpoints: a test comparing two texts of one size
        # must not see them differ because a second ticked between them.
        self.when = datetime.now(UTC).replace(microsecond=0)

    def fork(self, at: int) -> Log:
        forked = Log(0, self.key)
        forked.leaves, forked.when = list(self.leaves), self.when
        forked.leaves[at] = hash_leaf(b"rewritten")
        return forked

    def grow(self, size: int) -> None:
        self.leaves += [hash_leaf(b"more" + i.to_bytes(8, "big")) for i in range(size)]

    def checkpoint(self, size: int, when: datetime | None = None) -> Checkpoint:
        return Checkpoint.sign(
            origin=ORIGIN,
            size=size,
            root=root_of(self.leaves[:size]),
            signer=self.key,
            now=when or self.when,
        )

    def proof(self, old: int, new: int) -> list[bytes]:
        if old == 0 or old >= new:
            return []
        return consistency_proof(old, new, subtree_from_leaves(self.leaves[:new]))

    def request(self, old: int, new: int) -> bytes:
        note = self.checkpoint(new).to_note()
        return AddCheckpoint(old, tuple(self.proof(old, new)), note).encode()

    @property
    def verifier_key(self) -> str:
        return verifier_key("log-key", self.key.public_key)

    @property
    def trusted(self) -> dict[str, list[tuple[str, bytes]]]:
        return {ORIGIN: [("log-key", self.key.public_key)]}


def make_witness(tmp_path: Path, log: Log, name: str = WITNESS_NAME) -> Witness:
    state = WitnessState(tmp_path / f"{name.replace('/', '_')}.db")
    return Witness(name, signer(Role.WITNESS, "witness"), log.trusted, state)


class ServedWitness:
    """A witness served over HTTP by uvicorn in a thread of this process."""

    def __init__(self, witness: Witness) -> None:
        import uvicorn

        from ledger.crypto.cosignature import cosigner_verifier_key
        from ledger.witness.asgi import witness_app
        from tests.ports import free_port

        self.witness = witness
        self.port = free_port()
        self.verifier_key = cosigner_verifier_key(witness.name, witness.signer.public_key)
        app = witness_app(witness, self.verifier_key)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def setting(self) -> str:
        """Its `LEDGER_WITNESSES` entry."""
        return f"{self.url} {self.verifier_key}"

    def __enter__(self) -> ServedWitness:
        self.thread.start()
        deadline = time.monotonic() + 60  # a bound against a hang: a loaded machine starts late
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the witness server did not start in 60 s")
            time.sleep(0.01)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def record(node: Node, events: int) -> None:
    """One stream of `events` events (a demo table's throws)."""
    from tests.demo_table import Table

    table = Table(name="T", dealer="D")
    for _ in range(events - 1):
        table.throw_dice([1, 2, 3])
    node.app.save(table)
