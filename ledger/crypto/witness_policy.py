"""A witness policy: which witnesses an auditor trusts and how many of them
must have cosigned a checkpoint before it is believed (k of n).

The file is text, one statement a line (`#` starts a comment):

    log <log verifier key>        optional: the only key the log may sign with
    witness <witness verifier key> one line per witness (type 0x04, tlog-cosignature)
    quorum <k>                    how many distinct witnesses must cosign (1..n)
    max-age <seconds>             optional: a cosignature older than this does not count

A witness's key must be its own: a policy naming one key twice, or naming a
key the keyring holds for another role (the log's checkpoint key, an
operator's), is refused, since that "witness" is the house itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.cosignature import BLOB_SIZE, Cosigner, is_line_of, verify_cosignature
from ledger.crypto.keys import Keyring, Role
from ledger.crypto.note import NoteError, key_hash, parse_verifier_key, split_note
from ledger.crypto.signing import verify_signature
from ledger.errors import ConfigError, VerificationError

_DECIMAL = re.compile(r"[1-9][0-9]{0,5}")
_SECONDS = re.compile(r"[1-9][0-9]{0,10}")
# Clocks differ: a cosignature up to this far from the checkpoint's time is fine.
CLOCK_SKEW_SECONDS = 300


@dataclass(frozen=True)
class WitnessPolicy:
    witnesses: tuple[Cosigner, ...]
    quorum: int
    log_key: tuple[str, bytes] | None = None  # (name, public key)
    max_age: int | None = None  # seconds; None: any age

    @classmethod
    def parse(cls, text: str, where: str = "the witness policy") -> WitnessPolicy:
        witnesses: list[Cosigner] = []
        quorum: int | None = None
        log_key: tuple[str, bytes] | None = None
        max_age: int | None = None
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            word, _, value = line.partition(" ")
            value = value.strip()
            label = f"{where} line {number}"
            try:
                if word == "witness":
                    witnesses.append(Cosigner.parse(value))
                elif word == "log" and log_key is None:
                    log_key = parse_verifier_key(value)
                elif word == "quorum" and quorum is None:
                    if not _DECIMAL.fullmatch(value):
                        raise NoteError(f"quorum {value!r} is not a whole number from 1")
                    quorum = int(value)
                elif word == "max-age" and max_age is None:
                    if not _SECONDS.fullmatch(value):
                        raise NoteError(f"max-age {value!r} is not a number of seconds from 1")
                    max_age = int(value)
                else:
                    raise NoteError(
                        f"{word!r} is not 'log', 'witness', 'quorum' or 'max-age' "
                        "(all but 'witness' once)"
                    )
            except NoteError as exc:
                raise ConfigError(f"{label}: {exc}") from None
        if not witnesses:
            raise ConfigError(f"{where} names no witness ('witness <verifier key>' lines)")
        if quorum is None:
            raise ConfigError(f"{where} has no 'quorum <k>' line")
        if quorum > len(witnesses):
            raise ConfigError(f"{where}: quorum {quorum} but only {len(witnesses)} witnesses")
        keys = [w.public_key for w in witnesses]
        if len(set(keys)) != len(keys) or len({w.name for w in witnesses}) != len(witnesses):
            raise ConfigError(f"{where} names one witness key or name twice")
        if log_key is not None and log_key[1] in keys:
            raise ConfigError(f"{where}: the log's own key is listed as a witness")
        return cls(tuple(witnesses), quorum, log_key, max_age)

    @classmethod
    def load(cls, path: Path) -> WitnessPolicy:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read witness policy {path}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"witness policy {path} is not UTF-8 text") from None
        return cls.parse(text, f"witness policy {path}")

    def check_keyring(self, keyring: Keyring) -> None:
        """Refuse a witness whose key the keyring holds for another role."""
        for witness in self.witnesses:
            for record in keyring:
                if record.public_key == witness.public_key and record.role is not Role.WITNESS:
                    raise ConfigError(
                        f"witness {witness.label} has the key of the keyring's "
                        f"{record.role.value} key {record.name!r}: a witness must be independent "
                        "of the log"
                    )

    def check(
        self, checkpoint: Checkpoint, *, now: datetime | None = None, what: str | None = None
    ) -> CosignatureReport:
        """Which witnesses validly cosigned `checkpoint`; raise below the quorum."""
        label = what or f"checkpoint of size {checkpoint.size}"
        self._check_log_key(checkpoint, label)
        report = CosignatureReport(self.quorum, len(self.witnesses))
        now = now or datetime.now(UTC)
        issued = checkpoint.issued_at.timestamp()
        text = checkpoint.text
        for witness in self.witnesses:
            lines = [line for line in checkpoint.others if is_line_of(line, witness)]
            if not lines:
                report.missing.append(witness.label)
                continue
            problems = []
            for line in lines:
                try:
                    stamp = verify_cosignature(line, text, witness)
                except VerificationError as exc:
                    problems.append(str(exc))
                    continue
                if stamp > now.timestamp() + CLOCK_SKEW_SECONDS:
                    problems.append(f"cosignature of {witness.label} is dated in the future")
                elif self.max_age is not None and stamp < now.timestamp() - self.max_age:
                    problems.append(
                        f"cosignature of {witness.label} is older than the policy's max-age "
                        f"({self.max_age} s): an old checkpoint replayed as current?"
                    )
                elif stamp < issued - CLOCK_SKEW_SECONDS:
                    problems.append(
                        f"cosignature of {witness.label} is dated before the checkpoint was signed"
                    )
                else:
                    report.valid.append(witness.label)
                    break
            else:
                report.invalid.append(problems[0])
        if len(report.valid) < self.quorum:
            raise VerificationError(
                f"{len(report.valid)} valid cosignatures, the policy needs {self.quorum} of "
                f"{len(self.witnesses)}: {report.details()}",
                where=label,
            )
        return report

    def _check_log_key(self, checkpoint: Checkpoint, label: str) -> None:
        if self.log_key is None:
            return
        name, public_key = self.log_key
        if (
            checkpoint.key_hash is None
            or checkpoint.key_name != name
            or checkpoint.key_hash != key_hash(name, public_key)
            or not verify_signature(public_key, checkpoint.signed_message, checkpoint.signature)
        ):
            raise VerificationError(
                f"not signed by the policy's log key {name}+{key_hash(name, public_key).hex()}",
                where=label,
            )


@dataclass
class CosignatureReport:
    quorum: int
    witnesses: int
    valid: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    invalid: list[str] = field(default_factory=list)

    def details(self) -> str:
        parts = [f"valid: {', '.join(self.valid) or 'none'}"]
        if self.missing:
            parts.append(f"missing: {', '.join(self.missing)}")
        if self.invalid:
            parts.append(f"invalid: {'; '.join(self.invalid)}")
        return "; ".join(parts)

    def summary(self) -> str:
        return (
            f"{len(self.valid)} of {self.witnesses} witnesses cosigned it (quorum {self.quorum}): "
            + self.details()
        )


def with_cosignatures(checkpoint: Checkpoint, notes: list[object]) -> Checkpoint:
    """`checkpoint` with the cosignature lines of `notes` made over its exact text
    added: lines of cosignature/v1's size under another name than the log key's
    (a note of another text, or not well formed, adds nothing; nothing is
    verified here: a reader's witness policy does that). Other lines are left
    out, so a stored row cannot make the log's own checkpoint fail to verify."""
    lines = list(checkpoint.others)
    for note in notes:
        if not isinstance(note, str):
            continue
        try:
            text, found = split_note(note)
        except NoteError:
            continue
        if text != checkpoint.text:
            continue
        for line in found:
            if (
                len(line.blob) == BLOB_SIZE
                and line.name != checkpoint.key_name
                and line not in lines
            ):
                lines.append(line)
    return replace(checkpoint, others=tuple(lines))
