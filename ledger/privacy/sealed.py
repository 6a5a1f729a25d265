"""A personal value sealed under its subject's key (docs/privacy.md): what a
signed event records in place of the value itself.

    {"subject": "account-…", "sealed": "<base64url of nonce and AES-256-GCM ciphertext>"}

The subject and the field are the associated data, so a sealed value copied
to another subject or field does not open. Once the subject's key is erased
the value reads as `ERASED`; the sealed bytes, signed and hashed, stay.
"""

from __future__ import annotations

import base64
import secrets
from typing import Any, Final

from ledger.errors import VerificationError
from ledger.privacy.subject_keys import SubjectKeys

ERASED: Final = "[erased]"


def seal(keys: SubjectKeys, subject: str, field: str, value: str) -> dict[str, str]:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    key = keys.key_of(subject, create=True)
    assert key is not None  # made when missing
    nonce = secrets.token_bytes(12)
    sealed = nonce + AESGCM(key).encrypt(nonce, value.encode(), _aad(subject, field))
    return {"subject": subject, "sealed": base64.urlsafe_b64encode(sealed).decode("ascii")}


def is_sealed(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"subject", "sealed"}


def unseal(keys: SubjectKeys, field: str, value: Any) -> str:
    """The value a sealed one holds, `ERASED` once its subject's key is gone;
    a value recorded in clear (a store written before sealing) as it is."""
    if not is_sealed(value):
        return str(value)
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    subject = str(value["subject"])
    key = keys.key_of(subject)
    if key is None:
        return ERASED
    try:
        raw = base64.urlsafe_b64decode(str(value["sealed"]))
        return AESGCM(key).decrypt(raw[:12], raw[12:], _aad(subject, field)).decode()
    except (InvalidTag, ValueError, UnicodeDecodeError):
        raise VerificationError(f"the sealed {field} of subject {subject} does not open") from None


def _aad(subject: str, field: str) -> bytes:
    return f"casino-ledger sealed v1\x00{subject}\x00{field}".encode()
