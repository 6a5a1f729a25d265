"""The ledger's error tree: every error a user can cause is a `LedgerError`.

The CLI maps each to a one-line message and an exit code; anything else is a
bug and keeps its traceback.
"""

from __future__ import annotations

from enum import StrEnum

# Words that begin with a vowel letter but sound like "you" ("a unique key").
_YOU_SOUND = ("uni", "use", "usu", "uti", "ure", "eu")


def with_article(word: str) -> str:
    """`word` after "a" or "an" as it is said: "an auditor", "a cashier", "an
    8-byte", "a 32-byte" (messages name roles, kinds and types from variables,
    so the article must be chosen, not written)."""
    lower = word.lower()
    leading_digits = len(lower) - len(lower.lstrip("0123456789"))
    if leading_digits:
        vowel = lower.startswith("8") or (leading_digits in (2, 5) and lower[:2] in ("11", "18"))
    else:
        vowel = lower[:1] in ("a", "e", "i", "o", "u") and not lower.startswith(_YOU_SOUND)
    return f"{'an' if vowel else 'a'} {word}"


class FindingKind(StrEnum):
    """What a verification finding is (`ledger verify --findings`)."""

    ALTERED = "altered"  # altered or forged data: bytes, chains, roots, signatures
    RULE_BROKEN = "rule-broken"  # genuine, signed data that breaks a rule
    OLDER_RELEASE = "older-release"  # allowed by the release that recorded it, refused today
    NOT_CHECKED = "not-checked"  # could not be checked here (e.g. the game is not installed)


class LedgerError(Exception):
    """Base of every error the ledger raises on purpose.

    `code` says what went wrong to a program (a stable name from the catalogue,
    `ledger.error_codes`); `param` names the field at fault, when one is. Each
    class has a default code; a raise may give a more exact one.
    """

    exit_code = 2
    code: str = "invalid_command"
    param: str | None = None

    def __init__(
        self, message: str = "", *, code: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        if param is not None:
            self.param = param


class ConfigError(LedgerError):
    """A setting is missing or malformed (store URL, keys directory, level)."""

    code = "config_error"


class StateOutdatedError(ConfigError):
    """A saved verify state the store has moved on from (events it covers left
    for an archive since): verify in full once, and save a new state."""

    code = "state_outdated"


class KeyStoreError(LedgerError):
    """A key file is missing, malformed, or its passphrase is wrong."""

    code = "key_store_error"


class StoreUnavailableError(LedgerError):
    """The event store cannot be reached or opened."""

    code = "store_unavailable"


class VerificationError(LedgerError):
    """A check failed: a signature, a chain link, a Merkle root or proof.

    `where` names what failed (stream and version, a log position, or a
    checkpoint) so an auditor can go straight to it.
    """

    exit_code = 1
    code = "verification_failed"

    def __init__(
        self,
        message: str,
        *,
        where: str | None = None,
        kind: FindingKind | None = None,
        position: int | None = None,
    ) -> None:
        self.where = where
        self.reason = message
        self.position = position  # the log position at fault, when one is
        # What the finding is, when the raiser knows better than the step that
        # caught it (`ledger.audit.findings.Kind`): e.g. a forged actor signature.
        self.kind = kind
        super().__init__(f"{where}: {message}" if where else message)


class CannotCheckError(LedgerError):
    """A check that could not be made, so no verdict is given (exit 2, never
    an OK): e.g. `verify --projections` on a store whose projections were never
    built. A round no installed game can re-derive is the subclass below."""

    code = "cannot_check"

    def __init__(self, message: str) -> None:
        super().__init__(f"could not check: {message}")


class CannotReDeriveError(CannotCheckError):
    """No installed game can re-derive a round (exit 3, never an OK, never
    tampering): none declares the game id, rules hash and settlement API the
    round pinned, because its plugin is not installed, is another release, or
    is blocked by LEDGER_PLUGINS_BLOCK. The message names the plugin, version
    and rules hash (and the blocked plugins)."""

    exit_code = 3
    code = "cannot_rederive"


class InvalidCommandError(LedgerError):
    """A command that cannot be carried out: bad amount, wrong state, unknown id.

    Nothing is recorded when it is raised. Its default code, `invalid_command`,
    names no reason: the ledger's own raises each give the exact one (and
    `param`, the field at fault), e.g. `code="stake_over_limit", param="stake"`.
    """


class NotFoundError(InvalidCommandError):
    """An account, round or table that does not exist."""

    code = "not_found"


class RequestIdReusedError(InvalidCommandError):
    """A request id already used for another command or other arguments (the
    HTTP API answers 409); nothing is recorded."""

    code = "request_id_reused"


class ConflictError(LedgerError):
    """Concurrent writers kept conflicting; the command was not carried out."""

    code = "conflict"


class PluginError(LedgerError):
    """A game plugin raised or returned something invalid; nothing was recorded."""

    code = "plugin_failed"

    def __init__(self, plugin: str, version: str, message: str) -> None:
        self.plugin = plugin
        self.version = version
        super().__init__(f"plugin {plugin} {version}: {message}")
