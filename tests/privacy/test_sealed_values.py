"""Personal values sealed per data subject (issue 40, item 1, the first part):
a subject's key opens its values and nothing else, an erased key opens
nothing, and no clear value or subject key is ever on disk."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import KeyStoreError, NotFoundError, VerificationError
from ledger.privacy.sealed import ERASED, is_sealed, seal, unseal
from ledger.privacy.subject_keys import SubjectKeys, Vault, account_subject, check_subject

PASSPHRASE = b"correct horse"
NAME = "Nguyễn Thị Lan"
ACCOUNT = "0b7d1c1e-3f9a-4c55-9a51-2f7c1d3b9e10"


@pytest.fixture
def keys(tmp_path: Path) -> SubjectKeys:
    return SubjectKeys(tmp_path, Vault.open(tmp_path, PASSPHRASE, create=True))


def test_a_sealed_value_opens_with_its_subject_s_key_only(keys: SubjectKeys) -> None:
    subject = account_subject(ACCOUNT)
    sealed = seal(keys, subject, "owner", NAME)
    assert is_sealed(sealed) and NAME not in str(sealed)
    assert unseal(keys, "owner", sealed) == NAME
    # Moved to another field or another subject, it does not open.
    with pytest.raises(VerificationError, match="does not open"):
        unseal(keys, "dealer", sealed)
    other = account_subject("9f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f")
    seal(keys, other, "owner", "someone else")
    with pytest.raises(VerificationError, match="does not open"):
        unseal(keys, "owner", {**sealed, "subject": other})
    # A value a store recorded in clear before sealing reads as it is.
    assert unseal(keys, "owner", "Ann") == "Ann"


def test_an_erased_subject_s_values_read_as_erased_and_its_name_finds_nothing(
    keys: SubjectKeys,
) -> None:
    dealer = keys.dealer("Bích", create=True)
    assert dealer is not None and keys.dealer("Bích") == dealer
    sealed = seal(keys, dealer, "dealer", "Bích")
    kept = seal(keys, account_subject(ACCOUNT), "owner", NAME)
    assert keys.erase(dealer) is True
    assert unseal(keys, "dealer", sealed) == ERASED
    assert keys.dealer("Bích") is None  # the name leads nowhere any more
    assert keys.dealer("Bích", create=True) != dealer  # a new subject, never the old key
    assert unseal(keys, "owner", kept) == NAME  # other subjects untouched
    assert keys.erase(dealer) is False  # again: nothing left to erase


def test_no_clear_value_or_subject_key_is_on_disk(tmp_path: Path, keys: SubjectKeys) -> None:
    subject = account_subject(ACCOUNT)
    seal(keys, subject, "owner", NAME)
    keys.dealer("Bích", create=True)
    key = keys.key_of(subject)
    assert key is not None
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    for secret in (NAME.encode(), "Bích".encode(), key, keys.vault.key):
        assert secret not in written
    assert all(p.stat().st_mode & 0o077 == 0 for p in tmp_path.rglob("*") if p.is_file())


def test_the_vault_key_is_locked_by_the_node_s_passphrase(tmp_path: Path) -> None:
    vault = Vault.open(tmp_path, PASSPHRASE, create=True)
    assert Vault.open(tmp_path, PASSPHRASE, create=False) == vault
    with pytest.raises(KeyStoreError, match="wrong passphrase"):
        Vault.open(tmp_path, b"wrong", create=False)
    with pytest.raises(KeyStoreError, match="a passphrase is needed"):
        Vault.open(tmp_path, None, create=False)
    with pytest.raises(KeyStoreError, match="no vault key"):
        Vault.open(tmp_path / "elsewhere", PASSPHRASE, create=False)


def test_a_subject_key_file_altered_is_refused(tmp_path: Path, keys: SubjectKeys) -> None:
    subject = account_subject(ACCOUNT)
    sealed = seal(keys, subject, "owner", NAME)
    path = tmp_path / "subjects" / f"{subject}.key"
    stored = bytearray(path.read_bytes())
    stored[-1] ^= 1
    path.write_bytes(bytes(stored))
    with pytest.raises(KeyStoreError, match="altered"):
        unseal(keys, "owner", sealed)


@pytest.mark.parametrize("given", ["bob", "account-../../keys", "dealer-", "account-XYZ" * 4])
def test_a_subject_id_not_the_ledger_s_is_refused(given: str) -> None:
    with pytest.raises(NotFoundError, match="not a data subject id"):
        check_subject(given)


def _seal_at_once(keys_dir: str, start: Any, answers: Any) -> None:
    from ledger.privacy.personal import PersonalData

    personal = PersonalData(Path(keys_dir), PASSPHRASE)
    start.wait()
    answers.put(personal.seal_dealer("Lan")["subject"])


def test_processes_sealing_their_first_values_at_once_share_one_vault_and_subject(
    tmp_path: Path,
) -> None:
    """`serve`'s workers each seal their first value with nobody's vault made yet,
    and name the same new dealer at once: one vault, one subject, no stray key."""
    from ledger.privacy.personal import PersonalData

    context = multiprocessing.get_context("fork")
    start, answers = context.Barrier(6), context.Queue()
    workers = [
        context.Process(target=_seal_at_once, args=(str(tmp_path), start, answers))
        for _ in range(6)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    subjects = {answers.get(timeout=5) for _ in workers}
    assert len(subjects) == 1
    (subject,) = subjects
    assert sorted(p.name for p in (tmp_path / "subjects").glob("*.key")) == [f"{subject}.key"]
    assert not [p for p in tmp_path.rglob("*.tmp")]
    assert PersonalData(tmp_path, PASSPHRASE).dealer_subject("Lan") == subject
