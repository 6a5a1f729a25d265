"""An RNG table's seeds: committed (its hash, signed) before use, revealed after."""

from __future__ import annotations

from ledger.http import responses
from ledger.http.dependencies import OPERATOR, CasinoDep, IdempotencyKey, ServiceDep, Uuid
from ledger.http.routing import Router

router = Router()


@router.endpoint(
    "POST", "/tables/{table_id}/seeds", (OPERATOR,), responses.SeedCommitted, status=201
)
def commit_seed(
    table_id: Uuid, key: IdempotencyKey, casino: CasinoDep, service: ServiceDep
) -> responses.SeedCommitted:
    """Commit an RNG table to a new secret seed (its hash, signed)."""
    return responses.SeedCommitted(
        seed_id=casino.commit_seed(request_id=key, table_id=table_id, rng=service.rng)
    )


@router.endpoint("POST", "/tables/{table_id}/seeds/retire", (OPERATOR,), responses.SeedRetired)
def retire_seed(
    table_id: Uuid, key: IdempotencyKey, casino: CasinoDep, service: ServiceDep
) -> responses.SeedRetired:
    """Reveal the table's seed in use, so anyone can recompute its draws."""
    return responses.SeedRetired(
        seed_id=casino.retire_seed(request_id=key, table_id=table_id, rng=service.rng)
    )
