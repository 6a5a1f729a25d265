"""The ASGI application: the routes (one router per resource, each making one
call to the Python API), the layers in front of them, and the OpenAPI
document, whose description is `ledger.http.description.DESCRIPTION`."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from fastapi import APIRouter, FastAPI
from fastapi_offline import FastAPIOffline

from ledger.audit.self_status import SelfStatus
from ledger.http.bet_fast_path import BetFastPath
from ledger.http.description import DESCRIPTION
from ledger.http.errors import install_error_handlers
from ledger.http.middleware import DOCS_ASSETS, Authenticate, BodyLimit, JsonBodies
from ledger.http.models import ErrorBody
from ledger.http.routes import ROUTERS
from ledger.http.routing import body_routes
from ledger.http.service import Service
from ledger.http.tlog import TlogFiles
from ledger.http.tokens import TokenStore
from ledger.rng.server import RngServer
from ledger.store.application import LedgerApplication

if TYPE_CHECKING:
    from starlette.routing import BaseRoute

__all__ = ["Service", "create_app", "openapi_document"]

MAX_BODY = 64 * 1024  # bytes: a bet or a signed report is well under 2 KiB
# A batch of up to 1,000 bets: about 150 bytes a bet, room for larger bet bodies.
MAX_BATCH_BODY = 1024 * 1024
BET_BATCH_PATH = re.compile(r"/v1/rounds/[^/]{1,64}/bets/batch")
TITLE = "casino-ledger"
API_VERSION = "1"


def create_app(
    service: Service,
    *,
    max_body: int = MAX_BODY,
    fast_bets: bool = True,
    tiles: Path | None = None,
    self_status: SelfStatus | None = None,
) -> FastAPI:
    """The ASGI application over `service` (see `ledger serve`); `fast_bets` serves
    operators' bets through `ledger.http.bet_fast_path` (tests turn it off to
    compare it with the route); `tiles`, a tiles directory served at /tlog/
    (`ledger.http.tlog`), to anyone; `self_status`, what the node's scheduled
    self-verification last found, for `GET /v1/health`."""
    # /docs with Swagger UI's files from the fastapi-offline package: no CDN.
    api = FastAPIOffline(
        title=TITLE,
        version=API_VERSION,
        description=DESCRIPTION,
        docs_url="/docs",
        redoc_url=None,
        static_url=DOCS_ASSETS,
    )
    api.state.service = service  # what the routes' dependencies hand them
    api.state.self_status = self_status
    install_error_handlers(api)
    declare_error_body(api)
    api.router.routes.extend(v1_routes())
    if fast_bets:  # inside: after the token, the media type and the size
        api.add_middleware(BetFastPath, casino=service.casino)
    api.add_middleware(
        BodyLimit, limit=max_body, wider=[(BET_BATCH_PATH, max(max_body, MAX_BATCH_BODY))]
    )
    api.add_middleware(JsonBodies, routes=body_routes(ROUTERS, "/v1"))
    api.add_middleware(Authenticate, tokens=service.tokens)
    if tiles is not None:  # outside the token check: monitors read it with no token
        api.add_middleware(TlogFiles, directory=tiles)
    return api


@cache
def v1_routes() -> tuple[BaseRoute, ...]:
    """The routes under /v1, made once a process. FastAPI reads each endpoint's
    signature and builds its models as a route is made (about 40 ms for all of
    them, every app again), and a route holds nothing of an app: each endpoint
    takes the service from the app it is called in (`request.app.state`).
    No dependency overrides are used (they would be the app's, not these)."""
    routes = APIRouter()
    for router in ROUTERS:
        routes.include_router(router, prefix="/v1")
    return tuple(routes.routes)


def declare_error_body(api: FastAPI) -> None:
    """Put `ErrorBody`'s schema in the document's components, where every route's
    error responses refer to it (`ledger.http.routing.error_responses`)."""
    document_of_the_routes = api.openapi

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is not None:  # built once, as FastAPI's own is
            return api.openapi_schema
        document = document_of_the_routes()
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        schemas[ErrorBody.__name__] = ErrorBody.model_json_schema(
            ref_template="#/components/schemas/{model}", mode="serialization"
        )
        document["components"]["schemas"] = dict(sorted(schemas.items()))
        return document

    api.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented hook


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document, which depends on the routes only (no store is opened)."""
    idle = Service(cast(LedgerApplication, None), {}, RngServer(), TokenStore(Path(".")))
    document: dict[str, Any] = create_app(idle).openapi()
    return document
