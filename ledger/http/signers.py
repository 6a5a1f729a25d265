"""An operator's signature made by the operator, not by the server.

The Python API takes a `Signer` and asks it to sign the fact it records
(`operator_fact`, `correction_fact`). Over HTTP the operator signs on their own
machine and sends `{key_id, signature}`; `PresignedSigner` hands the casino
that signature, and only when it verifies over exactly the bytes the casino
asked to sign (else nothing is recorded). The server never holds the key.
"""

from __future__ import annotations

import base64
import binascii

from ledger.crypto.keys import Keyring, Role
from ledger.crypto.signing import verify_signature
from ledger.errors import InvalidCommandError, with_article


class PresignedSigner:
    """A `Signer` that returns a signature its holder made, after checking it."""

    def __init__(self, keyring: Keyring, key_id: str, signature: str, role: Role) -> None:
        self._keyring = keyring
        self._key_id = key_id
        self._signature = signature
        self._role = role

    @property
    def key_id(self) -> str:
        return self._key_id

    @property
    def role(self) -> Role:
        return self._role

    def sign(self, message: bytes) -> bytes:
        record = self._keyring.get(self._key_id)
        if record is None or record.role is not self._role:
            raise InvalidCommandError(
                f"key {self._key_id[:16]} is not {with_article(self._role.value)} key "
                "in the keyring",
                code="key_refused",
            )
        try:
            signature = base64.b64decode(self._signature, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidCommandError(
                f"the {self._role.value} signature is not base64", code="signature_invalid"
            ) from None
        if not verify_signature(record.public_key, message, signature):
            raise InvalidCommandError(
                f"the {self._role.value} signature does not verify over this fact "
                f"(key {self._key_id[:16]}): sign exactly the fact this command records",
                code="signature_invalid",
            )
        return signature
