"""An auditor's saved verification state (`verify --save-state DIR`, `--resume DIR`).

A full run over a log of n events costs O(n); an auditor who verifies every
day wants to pay only for what is new. The state a clean run leaves is what
the next run needs to go on from its end, and nothing the store says:

- the log's size and the row id of its last event, the Merkle tree of those
  events as a compact range (its root is the state's root), and the root at
  every checkpoint, kept checkpoint and recorded run size up to there;
- a SHA-256 digest of every chunk of raw rows read (row ids, streams,
  versions, types and envelope bytes), and of the stored Merkle leaves and
  nodes under it that were compared with the tree (those under the newest
  checkpoint): the next run re-reads those rows and re-hashes them, which
  costs a raw read, so an edit, an insertion or a removal anywhere before the
  state's end is still caught (and its chunk named) without checking every
  envelope and re-settling every round again; Merkle rows written under a
  chunk since (its events anchored later) are compared with its tree then;
- the Merkle nodes that span chunks (a few per 4,096 events), compared with
  the stored ones by the next run;
- how many streams the log held: no stream's head, which would make the
  state grow with every stream ever written; the next run takes the heads
  of the streams its new events touch from the rows it re-hashes;
- the keys and revocations the events were judged under (a revocation
  recorded later that reaches back before the state is not judged: a
  `not-checked` finding, verify in full);
- at level settlement, everything the settlement audit carries between
  events (`SettlementAudit.saved`): wallet balances and postings, seeds and
  draws awaiting a reveal, rounds not yet ended, and the ended rounds'
  archive (`rounds.bin` beside `state.json`).

The state is the auditor's own file: it is written only by a run with no
finding and trusted as the auditor's earlier verdict, like a kept checkpoint.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from ledger.audit.games.round_archive import RoundArchive
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import CompactRange
from ledger.errors import ConfigError
from ledger.store.account_heads import Head

# 2: no stream heads, rows hashed in one framing; 3: table kinds; 4: the digest
# of each chunk's stored Merkle rows beside its rows', and the nodes that span
# chunks; 5: a round's facts name its game and draws as the code does (game_id,
# draws; its pins game, game_version); 6: each account's head (the account
# heads map the checkpoints sign, `ledger.audit.log.account_heads`)
STATE_FORMAT = 6
STATE_FILE = "state.json"
ROUNDS_FILE = "rounds.bin"


@dataclass(frozen=True)
class SavedChunk:
    """Rows with id in (after_id, last_id], log positions [first_leaf, first_leaf + rows)."""

    first_leaf: int
    after_id: int
    last_id: int
    rows: int
    digest: str  # of the rows (`rows_digest`)
    # Of the stored Merkle rows under leaves [first_leaf, tree_to) (None: none
    # were; `tree_to` is first_leaf when they were past the newest checkpoint, or not read).
    tree_digest: str | None
    tree_to: int


@dataclass
class VerifyState:
    level: str
    size: int  # events verified
    last_id: int  # the row id of the last of them (0: none)
    tree: CompactRange  # leaves [0, size)
    chunks: list[SavedChunk]
    streams: int  # streams in the log up to size
    roots: dict[int, bytes]  # checkpoint, kept and recorded-run sizes <= size -> root
    keys: list[str]  # key ids of the keyring the events were judged with
    revocations: dict[str, int]  # key id -> revoked at (µs), as applied
    saved_at: int  # when the run that made it started (µs)
    # The Merkle nodes that span chunks, under the newest checkpoint, as the
    # events gave them: (level, index, hash); the next run compares the stored ones.
    spanning: list[tuple[int, int, bytes]] = field(default_factory=list)
    settlement: dict[str, Any] | None = None  # SettlementAudit.saved(), at level settlement
    account_heads: list[Head] = field(default_factory=list)  # each account's, at `size`
    source: Path | None = field(default=None, compare=False)  # the directory it was read from

    @property
    def root(self) -> bytes:
        return self.tree.root()

    @classmethod
    def revocations_of(cls, keyring: Keyring) -> dict[str, int]:
        return {
            record.key_id: record.window_micros()[2]
            for record in keyring
            if record.revoked_at is not None
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "level": self.level,
            "size": self.size,
            "last_id": self.last_id,
            "root": self.root.hex(),
            "tree": [h.hex() for h in self.tree.hashes],
            "chunks": [
                [c.first_leaf, c.after_id, c.last_id, c.rows, c.digest, c.tree_digest, c.tree_to]
                for c in self.chunks
            ],
            "spanning": [[level, index, value.hex()] for level, index, value in self.spanning],
            "streams": self.streams,
            "roots": {str(s): r.hex() for s, r in sorted(self.roots.items())},
            "keys": sorted(self.keys),
            "revocations": dict(sorted(self.revocations.items())),
            "saved_at": self.saved_at,
            "settlement": self.settlement,
            "account_heads": [
                [str(h.account), h.version, h.position, h.entry_hash.hex()]
                for h in self.account_heads
            ],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], source: Path | None = None) -> VerifyState:
        if data.get("format") != STATE_FORMAT:
            made = data.get("format")
            raise ConfigError(
                f"a verify state of format {made}, this release reads format {STATE_FORMAT}: "
                "verify in full with --save-state to make a new one"
                if isinstance(made, int)
                else f"not a verify state of format {STATE_FORMAT}"
            )
        size = int(data["size"])
        tree = CompactRange(0, size, [bytes.fromhex(h) for h in data["tree"]])
        if tree.root().hex() != data["root"]:
            raise ConfigError("its tree does not give its root: the file is damaged")
        chunks = [
            SavedChunk(
                int(c[0]),
                int(c[1]),
                int(c[2]),
                int(c[3]),
                str(c[4]),
                None if c[5] is None else str(c[5]),
                int(c[6]),
            )
            for c in data["chunks"]
        ]
        if sum(c.rows for c in chunks) != size:
            raise ConfigError("its chunks do not add up to its size: the file is damaged")
        return cls(
            level=str(data["level"]),
            size=size,
            last_id=int(data["last_id"]),
            tree=tree,
            chunks=chunks,
            streams=int(data["streams"]),
            roots={int(s): bytes.fromhex(r) for s, r in data["roots"].items()},
            keys=[str(k) for k in data["keys"]],
            revocations={str(k): int(v) for k, v in data["revocations"].items()},
            saved_at=int(data["saved_at"]),
            spanning=[(int(n[0]), int(n[1]), bytes.fromhex(n[2])) for n in data["spanning"]],
            settlement=data.get("settlement"),
            account_heads=[
                Head(UUID(h[0]), int(h[1]), int(h[2]), bytes.fromhex(h[3]))
                for h in data["account_heads"]
            ],
            source=source,
        )

    def save(self, directory: Path, rounds: Any = None) -> None:
        """Write state.json (and the ended rounds' archive) into `directory`,
        each file whole or not at all (written beside, then renamed)."""
        directory.mkdir(parents=True, exist_ok=True)
        if rounds is not None:
            partial = directory / (ROUNDS_FILE + ".partial")
            rounds.save_to(partial)
            os.replace(partial, directory / ROUNDS_FILE)
        partial = directory / (STATE_FILE + ".partial")
        partial.write_text(json.dumps(self.to_json(), separators=(",", ":")) + "\n")
        os.replace(partial, directory / STATE_FILE)

    @classmethod
    def load(cls, directory: Path) -> VerifyState:
        path = directory / STATE_FILE
        if not path.is_file():
            raise ConfigError(f"--resume {directory}: no {STATE_FILE} there (made by --save-state)")
        try:
            return cls.from_json(json.loads(path.read_text()), directory)
        except ConfigError as exc:
            raise ConfigError(f"--resume {directory}: {exc}") from None
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise ConfigError(
                f"--resume {directory}: {STATE_FILE} is not a verify state ({exc})"
            ) from None

    def saved_settlement(self) -> tuple[dict[str, Any], RoundArchive]:
        """The settlement audit's saved state and a scratch copy of its ended rounds."""
        if self.settlement is None or self.source is None:
            raise ConfigError("the saved state holds no settlement state")
        path = self.source / ROUNDS_FILE
        if not path.is_file():
            raise ConfigError(f"--resume {self.source}: no {ROUNDS_FILE} beside {STATE_FILE}")
        return self.settlement, RoundArchive.restored(path, self.settlement["archive"])

    def judged_keys(self, keyring: Keyring) -> list[str]:
        """What the keyring now says that the state's verdict did not weigh: keys
        it no longer holds, revocations new or earlier that reach back before
        the state was made."""
        changed = []
        held = {record.key_id: record for record in keyring}
        for key_id in self.keys:
            if key_id not in held:
                changed.append(f"key {key_id[:16]} judged events before the state; it is gone")
        for key_id, record in held.items():
            at = record.window_micros()[2]
            if at >= self.saved_at:
                continue
            before = self.revocations.get(key_id)
            if before is None or at < before:
                changed.append(
                    f"key {key_id[:16]} is now revoked from {at} µs, before the state was "
                    f"made ({self.saved_at} µs): events before the state were judged without it"
                )
        return changed
