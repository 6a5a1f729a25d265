"""The ledger's errors as HTTP statuses: one JSON `detail` line, never a traceback,
never a header or a token."""

from __future__ import annotations

from typing import Any

from eventsourcing.persistence import InterfaceError, OperationalError
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from ledger.errors import (
    CannotCheckError,
    ConfigError,
    ConflictError,
    LedgerError,
    NotFoundError,
    PluginError,
    RequestIdReusedError,
    VerificationError,
)

# Most specific first.
STATUSES: list[tuple[type[LedgerError], int]] = [
    (RequestIdReusedError, 409),  # an Idempotency-Key already used for other arguments
    (NotFoundError, 404),
    (ConflictError, 503),  # concurrent writers kept winning: retry with the same key
    (PluginError, 500),  # an installed game misbehaved: ours to fix, not the caller's
    (VerificationError, 422),
    (CannotCheckError, 422),
    (ConfigError, 400),
]


def status_of(exc: LedgerError) -> int:
    for cls, status in STATUSES:
        if isinstance(exc, cls):
            return status
    return 400  # InvalidCommandError and the rest: the command was refused


def _location(loc: Any) -> str:
    return ".".join(str(part) for part in loc if part != "body") or "body"


def ledger_error_response(exc: LedgerError) -> JSONResponse:
    """A ledger error as every route answers it."""
    return JSONResponse(
        {"detail": str(exc), "error": type(exc).__name__}, status_code=status_of(exc)
    )


def store_unavailable_response() -> JSONResponse:
    """A store that could not be reached, as every route answers it (retryable)."""
    return JSONResponse(
        {"detail": "store unavailable, retry with the same Idempotency-Key"},
        status_code=503,
        headers={"retry-after": "1"},
    )


def install_error_handlers(app: FastAPI) -> None:
    async def ledger_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, LedgerError)
        return ledger_error_response(exc)

    async def store_unavailable(request: Request, exc: Exception) -> JSONResponse:
        return store_unavailable_response()

    async def invalid_request(request: Request, exc: Exception) -> JSONResponse:
        """Each problem as `where: what`, without echoing the input back."""
        assert isinstance(exc, RequestValidationError)
        problems = [f"{_location(e['loc'])}: {e['msg']}" for e in exc.errors()]
        return JSONResponse(
            {"detail": "; ".join(problems), "error": "InvalidRequest"}, status_code=422
        )

    app.add_exception_handler(LedgerError, ledger_error)
    app.add_exception_handler(OperationalError, store_unavailable)
    app.add_exception_handler(InterfaceError, store_unavailable)
    app.add_exception_handler(RequestValidationError, invalid_request)
