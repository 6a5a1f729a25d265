"""`GET /v1/health`: the node's own state for its operators' monitoring, with no
token: ok, or degraded once its scheduled self-verification found something
(`ledger.audit.self_verification`). Degraded says so and stops nothing: the
node goes on taking bets, as the finding is in data every node of the store
shares and a restart would not mend."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse

from ledger.audit.self_status import SelfStatus
from ledger.http import responses
from ledger.http.routing import ERROR_CONTENT, Router

router = Router()

_HEALTH = {"application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}


def health(request: Request) -> JSONResponse:
    """The node's health: ok (200), or degraded (503) while its last self-verification failed."""
    status: SelfStatus | None = request.app.state.self_status
    last = (
        status.read()
        if status is not None
        else {
            "every_seconds": None,
            "last_run_at": None,
            "result": None,
            "tree_size": None,
            "finding": None,
        }
    )
    degraded = last["result"] == "failed"
    answer = responses.Health(
        status="degraded" if degraded else "ok",
        self_verification=responses.SelfVerification(**last),
    )
    return JSONResponse(answer.model_dump(), status_code=503 if degraded else 200)


router.add_api_route(
    "/health",
    health,
    methods=["GET"],
    summary=(health.__doc__ or "").strip().splitlines()[0],
    response_model=responses.Health,
    response_class=JSONResponse,
    responses={
        500: {"description": "a bug of ours", "content": ERROR_CONTENT},
        503: {"description": "degraded: the last self-verification failed", "content": _HEALTH},
    },
    openapi_extra={"x-roles": []},
)
