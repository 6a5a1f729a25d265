"""The checks every archived event passes, whether it is being written from the
store or read back from an archive by an auditor: its envelope well formed,
signed by a ledger-node key of the keyring (the signature verified in
another process, `signatures`), its stream's chain whole from the stream's
first event, and its entry hash the leaf the level-0 tile holds at its
position (the tiles themselves held to the signed root by the caller)."""

from __future__ import annotations

from collections.abc import Callable, Hashable

from ledger.archive.signatures import Signatures
from ledger.crypto.envelope import GENESIS_HASH, SignerCheck, open_envelope
from ledger.crypto.keys import Keyring
from ledger.errors import VerificationError


class EventChecks:
    """Hand each event in, in log order; `finish` waits for the signatures.
    `describe` names an event for an error from the `where` it was handed in
    with (built only for the one that fails)."""

    def __init__(
        self,
        keyring: Keyring,
        level0: Callable[[int], bytes],
        size: int,
        describe: Callable[[Hashable], str],
    ) -> None:
        self._signer = SignerCheck(keyring)
        self._signatures = Signatures(describe)
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
        """The event's entry hash, once every check but its signature's passed
        (that one is `finish`'s); else `VerificationError` naming it."""
        envelope = open_envelope(state, stream=stream, version=version)
        if envelope.stream != stream or envelope.version != version:
            raise VerificationError(f"{self._describe(where)}: its envelope is another event's")
        public_key = self._signer.check_signer(envelope, stream=stream, version=version)
        self._signatures.add(public_key, envelope.signed_message, envelope.signature, where)
        last = self._heads.get(stream, (0, GENESIS_HASH))
        if version != last[0] + 1 or envelope.prev_hash != last[1]:
            raise VerificationError(
                f"{self._describe(where)}: its stream's chain is broken (not whole)"
            )
        entry_hash = envelope.entry_hash
        self._heads[stream] = (version, entry_hash)
        if position >= self._size or entry_hash != self._level0(position):
            raise VerificationError(
                f"{self._describe(where)}: not the leaf the tiles hold at its position"
            )
        return entry_hash

    def finish(self) -> None:
        """Wait for every signature; raise for the first that does not verify."""
        self._signatures.finish()

    def close(self) -> None:
        self._signatures.close()
