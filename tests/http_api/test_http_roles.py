"""Every endpoint, walked from the app's own routes, with every role: 401
without a usable token (none, revoked, expired), 403 for a role that may not
(a table device on another table included), success for each role that may;
nothing recorded by a refused call (both stores)."""

from __future__ import annotations

import base64
import dataclasses
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute

from ledger.http.app import openapi_document
from ledger.http.tokens import ApiRole
from ledger.node import Node
from tests.api_1_rounds import api_1_round
from tests.casino_support import dealer_device, operator_signer
from tests.http_support import Api, make_api, served_routes


@dataclasses.dataclass
class Call:
    path: str
    body: Any = None
    params: dict[str, Any] = dataclasses.field(default_factory=dict)
    table: str | None = None  # the table whose device may make this call
    key: str | None = None  # the Idempotency-Key it must carry (None: a fresh one)


def coin_round(
    api: Api, *, closed: bool = False, tossed: bool = False, game: str = "coin"
) -> tuple[str, str, str]:
    """A physical coin round with one bet: (table, round, bet)."""
    player = api.wallet(1_000)
    table = api.table(game)
    round_id = api.round(table)
    bet = api.ok(
        f"/v1/rounds/{round_id}/bets", {"account_id": player, "bet": {"on": "heads"}, "stake": 100}
    )["bet_id"]
    if closed or tossed:
        api.ok(f"/v1/rounds/{round_id}/close-betting")
    if tossed:
        api.ok(f"/v1/rounds/{round_id}/act", toss(api, round_id, "heads"))
    return table, round_id, bet


def toss(api: Api, round_id: str, face: str) -> dict[str, Any]:
    step = api.get(f"/v1/rounds/{round_id}").json()["actions"]
    report = dealer_device(api.node).act(round_id, step, "dealer", "toss", {"face": face}, [])
    return {"actor": "dealer", "action": "toss", "args": {"face": face}, "source": report}


def rng_round(api: Api, *, closed: bool = False) -> tuple[str, str]:
    player = api.wallet(1_000)
    table = api.table("taixiu", kind="rng")
    api.ok(f"/v1/tables/{table}/seeds")
    round_id = api.round(table)
    api.ok(
        f"/v1/rounds/{round_id}/bets", {"account_id": player, "bet": {"bet": "big"}, "stake": 100}
    )
    if closed:
        api.ok(f"/v1/rounds/{round_id}/close-betting")
    return table, round_id


def signed(api: Api, round_id: str, command: str, reason: str, **more: Any) -> dict[str, str]:
    """The operator signs, on their side, the bytes the API says the command records."""
    signer = operator_signer(api.node)
    fact = api.ok(
        f"/v1/rounds/{round_id}/fact-to-sign",
        {"command": command, "key_id": signer.key_id, "reason": reason, **more},
    )
    signature = signer.sign(base64.b64decode(fact["message"]))
    return {"key_id": signer.key_id, "signature": base64.b64encode(signature).decode()}


def physical_dice_round(api: Api) -> tuple[str, str]:
    """A settled physical tai xiu round whose throw (action 1) the device read."""
    player = api.wallet(1_000)
    table = api.table("taixiu")
    round_id = api.round(table)
    api.ok(
        f"/v1/rounds/{round_id}/bets", {"account_id": player, "bet": {"bet": "big"}, "stake": 100}
    )
    api.ok(f"/v1/rounds/{round_id}/close-betting")
    report = dealer_device(api.node).act(round_id, 1, "dealer", "throw", {}, [1, 2, 4])
    api.ok(f"/v1/rounds/{round_id}/act", {"actor": "dealer", "action": "throw", "source": report})
    return table, round_id


def _account(api: Api) -> Call:
    return Call(f"/v1/accounts/{api.wallet(1_000)}")


def _withdraw_bet(api: Api) -> Call:
    table, round_id, bet = coin_round(api)
    account = api.get(f"/v1/rounds/{round_id}").json()["bets"][bet]["account_id"]
    return Call(f"/v1/rounds/{round_id}/bets/{bet}/withdraw", {"account_id": account}, table=table)


def _place_bet(api: Api) -> Call:
    table = api.table()
    round_id = api.round(table)
    body = {"account_id": api.wallet(1_000), "bet": {"on": "tails"}, "stake": 50}
    return Call(f"/v1/rounds/{round_id}/bets", body, table=table)


def _place_bet_batch(api: Api) -> Call:
    table = api.table()
    round_id = api.round(table)
    bet = {"account_id": api.wallet(1_000), "bet": {"on": "tails"}, "stake": 50}
    bets = [{**bet, "request_id": str(uuid.uuid4())} for _ in range(3)]
    return Call(f"/v1/rounds/{round_id}/bets/batch", {"bets": bets}, table=table)


