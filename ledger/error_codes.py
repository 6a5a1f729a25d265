"""The catalogue of error codes: what a program reads to tell one refusal from
another, instead of parsing the English `detail`.

Every error body of the HTTP API and every `--json` error of the CLI carries
one of these `code`s, and a `param` naming the field at fault when one is.
A code is stable: its meaning never changes and it is never reused; a new
kind of refusal gets a new code. docs/http.md's table and the OpenAPI
document's `ErrorBody` enum are this list (tests/http_api/test_error_codes.py).
"""

from __future__ import annotations

from dataclasses import dataclass

# The `param` column of a code whose field depends on the request.
ANY_FIELD = "the field at fault"


@dataclass(frozen=True)
class ErrorCode:
    code: str
    status: int  # the HTTP status it answers with
    meaning: str  # what it means for the caller, in one line
    # The field it names: a fixed field, ANY_FIELD, or None when no field is at fault.
    param: str | None = None


CATALOGUE: tuple[ErrorCode, ...] = (
    # A bet refused.
    ErrorCode("betting_closed", 400, "the round takes no bets now (betting closed or round over)"),
    ErrorCode("stake_below_minimum", 400, "the stake is under the table's minimum bet", "stake"),
    ErrorCode("stake_over_limit", 400, "the stake is over the table's maximum bet", "stake"),
    ErrorCode(
        "round_total_over_limit",
        400,
        "the stake would take the player's total in the round over the table's limit",
        "stake",
    ),
    ErrorCode("unknown_bet", 400, "the game offers no bet of that name", "bet"),
    ErrorCode(
        "invalid_bet", 400, "the game's rules refuse this bet (its shape or its place)", "bet"
    ),
    ErrorCode("no_such_bet", 400, "the round holds no bet of that id", "bet_id"),
    ErrorCode("bet_of_another_account", 400, "the bet is another account's", "account_id"),
    ErrorCode(
        "insufficient_funds", 400, "the account's balance is less than the amount", ANY_FIELD
    ),
    # Money and accounts.
    ErrorCode(
        "invalid_amount",
        400,
        "an amount that is not a positive whole number of minor units",
        ANY_FIELD,
    ),
    ErrorCode("invalid_currency", 400, "not an ISO 4217 currency code", "currency"),
    ErrorCode(
        "currency_mismatch",
        400,
        "the account holds another currency than the round or table",
        "account_id",
    ),
    ErrorCode("account_closed", 400, "the account is closed"),
    ErrorCode(
        "account_not_empty", 400, "the account still holds money: withdraw it before closing"
    ),
    ErrorCode("not_a_player_account", 400, "the account is not a player's wallet", "account_id"),
    # A round's play.
    ErrorCode(
        "move_not_offered",
        400,
        "the game does not offer this action now (the detail lists what it offers)",
        "action",
    ),
    ErrorCode(
        "unknown_action", 400, "the game has no action of that name for this actor", "action"
    ),
    ErrorCode("invalid_action_args", 400, "the game refuses the action's arguments", "args"),
    ErrorCode("invalid_draw", 400, "dice or cards that are not what the action draws", ANY_FIELD),
    ErrorCode("round_settled", 400, "the round is already settled"),
    ErrorCode("round_voided", 400, "the round is already voided"),
    ErrorCode("nothing_to_settle", 400, "the round has no outcome to settle on"),
    ErrorCode("void_refused", 400, "the round may not be voided now (the detail says why)"),
    ErrorCode(
        "correction_refused", 400, "the correction may not be made (the detail says why)", "step"
    ),
    ErrorCode(
        "reason_required", 400, "a void, correction, resume or revocation needs a reason", "reason"
    ),
    ErrorCode(
        "invalid_settlement", 400, "returns that do not settle the round's bets exactly once"
    ),
    ErrorCode(
        "needs_migration", 400, "the round was recorded by an older release: run ledger migrate"
    ),
    ErrorCode("cannot_migrate", 400, "ledger migrate cannot settle or void this round"),
    # Tables, seeds and sources of randomness.
    ErrorCode(
        "wrong_table_kind", 400, "the command is for the other kind of table (RNG or physical)"
    ),
    ErrorCode("seed_missing", 400, "no seed is in use at the table, or the RNG does not hold it"),
    ErrorCode(
        "seed_conflict", 400, "the seed clashes with one in use, committed, or still drawn from"
    ),
    ErrorCode(
        "device_report_refused",
        400,
        "a dealer device's report that is malformed or not signed right",
        "source",
    ),
    ErrorCode("game_not_installed", 400, "the round's game release is not installed here"),
    ErrorCode(
        "no_paytable", 400, "the game has no exact paytable: estimate its return by simulation"
    ),
    # Keys and signatures.
    ErrorCode(
        "key_refused", 400, "the key may not sign this: wrong role, unknown, revoked or in use"
    ),
    ErrorCode("signature_invalid", 400, "a signature that is malformed or does not verify"),
    ErrorCode("already_erased", 400, "the data subject is already erased"),
    # Requests.
    ErrorCode(
        "invalid_value", 400, "a value the ledger refuses (the detail says which rule)", ANY_FIELD
    ),
    ErrorCode("invalid_command", 400, "a command refused for a reason no other code names"),
    ErrorCode(
        "invalid_cursor", 400, "a page cursor this list did not give with these filters", "cursor"
    ),
    ErrorCode(
        "invalid_request", 422, "a body or parameter of the wrong type, shape or size", ANY_FIELD
    ),
    ErrorCode(
        "request_id_reused",
        409,
        "the Idempotency-Key was used for another command or other arguments",
    ),
    ErrorCode(
        "not_found", 404, "an id that names nothing (account, round, table, game, token, route)"
    ),
    ErrorCode("not_checkpointed", 404, "the account is not under a checkpoint yet"),
    ErrorCode("method_not_allowed", 405, "the route does not take this HTTP method"),
    ErrorCode("body_too_large", 413, "the body is over the size limit"),
    ErrorCode(
        "unsupported_media_type",
        415,
        "the body is not declared as JSON (Content-Type: application/json)",
    ),
    # Who asks.
    ErrorCode("unauthorized", 401, "no bearer token, or one that is unknown, revoked or expired"),
    ErrorCode("forbidden_role", 403, "the token's role may not do this"),
    ErrorCode("another_table", 403, "the table device's token is for another table"),
    # The node.
    ErrorCode(
        "store_unavailable",
        503,
        "the store could not be reached: retry with the same Idempotency-Key",
    ),
    ErrorCode(
        "conflict", 503, "concurrent writers kept conflicting: retry with the same Idempotency-Key"
    ),
    ErrorCode("plugin_failed", 500, "an installed game raised or returned something invalid"),
    ErrorCode("token_store_unreadable", 500, "the server cannot read its token file"),
    ErrorCode("server_error", 500, "a bug of the server: its log has the details"),
    # Verification and setup (the CLI's, mostly).
    ErrorCode(
        "verification_failed",
        422,
        "a check failed: a signature, a chain link, a Merkle root or proof",
    ),
    ErrorCode("cannot_check", 422, "a check that could not be made: no verdict is given"),
    ErrorCode("cannot_rederive", 422, "no installed game can re-derive the round"),
    ErrorCode("config_error", 400, "a setting is missing or malformed"),
    ErrorCode(
        "state_outdated", 400, "the saved verify state is behind the store: verify in full once"
    ),
    ErrorCode(
        "key_store_error", 400, "a key file is missing or malformed, or its passphrase is wrong"
    ),
    ErrorCode(
        "projections_stale",
        400,
        "the projections are missing or out of step with the log: rebuild them",
    ),
)

CODES: dict[str, ErrorCode] = {entry.code: entry for entry in CATALOGUE}


def describe(entry: ErrorCode) -> str:
    """A code's one-line description: its status, meaning and field."""
    field = "" if entry.param is None else f" (param: {entry.param})"
    return f"{entry.status}: {entry.meaning}{field}"
