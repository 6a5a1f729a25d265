"""What an auditor checks over HTTP: a round's recall from its signed events,
the newest checkpoint, and proofs under it (an event's inclusion, the log's
consistency with a checkpoint kept from earlier)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from ledger.audit.proofs import (
    checkpoints_after,
    consistency_from,
    inclusion_of,
    newest_checkpoint,
)
from ledger.audit.recall import recall_round
from ledger.crypto.checkpoint import Checkpoint
from ledger.errors import NotFoundError
from ledger.http import models, responses, views
from ledger.http.dependencies import READERS, RoundId, ServiceDep
from ledger.http.routing import Router

router = Router()


@router.endpoint("GET", "/rounds/{round_id}/recall", READERS, responses.Recall)
def recall(round_id: RoundId, service: ServiceDep) -> responses.Recall:
    """Game recall: the round replayed step by step from its signed events, each
    event's envelope, signature and chain checked as it is read (`ledger recall`);
    `verified` is false, with the problems named, when a check failed."""
    return views.recall(
        recall_round(service.app, service.app.current_keyring(), service.games, round_id)
    )


@router.endpoint("GET", "/checkpoints/newest", READERS, responses.NewestCheckpoint)
def newest(service: ServiceDep) -> responses.NewestCheckpoint:
    """The newest stored checkpoint whose signature verifies."""
    found = newest_checkpoint(service.app, service.app.current_keyring())
    if found is None:
        raise NotFoundError("no checkpoint yet")
    return views.newest_checkpoint(found)


CHECKPOINTS_PAGE = 1000


@router.endpoint("GET", "/checkpoints", READERS, responses.Checkpoints)
def checkpoints(
    service: ServiceDep,
    after: Annotated[int, Query(ge=0, le=2**62)] = 0,
    limit: Annotated[int, Query(ge=1, le=CHECKPOINTS_PAGE)] = CHECKPOINTS_PAGE,
) -> responses.Checkpoints:
    """The stored checkpoints whose signature verifies, of sizes above `after`, by
    size: what covers each event of the feed (a mirror copies the log under them;
    an event signed by a key revoked since is valid only under a checkpoint issued
    before the revocation)."""
    app = service.app
    return views.checkpoints(checkpoints_after(app, app.current_keyring(), after, limit))


@router.endpoint("GET", "/proofs/inclusion", READERS, responses.InclusionProof)
def inclusion(
    stream: Annotated[str, Query(min_length=1, max_length=64)],
    version: Annotated[int, Query(ge=1, le=2**63 - 1)],
    service: ServiceDep,
) -> responses.InclusionProof:
    """An event's inclusion proof under the newest checkpoint (checkable offline)."""
    return views.inclusion_proof(
        inclusion_of(service.app, stream, version, service.app.current_keyring())
    )


@router.endpoint("POST", "/proofs/consistency", READERS, responses.ConsistencyProof)
def consistency(body: models.TrustedCheckpoint, service: ServiceDep) -> responses.ConsistencyProof:
    """Proof that the log only grew since a checkpoint kept from earlier."""
    trusted = Checkpoint.from_note(body.checkpoint)
    return views.consistency_proof(
        consistency_from(service.app, trusted, service.app.current_keyring())
    )
