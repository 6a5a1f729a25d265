"""The ledger's errors as HTTP statuses: one JSON `detail` line, never a traceback,
never a header or a token."""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import InterfaceError, OperationalError
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ledger.errors import (
    CannotCheckError,
    ConfigError,
    ConflictError,
    LedgerError,
    NotFoundError,
    PluginError,
    RequestIdReusedError,
    StoreUnavailableError,
    VerificationError,
)
from ledger.store.outage import disk_full

# Most specific first.
STATUSES: list[tuple[type[LedgerError], int]] = [
    (RequestIdReusedError, 409),  # an Idempotency-Key already used for other arguments
    (NotFoundError, 404),
    (ConflictError, 503),  # concurrent writers kept winning: retry with the same key
    (StoreUnavailableError, 503),
    (PluginError, 500),  # an installed game misbehaved: ours to fix, not the caller's
    (VerificationError, 422),
    (CannotCheckError, 422),
    (ConfigError, 400),
]


# The `error` of a status no ledger error names (FastAPI's own, and the layers').
STATUS_ERRORS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    413: "BodyTooLarge",
    415: "UnsupportedMediaType",
    500: "ServerError",
    503: "StoreUnavailable",
}

# The `code` of a status no ledger error names (each in `ledger.error_codes`).
STATUS_CODES: dict[int, str] = {
    401: "unauthorized",
    403: "forbidden_role",
    404: "not_found",
    405: "method_not_allowed",
    413: "body_too_large",
    415: "unsupported_media_type",
    500: "server_error",
    503: "store_unavailable",
}


class CodedHTTPException(HTTPException):
    """A route's own refusal (a status, not a ledger error) with its exact code."""

    def __init__(self, status: int, detail: str, code: str) -> None:
        super().__init__(status, detail)
        self.code = code


# What each route may answer besides its success, all as `ErrorBody`
# (declared in the OpenAPI document by `ledger.http.app`).
ERROR_STATUSES: dict[int, str] = {
    400: "the command was refused (a rule of the ledger or its game)",
    401: "no usable bearer token",
    403: "the token's role may not do this, or a table device's token is for another table",
    404: "an id that names nothing",
    422: "a body or parameter the API refuses (types, fields, sizes)",
    500: "an installed game misbehaved, or the token file is unreadable",
    503: "the store is unavailable or writers kept conflicting: retry with the same key",
}
WRITE_STATUSES: dict[int, str] = {
    409: "this Idempotency-Key was used for other arguments",
    413: "the body is over the limit (64 KiB)",
}
# What a route that takes a body may answer besides (`ledger.http.middleware.JsonBodies`).
BODY_STATUSES: dict[int, str] = {
    415: "the body is not declared as JSON: its Content-Type is missing or not application/json",
}


def error_body(
    status: int,
    detail: str,
    error: str | None = None,
    code: str | None = None,
    param: str | None = None,
) -> dict[str, str]:
    """The one error body: `detail` for a person, `error` the kind of error,
    `code` for a program (`ledger.error_codes`), `param` only when a field is at fault."""
    body = {
        "detail": detail,
        "error": error or STATUS_ERRORS.get(status, "Error"),
        "code": code or status_code_name(status),
    }
    if param is not None:
        body["param"] = param
    return body


def status_code_name(status: int) -> str:
    """The code of a status no ledger error names (a status FastAPI or Starlette
    answers that the table does not list is still a request or a server fault)."""
    return STATUS_CODES.get(status) or ("invalid_request" if status < 500 else "server_error")


def status_of(exc: LedgerError) -> int:
    return status_of_kind(type(exc))


def status_of_kind(kind: type[LedgerError]) -> int:
    for cls, status in STATUSES:
        if issubclass(kind, cls):
            return status
    return 400  # InvalidCommandError and the rest: the command was refused


def _location(loc: Any) -> str:
    return ".".join(str(part) for part in loc if part != "body") or "body"


# Where a parameter comes from, as FastAPI's locations begin.
_SOURCES = frozenset({"body", "query", "path", "header", "cookie"})


def field_at_fault(loc: Any) -> str | None:
    """A validation problem's field, as the body or the parameter names it
    (`stake`, `bets.0.stake`, `limit`, `idempotency-key`); None for the whole body."""
    parts = [str(part) for part in loc]
    if parts and parts[0] in _SOURCES:
        parts = parts[1:]
    return ".".join(parts) or None


def ledger_error_response(exc: LedgerError) -> JSONResponse:
    """A ledger error as every route answers it."""
    status = status_of(exc)
    return JSONResponse(
        error_body(status, str(exc), type(exc).__name__, exc.code, exc.param), status_code=status
    )


def store_unavailable_response(exc: BaseException | None = None) -> JSONResponse:
    """A store that could not be reached, as every route answers it (retryable).
    A full disk is named (what the operator must fix); other causes are not
    (they would tell a client the store's hosts)."""
    cause = " (its disk is full)" if exc is not None and disk_full(exc) else ""
    return JSONResponse(
        error_body(503, f"store unavailable{cause}, retry with the same Idempotency-Key"),
        status_code=503,
        headers={"retry-after": "1"},
    )


def install_error_handlers(app: FastAPI) -> None:
    async def ledger_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, LedgerError)
        return ledger_error_response(exc)

    async def store_unavailable(request: Request, exc: Exception) -> JSONResponse:
        return store_unavailable_response(exc)

    async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
        """Each problem as `where: what`, without echoing the input back."""
        assert isinstance(exc, RequestValidationError)
        found = exc.errors()
        problems = [f"{_location(e['loc'])}: {e['msg']}" for e in found]
        # A body that is not JSON at all names a position, not a field.
        faulty = found[0] if found and found[0].get("type") != "json_invalid" else None
        param = None if faulty is None else field_at_fault(faulty["loc"])
        return JSONResponse(
            error_body(422, "; ".join(problems), "InvalidRequest", "invalid_request", param),
            status_code=422,
        )

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        """FastAPI's and the routes' own statuses (403, 404, 405) in the one shape."""
        assert isinstance(exc, StarletteHTTPException)
        return JSONResponse(
            error_body(exc.status_code, str(exc.detail), code=getattr(exc, "code", None)),
            status_code=exc.status_code,
            headers=dict(exc.headers or {}),
        )

    async def server_error(request: Request, exc: Exception) -> JSONResponse:
        """A bug of ours (an answer its model refuses among them): the one shape,
        nothing of the exception in it; Starlette still logs the traceback."""
        return JSONResponse(
            error_body(500, "internal server error: the server's log has the details"),
            status_code=500,
        )

    app.add_exception_handler(Exception, server_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(LedgerError, ledger_error)
    app.add_exception_handler(OperationalError, store_unavailable)
    app.add_exception_handler(InterfaceError, store_unavailable)
    app.add_exception_handler(RequestValidationError, invalid_request)