def _close_account(api: Api) -> Call:
    account = api.ok("/v1/accounts", {"owner": "q", "currency": "EUR"}, "cashier")["account_id"]
    return Call(f"/v1/accounts/{account}/close", {"reason": "left"})


def _retire(api: Api) -> Call:
    table = api.table("taixiu", kind="rng")
    api.ok(f"/v1/tables/{table}/seeds")
    return Call(f"/v1/tables/{table}/seeds/retire")


def _close_betting(api: Api) -> Call:
    table, round_id, _ = coin_round(api)
    return Call(f"/v1/rounds/{round_id}/close-betting", table=table)


def _draw(api: Api) -> Call:
    table, round_id = rng_round(api, closed=True)
    return Call(f"/v1/rounds/{round_id}/draw", table=table)


def _throw(api: Api) -> Call:  # the deprecated alias of /draw
    table, round_id = rng_round(api, closed=True)
    return Call(f"/v1/rounds/{round_id}/throw", table=table)


def _outcome(api: Api) -> Call:
    table, round_id, _ = coin_round(api, closed=True)
    report = dealer_device(api.node).throw(round_id, 0, {"face": "tails"})
    return Call(
        f"/v1/rounds/{round_id}/outcome",
        {"outcome": {"face": "tails"}, "source": report},
        table=table,
    )


def _fault(api: Api) -> Call:
    table, round_id, _ = coin_round(api, closed=True)
    report = dealer_device(api.node).fault(round_id, 0, "coin fell")
    return Call(
        f"/v1/rounds/{round_id}/faults", {"reason": "coin fell", "source": report}, table=table
    )


def _act(api: Api) -> Call:
    table, round_id, _ = coin_round(api, closed=True)
    return Call(f"/v1/rounds/{round_id}/act", toss(api, round_id, "tails"), table=table)


def _settle(api: Api) -> Call:
    """Nothing is left for `/settle` to settle (a round's draw or action settles
    what its game settles): its success now is a retry of a settlement
    answered before the upgrade, a round of settlement API 1 settled by it."""
    table = api.table()
    old = api_1_round(api.node, api.service.casino, table)
    old.bet(api.wallet(1_000), {"on": "heads"}, 100)
    key = f"settled-by-release-0.2-{uuid.uuid4()}"
    old.close_betting().outcome({"face": "heads"}).settle(key)
    return Call(f"/v1/rounds/{old.id}/settle", table=table, key=key)


def _void_or_resume(command: str) -> Callable[[Api], Call]:
    def prepare(api: Api) -> Call:
        _, round_id, _ = coin_round(api, closed=True)
        operator = signed(api, round_id, command, "camera down")
        return Call(
            f"/v1/rounds/{round_id}/{command}", {"reason": "camera down", "operator": operator}
        )

    return prepare


def _correct(api: Api) -> Call:
    _, round_id, _ = coin_round(api, tossed=True)
    operator = signed(api, round_id, "correct", "misread", outcome={"face": "tails"})
    body = {"outcome": {"face": "tails"}, "reason": "misread", "operator": operator}
    return Call(f"/v1/rounds/{round_id}/corrections", body)


def _correct_step(api: Api) -> Call:
    _, round_id = physical_dice_round(api)
    drawn = [6, 6, 5]
    operator = signed(api, round_id, "correct_step", "misread", step=1, drawn=drawn)
    body = {"step": 1, "drawn": drawn, "reason": "misread", "operator": operator}
    return Call(f"/v1/rounds/{round_id}/step-corrections", body)


def _fact_to_sign(api: Api) -> Call:
    _, round_id, _ = coin_round(api)
    key_id = operator_signer(api.node).key_id
    return Call(
        f"/v1/rounds/{round_id}/fact-to-sign",
        {"command": "void", "key_id": key_id, "reason": "x"},
    )


def _checkpointed(api: Api) -> str:
    account = api.wallet(1_000)
    api.node.checkpointer().catch_up()
    return account


def _inclusion(api: Api) -> Call:
    return Call("/v1/proofs/inclusion", params={"stream": _checkpointed(api), "version": 1})


def _consistency(api: Api) -> Call:
    _checkpointed(api)
    note = api.get("/v1/checkpoints/newest").json()["note"]
    return Call("/v1/proofs/consistency", {"checkpoint": note})


def _history(api: Api) -> Call:
    return Call(f"/v1/accounts/{_checkpointed(api)}/history", params={"last": 3})


def _newest(api: Api) -> Call:
    _checkpointed(api)
    return Call("/v1/checkpoints/newest")


def _checkpoints(api: Api) -> Call:
    _checkpointed(api)
    return Call("/v1/checkpoints", params={"after": 0, "limit": 10})


