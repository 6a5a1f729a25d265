"""The checks every archived event passes, whether it is being written from the
store or read back from an archive by an auditor: its envelope well formed,
its stream and version the ones it is archived as, a round's event by the
type it signs (only rounds are archived: the choice reads the unsigned topic
column, which an attacker may have edited), its payload the one its header
signs, signed by a ledger-node key of the keyring (those in other
processes: `envelopes`), its stream's chain whole from the stream's first
event, and its entry hash the leaf the level-0 tile holds at its position
(the tiles themselves held to the signed root by the caller)."""

from __future__ import annotations

from binascii import unhexlify
from collections.abc import Callable, Hashable

from ledger.archive.envelopes import Envelopes
from ledger.crypto.envelope import ENVELOPE_PREFIX, GENESIS_HASH, PREV_OFFSET
from ledger.crypto.merkle import hash_leaf
from ledger.errors import VerificationError
from ledger.store.round_rows import ROUND_TOPIC

_START = ENVELOPE_PREFIX.size
_PREV = slice(_START + PREV_OFFSET, _START + PREV_OFFSET + 64)
# A round's signed type, as a canonical header holds it: its fields are plain
# (no quote), so this occurs there once at most, and only as the type.
_ROUND_TYPE = b'","type":"' + ROUND_TOPIC.encode()


class EventChecks:
    """Hand each event in, in log order; `finish` waits for the envelopes.
    `describe` names an event for an error from the `where` it was handed in
    with (built only for the one that fails)."""

    def __init__(
        self,
        envelopes: Envelopes,
        level0: Callable[[int], bytes],
        size: int,
        describe: Callable[[Hashable], str],
    ) -> None:
        """`envelopes`: their checkers (made with this `describe`)."""
        self._envelopes = envelopes
        self._describe = describe
        self._level0 = level0
        self._size = size
        self._heads: dict[str, tuple[int, bytes]] = {}

    @property
    def streams(self) -> int:
        return len(self._heads)

    def check(
        self, position: int, stream: str, version: int, state: bytes, where: Hashable
    ) -> bytes:
        """The event's entry hash, once its chain and leaf checked (its envelope,
        by a worker, before `finish` returns); else `VerificationError`.

        The entry hash, the link to the previous event and the signed type are
        read where every canonical header has them (its signed bytes; the
        `prev` field at a fixed offset; the type between its neighbours): a
        header that is not what that reading assumes fails the worker's full
        opening."""
        try:
            header_end = _START + (state[4] << 8 | state[5])  # (ENVELOPE_PREFIX's length)
            entry_hash = hash_leaf(state[_START:header_end])
            prev = unhexlify(state[_PREV])
        except (IndexError, ValueError):
            raise VerificationError(f"{self._describe(where)}: malformed envelope") from None
        if state.find(_ROUND_TYPE, _START, header_end) < 0:
            raise VerificationError(
                f"{self._describe(where)}: it signs another type than a round's (only rounds "
                "are archived)"
            )
        self._envelopes.add(stream, version, state, where)
        last = self._heads.get(stream, (0, GENESIS_HASH))
        if version != last[0] + 1 or prev != last[1]:
            raise VerificationError(
                f"{self._describe(where)}: its stream's chain is broken (not whole)"
            )
        self._heads[stream] = (version, entry_hash)
        if position >= self._size or entry_hash != self._level0(position):
            raise VerificationError(
                f"{self._describe(where)}: not the leaf the tiles hold at its position"
            )
        return entry_hash

    def finish(self) -> None:
        """Wait for every envelope; raise for the first that does not check."""
        self._envelopes.finish()

    def close(self) -> None:
        self._envelopes.close()
