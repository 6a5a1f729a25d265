"""`Router`: FastAPI's `APIRouter` whose every route is open to named roles,
declares its error statuses with the one error body, and is summed up by its
handler's docstring, so each resource's module only states what is its own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, Security
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPBearer
from pydantic import BaseModel

from ledger.http.dependencies import Allow
from ledger.http.errors import ERROR_STATUSES, WRITE_STATUSES
from ledger.http.models import ErrorBody
from ledger.http.tokens import ApiRole

Handler = TypeVar("Handler", bound=Callable[..., Any])

bearer = HTTPBearer(auto_error=False)  # documents the scheme; Authenticate enforces it


# The one error body, by reference: `ledger.http.app` puts its schema in the
# document's components. (A `"model"` here would have FastAPI build a pydantic
# field for every status of every route of every app, some 300 per app, used
# for nothing but this same reference.)
ERROR_CONTENT = {
    "application/json": {"schema": {"$ref": f"#/components/schemas/{ErrorBody.__name__}"}}
}


def error_responses(method: str) -> dict[int | str, dict[str, Any]]:
    """The error statuses a route may answer, each with the one error body."""
    statuses = {**ERROR_STATUSES, **(WRITE_STATUSES if method != "GET" else {})}
    return {
        status: {"content": ERROR_CONTENT, "description": text}
        for status, text in sorted(statuses.items())
    }


class Router(APIRouter):
    def endpoint(
        self,
        method: str,
        path: str,
        roles: tuple[ApiRole, ...],
        response_model: type[BaseModel] | None = None,
        *,
        status: int = 200,
        success: dict[int | str, dict[str, Any]] | None = None,
        response_class: type[Response] = JSONResponse,
        deprecated: bool = False,
    ) -> Callable[[Handler], Handler]:
        """A route open to `roles`, its roles in the OpenAPI document (x-roles).

        `response_model` is its success body (`ledger.http.responses`), checked on
        every answer; naming `response_class` keeps FastAPI rendering that body
        with `JSONResponse` (json.dumps), byte for byte what the route always sent,
        not with pydantic's own JSON encoder. A `deprecated` route is an alias kept
        for integrators (the document marks it; its docstring names what replaces it)."""

        def add(handler: Handler) -> Handler:
            self.add_api_route(
                path,
                handler,
                methods=[method],
                status_code=status,
                dependencies=[Security(bearer), Depends(Allow(roles))],
                openapi_extra={"x-roles": [r.value for r in roles]},
                summary=(handler.__doc__ or "").strip().splitlines()[0] or None,
                responses={**(success or {}), **error_responses(method)},
                response_model=response_model,
                response_class=response_class,
                deprecated=deprecated,
            )
            return handler

        return add