def _revoke(api: Api) -> Call:
    _, entry = api.service.tokens.create(ApiRole.AUDITOR)
    return Call(f"/v1/tokens/{entry.token_id}/revoke")


def _table(api: Api) -> Call:
    table = api.table()
    return Call(f"/v1/tables/{table}", table=table)


def _round(api: Api) -> Call:
    table, round_id, _ = coin_round(api)
    return Call(f"/v1/rounds/{round_id}", table=table)


SCENARIOS: dict[str, Callable[[Api], Call]] = {
    "POST /v1/accounts": lambda api: Call("/v1/accounts", {"owner": "o", "currency": "EUR"}),
    "GET /v1/accounts": lambda api: Call("/v1/accounts", params={"kind": "player", "limit": 5}),
    "GET /v1/accounts/{account_id}": _account,
    "GET /v1/accounts/{account_id}/history": _history,
    "POST /v1/accounts/{account_id}/deposits": lambda api: Call(
        f"/v1/accounts/{api.wallet(1_000)}/deposits", {"amount": 10}
    ),
    "POST /v1/accounts/{account_id}/withdrawals": lambda api: Call(
        f"/v1/accounts/{api.wallet(1_000)}/withdrawals", {"amount": 10}
    ),
    "POST /v1/accounts/{account_id}/close": _close_account,
    "POST /v1/tables": lambda api: Call(
        "/v1/tables",
        {
            "name": "T",
            "game": "coin",
            "kind": "physical",
            "currency": "EUR",
            "limits": {"min_bet": 1, "max_bet": 9, "max_round": 99},
        },
    ),
    "GET /v1/tables": lambda api: Call("/v1/tables", params={"currency": "EUR", "limit": 5}),
    "GET /v1/tables/{table_id}": _table,
    "POST /v1/tables/{table_id}/seeds": lambda api: Call(
        f"/v1/tables/{api.table('taixiu', kind='rng')}/seeds"
    ),
    "POST /v1/tables/{table_id}/seeds/retire": _retire,
    "POST /v1/rounds": lambda api: Call("/v1/rounds", {"table_id": api.table(), "dealer": "D"}),
    "GET /v1/rounds": lambda api: Call("/v1/rounds", params={"open": "true"}),
    "GET /v1/rounds/{round_id}": _round,
    "GET /v1/rounds/{round_id}/recall": lambda api: Call(f"/v1/rounds/{coin_round(api)[1]}/recall"),
    "POST /v1/rounds/{round_id}/bets": _place_bet,
    "POST /v1/rounds/{round_id}/bets/batch": _place_bet_batch,
    "POST /v1/rounds/{round_id}/bets/{bet_id}/withdraw": _withdraw_bet,
    "POST /v1/rounds/{round_id}/close-betting": _close_betting,
    "POST /v1/rounds/{round_id}/draw": _draw,
    "POST /v1/rounds/{round_id}/throw": _throw,
    "POST /v1/rounds/{round_id}/outcome": _outcome,
    "POST /v1/rounds/{round_id}/faults": _fault,
    "POST /v1/rounds/{round_id}/act": _act,
    "POST /v1/rounds/{round_id}/settle": _settle,
    "POST /v1/rounds/{round_id}/void": _void_or_resume("void"),
    "POST /v1/rounds/{round_id}/resume": _void_or_resume("resume"),
    "POST /v1/rounds/{round_id}/corrections": _correct,
    "POST /v1/rounds/{round_id}/step-corrections": _correct_step,
    "POST /v1/rounds/{round_id}/fact-to-sign": _fact_to_sign,
    "GET /v1/balances": lambda api: Call("/v1/balances"),
    "GET /v1/events": lambda api: Call("/v1/events", params={"limit": 5}),
    "GET /v1/events/stream": lambda api: Call("/v1/events/stream", params={"limit": 5}),
    "GET /v1/checkpoints/newest": _newest,
    "GET /v1/checkpoints": _checkpoints,
    "GET /v1/proofs/inclusion": _inclusion,
    "POST /v1/proofs/consistency": _consistency,
    "GET /v1/games": lambda api: Call("/v1/games"),
    "GET /v1/games/{game_id}": lambda api: Call("/v1/games/taixiu"),
    "GET /v1/games/{game_id}/paytable": lambda api: Call("/v1/games/taixiu/paytable"),
    "GET /v1/tokens": lambda api: Call("/v1/tokens"),
    "POST /v1/tokens/{token_id}/revoke": _revoke,
    "GET /v1/health": lambda api: Call("/v1/health"),
}

DOCUMENT = openapi_document()
DECLARED = {
    f"{method.upper()} {path}": operation["x-roles"]
    for path, operations in DOCUMENT["paths"].items()
    for method, operation in operations.items()
}
# Open to anyone, with no token (x-roles empty): the node's health, for monitoring.
PUBLIC = {route for route, roles in DECLARED.items() if not roles}
ROUTES = {route: roles for route, roles in DECLARED.items() if roles}


