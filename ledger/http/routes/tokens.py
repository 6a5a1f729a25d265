"""API tokens, for an admin: listed and revoked. A token is created on the
command line only (`ledger tokens create`): its secret is shown once, there."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path

from ledger.http import responses, views
from ledger.http.dependencies import ADMIN, IdempotencyKey, ServiceDep
from ledger.http.routing import Router

router = Router()


@router.endpoint("GET", "/tokens", (ADMIN,), responses.Tokens)
def list_tokens(service: ServiceDep) -> responses.Tokens:
    """Every token's id, role, table and dates (never a secret or a hash)."""
    return views.tokens(service.tokens.list())


@router.endpoint("POST", "/tokens/{token_id}/revoke", (ADMIN,), responses.TokenInfo)
def revoke_token(
    token_id: Annotated[str, Path(max_length=64)], key: IdempotencyKey, service: ServiceDep
) -> responses.TokenInfo:
    """Revoke a token (at once, on every worker); revoking twice changes nothing."""
    return views.token(service.tokens.revoke(token_id))
