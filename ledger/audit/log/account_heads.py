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

from ledger.store.account_heads import Head, heads_map

AccountEvent = tuple[int, str, int, bytes]  # (log position, stream, version, entry hash)


class AccountHeadsCheck:
    def __init__(self, expected: Mapping[int, bytes], saved: Iterable[Head] = ()) -> None:
        self.expected = dict(expected)  # checkpoint size -> the accounts root it signed
        self.heads: dict[UUID, Head] = {head.account: head for head in saved}
        self.map = heads_map(self.heads.values())
        # Moved since the map was last brought up to date: the map is needed at
        # checkpoint sizes only, so an account moved often is re-hashed once.
        self.moved: dict[UUID, Head] = {}
        self.checked = 0  # checkpoint sizes whose map was compared

    def observe(self, first: int, end: int, events: list[AccountEvent]) -> list[tuple[int, str]]:
        """A chunk's leaves [first, end) and its account events: (size, message)
        for each checkpoint inside whose signed map the events do not give."""
        found: list[tuple[int, str]] = []
        index = 0
        for size in sorted(s for s in self.expected if first < s <= end):
            while index < len(events) and events[index][0] < size:
                self._apply(events[index])
                index += 1
            self.checked += 1
            for head in self.moved.values():
                self.map.set(head.key, head.leaf)
            self.moved.clear()
            if self.map.root() != self.expected[size]:
                found.append(
                    (
                        size,
                        f"the checkpoint of size {size} signs an account heads map "
                        f"(root {self.expected[size].hex()[:16]}…) that the account events "
                        f"before it do not give (root {self.map.root().hex()[:16]}…)",
                    )
                )
        for event in events[index:]:
            self._apply(event)
        return found

    def _apply(self, event: AccountEvent) -> None:
        position, stream, version, entry_hash = event
        head = Head(UUID(stream), version, position, entry_hash)
        self.heads[head.account] = self.moved[head.account] = head