def send(api: Api, method: str, call: Call, token: str | None) -> Any:
    headers = {"Idempotency-Key": call.key or f"k-{datetime.now(UTC).timestamp()}-{id(call)}"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return api.client.request(
        method, call.path, json=call.body, params=call.params, headers=headers
    )


def test_every_served_route_has_a_scenario_and_roles(node: Node, tmp_path: Path) -> None:
    served = {
        f"{method} {route.path}"
        for route in served_routes(make_api(node, tmp_path).client.app)
        for original in [getattr(route, "original_route", route)]
        if isinstance(original, APIRoute) and original.include_in_schema  # (not /docs: public)
        for method in route.methods
    }
    assert served == set(SCENARIOS) == set(ROUTES) | PUBLIC
    assert {"GET /v1/health"} == PUBLIC


def test_the_public_route_answers_without_a_token_and_with_any(node: Node, tmp_path: Path) -> None:
    api = make_api(node, tmp_path)
    for token in (None, "garbage", *api.tokens.values()):
        response = send(api, "GET", Call("/v1/health"), token)
        assert response.status_code == 200, (token, response.text)
        assert response.json()["status"] == "ok"


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_each_role_on_each_endpoint(node: Node, tmp_path: Path, route: str) -> None:
    api = make_api(node, tmp_path)
    method, _ = route.split(" ", 1)
    allowed = set(ROUTES[route])
    prepare = SCENARIOS[route]
    call = prepare(api)
    before = api.events()
    tokens = api.service.tokens
    revoked, entry = tokens.create(
        ApiRole(sorted(allowed)[0]) if "table-device" not in allowed else ApiRole.OPERATOR
    )
    tokens.revoke(entry.token_id)
    expired, entry = tokens.create(
        ApiRole.OPERATOR, expires_at=datetime.now(UTC) + timedelta(hours=1)
    )
    with tokens._locked() as rows:
        rows[entry.token_id] = dataclasses.replace(
            rows[entry.token_id], expires_at=(datetime.now(UTC) - timedelta(seconds=1)).isoformat()
        )
    for token in (None, revoked, expired, "garbage", api.tokens["admin"] + "x"):
        response = send(api, method, call, token)
        assert response.status_code == 401, (route, token, response.text)
    other_table = api.table()
    device_elsewhere = api.device_token(other_table)
    for role in ApiRole:
        token = device_elsewhere if role is ApiRole.TABLE_DEVICE else api.tokens[role.value]
        if role.value in allowed and role is not ApiRole.TABLE_DEVICE:
            continue
        if role is ApiRole.TABLE_DEVICE and role.value in allowed and call.table is None:
            continue
        before = api.events()
        response = send(api, method, call, token)
        assert response.status_code == 403, (route, role, response.text)
        assert api.events() == before
    for role in sorted(allowed):
        fresh = prepare(api)
        if role == "table-device":
            assert fresh.table is not None, route
            token = api.device_token(fresh.table)
        else:
            token = api.tokens[role]
        response = send(api, method, fresh, token)
        assert response.status_code in (200, 201), (route, role, response.text)


READ = {"auditor", "operator", "cashier"}
PLAY = {"table-device", "operator"}
POLICY: dict[str, set[str]] = {
    route: (
        {"admin"}
        if "/tokens" in route
        else READ | {"table-device"}
        if route in ("GET /v1/tables/{table_id}", "GET /v1/rounds/{round_id}")
        else READ
        if route.startswith("GET") or "/proofs/" in route
        else {"cashier"}
        if "/accounts" in route
        else PLAY
        if route.split("/")[-1]
        in (
            "bets",
            "batch",
            "withdraw",
            "close-betting",
            "draw",
            "throw",
            "outcome",
            "faults",
            "act",
            "settle",
        )
        else {"operator"}
    )
    for route in SCENARIOS
    if route not in PUBLIC
}


def test_the_declared_roles_are_the_policy() -> None:
    """Who may do what, stated here once more: a route whose roles change fails."""
    assert {route: set(roles) for route, roles in ROUTES.items()} == POLICY
    assert POLICY["POST /v1/accounts/{account_id}/deposits"] == {"cashier"}
    assert POLICY["POST /v1/rounds/{round_id}/void"] == {"operator"}
    assert POLICY["POST /v1/rounds/{round_id}/act"] == {"table-device", "operator"}
    assert POLICY["POST /v1/rounds/{round_id}/draw"] == POLICY["POST /v1/rounds/{round_id}/throw"]
    assert all(
        "auditor" not in roles
        for route, roles in POLICY.items()
        if route.startswith("POST") and "/proofs/" not in route
    )
