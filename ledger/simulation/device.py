"""The session's dealer device at its physical tables: it holds its own
`dealer-device` key (in the keys directory, made on first use like the node's
keys and under the same passphrase) and signs every draw and faulty draw
it reports."""

from __future__ import annotations

from typing import Final

from ledger.crypto.keys import Role, read_private_key
from ledger.crypto.keystore import KeyDirectory
from ledger.crypto.signing import InMemorySigner
from ledger.devices import DealerDevice
from ledger.errors import KeyStoreError

DEVICE_KEY: Final = "simulated-dealer-device"


def simulated_device(directory: KeyDirectory, passphrase: bytes | None) -> DealerDevice:
    """The simulated device, with its key (created now if the directory has none)."""
    record = next((r for r in directory.keyring() if r.name == DEVICE_KEY), None)
    if record is None:
        record = directory.create(DEVICE_KEY, Role.DEALER_DEVICE, passphrase)
    if record.role is not Role.DEALER_DEVICE:
        raise KeyStoreError(f"key {DEVICE_KEY} in {directory.path} is not a dealer-device key")
    private_key = read_private_key(directory.private_key_path(DEVICE_KEY), passphrase)
    signer = InMemorySigner(private_key, Role.DEALER_DEVICE)
    if signer.key_id != record.key_id:
        raise KeyStoreError(f"{DEVICE_KEY}.pem does not match its keyring entry")
    return DealerDevice(signer)
