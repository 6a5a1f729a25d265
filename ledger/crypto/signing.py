"""Signing and verifying: the `Signer` seam and the fastest sound verifier.

Everything that signs takes a `Signer`, so an HSM (or a remote signing
service) can replace the file key without touching the ledger.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import nacl.bindings
import nacl.exceptions

from ledger.crypto.keys import Role, key_id_of

if TYPE_CHECKING:  # (pyca/cryptography loads only where a key file is read: ledger.crypto.keys)
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


@runtime_checkable
class Signer(Protocol):
    """Something that holds one Ed25519 private key and signs with it."""

    @property
    def key_id(self) -> str: ...

    @property
    def role(self) -> Role: ...

    def sign(self, message: bytes) -> bytes:
        """Return the 64-byte Ed25519 signature of `message`."""
        ...


@runtime_checkable
class NamedSigner(Signer, Protocol):
    """A `Signer` that also knows its key's name and public key, as a signed
    note's signature line needs (C2SP signed-note: name and key hash)."""

    @property
    def name(self) -> str | None: ...

    @property
    def public_key(self) -> bytes: ...


class InMemorySigner:
    """A `Signer` over a private key held in this process (read from a key file)."""

    def __init__(self, private_key: Ed25519PrivateKey, role: Role, name: str | None = None) -> None:
        from cryptography.hazmat.primitives import serialization

        raw_private = private_key.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
        raw_public = private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        # libsodium signs ~25% faster than OpenSSL here; both are RFC 8032 and
        # deterministic, so the signatures are byte-identical.
        _, self._secret = nacl.bindings.crypto_sign_seed_keypair(raw_private)
        self._key_id = key_id_of(raw_public)
        self._role = role
        self._name = name
        self._public_key = raw_public

    @property
    def name(self) -> str | None:
        """The key's name in the keyring (None when made from a bare private key)."""
        return self._name

    @property
    def public_key(self) -> bytes:
        return self._public_key

    @property
    def key_id(self) -> str:
        return self._key_id

    @property
    def role(self) -> Role:
        return self._role

    # libsodium keeps no state between signatures: several threads may sign at once.
    thread_safe = True

    def sign(self, message: bytes) -> bytes:
        signed: bytes = nacl.bindings.crypto_sign(message, self._secret)
        return signed[:64]


@functools.cache
def sign_open_address() -> int | None:
    """The address of libsodium's `crypto_sign_open` as PyNaCl links it (the
    function `verify_signature` calls), for the verifier's C loop to call with
    no Python in between; None where PyNaCl does not expose it (the C loop then
    calls `verify_signature`)."""
    try:
        from nacl._sodium import ffi, lib

        return int(ffi.cast("uintptr_t", ffi.addressof(lib, "crypto_sign_open")))
    except (ImportError, AttributeError):  # pragma: no cover - another PyNaCl build
        return None


def verify_signature(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """True when `signature` is a valid Ed25519 signature of `message`.

    libsodium (through PyNaCl): on this project's machines it verifies ~1.6x
    faster than pyca/cryptography (tools/bench_ed25519.py measures both).
    """
    # PyNaCl does not check the key's length: libsodium would read 32 bytes
    # whatever it is given (a 31-byte key plus the byte after it).
    if len(signature) != 64 or len(public_key) != 32:
        return False
    try:
        nacl.bindings.crypto_sign_open(signature + message, public_key)
    except (nacl.exceptions.BadSignatureError, ValueError, TypeError):
        return False
    return True
