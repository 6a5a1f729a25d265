"""Step 6's account heads: the map each checkpoint signs, recomputed from the events.

A checkpoint's `accounts` line is the root of the account heads map at its
size (`ledger.crypto.heads_map`): what lets a player's history be proven
complete from the account's head back (docs/history.md). The chunks collect
every account event's position, version and entry hash as they verify them;
the merge, in log order, builds the map and compares its root at each
checkpoint size that signs one. A checkpoint whose line does not match is an
altered log (or a log key that signed a wrong map): a finding at step 6.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from uuid import UUID

from ledger.crypto.heads_map import account_key, head_leaf
from ledger.store.account_heads import Head, heads_map

AccountEvent = tuple[int, str, int, bytes]  # (log position, stream, version, entry hash)


class AccountHeadsCheck:
    def __init__(self, expected: Mapping[int, bytes], saved: Iterable[Head] = ()) -> None:
        self.expected = dict(expected)  # checkpoint size -> the accounts root it signed
        # Each account's head by its stream id as the chunks name it (canonical
        # text): (version, position, entry hash); Heads are made only to save them.
        self._heads: dict[str, tuple[int, int, bytes]] = {
            str(h.account): (h.version, h.position, h.entry_hash) for h in saved
        }
        self._keys: dict[str, bytes] = {}  # stream -> its key in the map, once hashed
        self.map = heads_map(saved)
        # Moved since the map was last brought up to date: the map is needed at
        # checkpoint sizes only, so an account moved often is re-hashed once.
        self._moved: set[str] = set()
        self.checked = 0  # checkpoint sizes whose map was compared

    @property
    def heads(self) -> dict[UUID, Head]:
        """Every account's head so far (for a saved state)."""
        return {UUID(stream): Head(UUID(stream), *head) for stream, head in self._heads.items()}

    def observe(self, first: int, end: int, events: list[AccountEvent]) -> list[tuple[int, str]]:
        """A chunk's leaves [first, end) and its account events: (size, message)
        for each checkpoint inside whose signed map the events do not give."""
        found: list[tuple[int, str]] = []
        heads, moved, index, count = self._heads, self._moved, 0, len(events)
        for size in sorted(s for s in self.expected if first < s <= end):
            while index < count and events[index][0] < size:
                position, stream, version, entry_hash = events[index]
                heads[stream] = (version, position, entry_hash)
                moved.add(stream)
                index += 1
            self.checked += 1
            root = self._bring_up_to_date()
            if root != self.expected[size]:
                found.append(
                    (
                        size,
                        f"the checkpoint of size {size} signs an account heads map "
                        f"(root {self.expected[size].hex()[:16]}…) that the account events "
                        f"before it do not give (root {root.hex()[:16]}…)",
                    )
                )
        for position, stream, version, entry_hash in events[index:]:
            heads[stream] = (version, position, entry_hash)
            moved.add(stream)
        return found

    def _bring_up_to_date(self) -> bytes:
        keys, heads = self._keys, self._heads
        for stream in self._moved:
            key = keys.get(stream)
            if key is None:
                key = keys[stream] = account_key(stream)
            version, position, entry_hash = heads[stream]
            self.map.set(key, head_leaf(key, version, position, entry_hash))
        self._moved.clear()
        return self.map.root()
