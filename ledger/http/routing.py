"""`Router`: FastAPI's `APIRouter` whose every route is open to named roles,
declares its error statuses with the one error body, and is summed up by its
handler's docstring, so each resource's module only states what is its own."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from fastapi import APIRouter, Depends, Security
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from pydantic import BaseModel

from ledger.http.dependencies import Allow
from ledger.http.errors import BODY_STATUSES, ERROR_STATUSES, WRITE_STATUSES
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


def error_responses(method: str, *, body: bool = False) -> dict[int | str, dict[str, Any]]:
    """The error statuses a route may answer (`body`: one that takes a body),
    each with the one error body."""
    statuses = {
        **ERROR_STATUSES,
        **(WRITE_STATUSES if method != "GET" else {}),
        **(BODY_STATUSES if body else {}),
    }
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
            route = self.routes[-1]
            if isinstance(route, APIRoute) and takes_body(route):
                declared = {**route.responses, **error_responses(method, body=True)}
                route.responses = dict(sorted(declared.items(), key=lambda item: str(item[0])))
            return handler

        return add


def takes_body(route: APIRoute) -> bool:
    """FastAPI's own reading of the handler: it has a body parameter."""
    return route.body_field is not None


def body_routes(routers: Sequence[APIRouter], prefix: str) -> list[tuple[str, re.Pattern[str]]]:
    """(method, path pattern) of every route of `routers` that takes a body,
    as the app serves them under `prefix`."""
    return [
        (method, re.compile("^" + re.escape(prefix) + route.path_regex.pattern.removeprefix("^")))
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute) and takes_body(route)
        for method in route.methods or ()
    ]
