"""A client of the HTTP API on a node: one token per role, helpers for the
common writes (each with a fresh Idempotency-Key) and the event count."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from ledger.crypto.actor import sign_fact
from ledger.crypto.keys import Role
from ledger.crypto.signing import Signer
from ledger.domain.signed_facts import operator_fact
from ledger.http.app import Service, create_app
from ledger.http.tokens import ApiRole, TokenStore
from ledger.node import Node
from ledger.plugins.manager import get_plugin_manager
from ledger.rng.server import RngServer
from tests.asgi_client import InThreadClient
from tests.casino_support import event_count
from tests.coin_game import COIN_GAMES as COIN

LIMITS = {"min_bet": 10, "max_bet": 5_000, "max_round": 100_000}


def all_games() -> dict[str, Any]:
    return {**get_plugin_manager().games(), **COIN}


@dataclass
class Api:
    node: Node
    service: Service
    client: InThreadClient
    tokens: dict[str, str] = field(default_factory=dict)  # role -> token text

    def headers(self, role: str | None, key: str | None = "new") -> dict[str, str]:
        found: dict[str, str] = {}
        if role is not None:
            found["Authorization"] = f"Bearer {self.tokens[role]}"
        if key is not None:
            found["Idempotency-Key"] = str(uuid.uuid4()) if key == "new" else key
        return found

    def post(
        self, path: str, body: Any = None, role: str = "operator", key: str | None = "new"
    ) -> httpx.Response:
        return self.client.post(path, json=body, headers=self.headers(role, key))

    def get(self, path: str, role: str = "auditor", **params: Any) -> httpx.Response:
        return self.client.get(path, params=params, headers=self.headers(role, None))

    def ok(self, path: str, body: Any = None, role: str = "operator") -> dict[str, Any]:
        response = self.post(path, body, role)
        assert response.status_code in (200, 201), response.text
        result: dict[str, Any] = response.json()
        return result

    def events(self) -> int:
        return event_count(self.node.app)

    def device_token(self, table_id: str) -> str:
        text, _ = self.service.tokens.create(ApiRole.TABLE_DEVICE, table=table_id)
        self.tokens["table-device"] = text
        return text

    def wallet(self, amount: int = 10_000, currency: str = "EUR") -> str:
        account = self.ok("/v1/accounts", {"owner": "p", "currency": currency}, "cashier")
        account_id = str(account["account_id"])
        self.ok(f"/v1/accounts/{account_id}/deposits", {"amount": amount}, "cashier")
        return account_id

    def table(self, game: str = "coin", currency: str = "EUR", kind: str = "physical") -> str:
        body = {
            "name": "T1",
            "game": game,
            "kind": kind,
            "currency": currency,
            "limits": LIMITS,
        }
        return str(self.ok("/v1/tables", body)["table_id"])

    def round(self, table_id: str) -> str:
        return str(self.ok("/v1/rounds", {"table_id": table_id, "dealer": "D1"})["round_id"])


def make_api(node: Node, tmp_path: Path) -> Api:
    tokens = TokenStore(node.keys.path)
    service = Service(node.app, all_games(), RngServer(tmp_path / "seeds"), tokens)
    api = Api(node, service, InThreadClient(create_app(service)))
    for role in ApiRole:
        if role is not ApiRole.TABLE_DEVICE:
            api.tokens[role.value], _ = tokens.create(role)
    return api


def operator_signature(signer: Signer, action: str, round_id: str, reason: str) -> dict[str, str]:
    """What an operator sends with a void or resume: their own signature of the fact."""
    signed = sign_fact(signer, operator_fact(action, round_id, reason), Role.OPERATOR)
    return {"key_id": signed["key_id"], "signature": signed["signature"]}


def served_routes(app: Any) -> list[Any]:
    """The app's routes, each with its full path, an included router's too: older
    FastAPI releases copy an included router's routes into the app's; newer ones
    (0.165 among them) keep the router there and resolve its routes when asked."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:
        return list(app.routes)
    return list(iter_route_contexts(app.routes))
