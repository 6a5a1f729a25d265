"""A node's personal data (docs/privacy.md): sealed when recorded, revealed
when read by someone holding the keys, erased by destroying a key.

The node opens its vault (`ledger.privacy.subject_keys`) on first use: a
process that records or reveals no personal value never reads it.

    personal = PersonalData(keys_dir, passphrase)
    owner = personal.seal_owner(account_id, "Nguyễn Thị Lan")   # what the event holds
    personal.reveal("owner", owner)                               # "Nguyễn Thị Lan"
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Final

from ledger.privacy.sealed import ERASED, is_sealed, seal, unseal
from ledger.privacy.subject_keys import VAULT_FILE, SubjectKeys, Vault, account_subject

SEALED: Final = "[sealed]"  # what a reader without the vault sees of a sealed value


class PersonalData:
    """The personal-data keys of one keys directory."""

    def __init__(self, keys_dir: Path, passphrase: bytes | None) -> None:
        self.keys_dir = keys_dir
        self._passphrase = passphrase
        self._keys: SubjectKeys | None = None
        self._lock = threading.Lock()

    def _subject_keys(self, *, create: bool) -> SubjectKeys | None:
        with self._lock:
            if self._keys is None:
                if not create and not (self.keys_dir / VAULT_FILE).exists():
                    return None
                vault = Vault.open(self.keys_dir, self._passphrase, create=create)
                self._keys = SubjectKeys(self.keys_dir, vault)
            return self._keys

    def _writing(self) -> SubjectKeys:
        keys = self._subject_keys(create=True)
        assert keys is not None  # made when missing
        return keys

    def seal_owner(self, account_id: str, owner: str) -> dict[str, str]:
        """A player account's owner as its Account.Opened event records it."""
        return seal(self._writing(), account_subject(str(account_id)), "owner", owner)

    def seal_dealer(self, name: str) -> dict[str, str]:
        """A round's dealer as its Round.Opened event records it (one subject a name)."""
        keys = self._writing()
        # The name index read each time (no copy kept here): another process
        # may have erased the dealer since, and a new subject is made then.
        subject = keys.dealer(name, create=True)
        assert subject is not None
        return seal(keys, subject, "dealer", name)

    def dealer_subject(self, name: str) -> str | None:
        """The subject of the dealer called `name`, None when there is none here."""
        keys = self._subject_keys(create=False)
        return keys.dealer(name) if keys is not None else None

    def tag(self, field: str, value: str) -> str:
        """What a request's fingerprint holds in place of a personal value: an
        HMAC under the vault key, so a fingerprint confirms no guess without it."""
        return self._writing().vault.name_tag(field, value)

    def reveal(self, field: str, value: Any) -> str:
        """The value as a reader may see it: clear where this node holds its
        subject's key, `[erased]` once erased here, `[sealed]` where no vault is
        (an auditor's copy); a value recorded in clear (before sealing) as it is."""
        if not is_sealed(value):
            return str(value)
        keys = self._subject_keys(create=False)
        if keys is None:
            return SEALED
        return unseal(keys, field, value)

    def erase(self, subject: str) -> bool:
        """Destroy `subject`'s key; whether there was one to destroy."""
        keys = self._subject_keys(create=False)
        return keys.erase(subject) if keys is not None else False

    def has_vault(self) -> bool:
        """Whether personal data was ever sealed with this keys directory."""
        return (self.keys_dir / VAULT_FILE).exists()

    def holds(self, subject: str) -> bool:
        """Whether this node still holds `subject`'s key."""
        keys = self._subject_keys(create=False)
        return keys is not None and keys.key_of(subject) is not None


def shown(value: Any) -> str:
    """A recorded personal value as a reader without any key sees it."""
    return SEALED if is_sealed(value) else str(value)


__all__ = ["ERASED", "SEALED", "PersonalData", "shown"]
