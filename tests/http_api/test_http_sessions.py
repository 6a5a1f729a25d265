"""Every write is bound to the token that sent it: an `Idempotency-Key` (a
batch's request ids) reused by another token is a 409 that records nothing,
while the same token's retry gets the first answer; every command a write
runs records the token that asked in its request's record (`asked_by`), and
every play route that records an action of the node's own (a command, an RNG
draw) names it too; a bet's asker is shown in the round's view and recall
(both stores)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from ledger.audit.recall import recall_round
from ledger.cli.recall import render
from ledger.http.tokens import ApiRole
from ledger.node import Node
from tests.casino_support import domain_events
from tests.http_api.test_http_roles import DOCUMENT, SCENARIOS, Call, coin_round, rng_round
from tests.http_support import Api, all_games, make_api

# Every route that takes an Idempotency-Key, read from the OpenAPI document.
KEYED = sorted(
    f"{method.upper()} {path}"
    for path, operations in DOCUMENT["paths"].items()
    for method, operation in operations.items()
    if any(p["name"] == "Idempotency-Key" for p in operation.get("parameters", []))
)


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    return make_api(node, tmp_path)


def send(api: Api, route: str, call: Call, token: str, key: str) -> Any:
    method, _ = route.split(" ", 1)
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": key}
    return api.client.request(
        method, call.path, json=call.body, params=call.params, headers=headers
    )


def test_every_write_route_takes_a_key() -> None:
    writes = {
        f"{method.upper()} {path}"
        for path, operations in DOCUMENT["paths"].items()
        for method in operations
        if method != "get"
    }
    # Not a write: the bytes an operator is to sign, and a proof; a batch's bets
    # carry their own request ids (test below).
    unkeyed = {
        "POST /v1/rounds/{round_id}/fact-to-sign",
        "POST /v1/proofs/consistency",
        "POST /v1/rounds/{round_id}/bets/batch",
    }
    assert set(KEYED) == writes - unkeyed and len(KEYED) == 22


# Not ledger commands: revoking a token changes the tokens file, and revoking it
# twice changes nothing, whoever asks (test below); and `/settle` has nothing
# left to settle (a round's draw or action settles it): it only ever refuses,
# recording nothing, or answers the retry of a settlement recorded before
# requests were bound to tokens (test_a_request_recorded_without_a_session...).
BOUND = [route for route in KEYED if "/tokens/" not in route and not route.endswith("/settle")]


@pytest.mark.parametrize("route", BOUND)
def test_a_key_reused_by_another_token_is_refused(api: Api, route: str) -> None:
    call = SCENARIOS[route](api)
    method, path = route.split(" ", 1)
    roles = DOCUMENT["paths"][path][method.lower()]["x-roles"]
    role = ApiRole(next(r for r in roles if r != "table-device"))
    mine = api.tokens[role.value]
    theirs, _ = api.service.tokens.create(role)  # the same role, another token
    key = call.key or f"key-{uuid.uuid4()}"
    first = send(api, route, call, mine, key)
    assert first.status_code in (200, 201), (route, first.text)
    before = api.events()
    reused = send(api, route, call, theirs, key)
    assert reused.status_code == 409, (route, reused.text)
    assert "already used" in reused.json()["detail"]
    assert api.events() == before
    again = send(api, route, call, mine, key)  # the token that sent it: its first answer
    assert (again.status_code, again.json()) == (first.status_code, first.json()), route
    assert api.events() == before


def test_revoking_a_token_twice_changes_nothing_whoever_asks(api: Api) -> None:
    _, entry = api.service.tokens.create(ApiRole.AUDITOR)
    call = Call(f"/v1/tokens/{entry.token_id}/revoke")
    other_admin, _ = api.service.tokens.create(ApiRole.ADMIN)
    route = "POST /v1/tokens/{token_id}/revoke"
    first = send(api, route, call, api.tokens["admin"], "revoke-1")
    again = send(api, route, call, other_admin, "revoke-1")
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json() and first.json()["revoked_at"]


def test_a_batch_bet_reused_by_another_token_is_refused_alone(api: Api) -> None:
    table = api.table()
    round_id = api.round(table)
    bet = {"account_id": api.wallet(1_000), "bet": {"on": "tails"}, "stake": 50}
    bets = [{**bet, "request_id": f"b-{n}-{uuid.uuid4()}"} for n in range(2)]
    path = f"/v1/rounds/{round_id}/bets/batch"
    first = api.client.post(path, json={"bets": bets[:1]}, headers=api.headers("operator", None))
    assert first.json()["placed"] == 1, first.text
    other, _ = api.service.tokens.create(ApiRole.OPERATOR)
    before = api.events()
    answer = api.client.post(
        path, json={"bets": bets}, headers={"Authorization": f"Bearer {other}"}
    ).json()
    assert [b["status"] for b in answer["bets"]] == [409, 201]
    assert api.events() > before  # the second bet alone was placed
    device = api.device_token(table)  # a device of the table: a token of its own
    retried = api.client.post(
        path, json={"bets": bets[1:]}, headers={"Authorization": f"Bearer {device}"}
    ).json()
    assert [b["status"] for b in retried["bets"]] == [409]


def test_a_request_recorded_without_a_session_answers_its_retry(api: Api) -> None:
    """The CLI's and the Python API's commands (and those recorded before requests
    were bound to tokens) have no session: a retry over HTTP gets their answer,
    from any token, as before; other arguments are still a 409."""
    account = api.service.casino.open_account(request_id="by-the-cli", owner="o", currency="EUR")
    other, _ = api.service.tokens.create(ApiRole.CASHIER)
    before = api.events()
    for token in (api.tokens["cashier"], other):
        again = api.client.post(
            "/v1/accounts",
            json={"owner": "o", "currency": "EUR"},
            headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "by-the-cli"},
        )
        assert (again.status_code, again.json()) == (201, {"account_id": account})
    changed = api.post("/v1/accounts", {"owner": "o", "currency": "USD"}, "cashier", "by-the-cli")
    assert changed.status_code == 409
    assert api.events() == before
    settle = SCENARIOS["POST /v1/rounds/{round_id}/settle"](api)  # settled under release 0.2
    operator, _ = api.service.tokens.create(ApiRole.OPERATOR)
    answered = send(api, "POST /v1/rounds/{round_id}/settle", settle, operator, str(settle.key))
    assert answered.status_code == 200 and answered.json()["results"], answered.text


def asked(api: Api, round_id: str) -> list[tuple[str, str | None]]:
    """(event kind, who asked) of each action the round recorded, as `recall` shows it."""
    recall = recall_round(api.node.app, api.node.keyring, all_games(), round_id)
    assert recall.ok, recall.problems
    return [(e.facts["action"], e.asked) for e in recall.events if e.kind == "ActionRecorded"]


def test_every_play_route_names_the_token_that_asked(api: Api) -> None:
    """/close-betting and /draw (and /throw) are aliases of /act: each records the
    token that asked, as /act does; a device's report names its signing key instead."""
    device_key = None
    rng_table, by_alias = rng_round(api)
    device = api.device_token(rng_table)
    device_id = device.partition(".")[0]
    api.ok(f"/v1/rounds/{by_alias}/close-betting", role="table-device")
    api.ok(f"/v1/rounds/{by_alias}/draw")
    operator_id = api.tokens["operator"].partition(".")[0]
    assert asked(api, by_alias) == [
        ("close_betting", f"by token {device_id} (role table-device)"),
        ("throw", f"by token {operator_id} (role operator)"),
    ]
    _, thrown = rng_round(api, closed=True)
    api.ok(f"/v1/rounds/{thrown}/throw")
    assert asked(api, thrown)[-1] == ("throw", f"by token {operator_id} (role operator)")
    _, physical, _ = coin_round(api, closed=True)  # closed by the operator at a physical table
    assert asked(api, physical) == [("close_betting", f"by token {operator_id} (role operator)")]
    assert device_key is None


WRITES = sorted(
    f"{method.upper()} {path}"
    for path, operations in DOCUMENT["paths"].items()
    for method in operations
    if method != "get"
)


# The writes that record an action of a round (the play routes; `/settle` has
# nothing left to settle and answers a settlement recorded before).
ACTING = {
    f"POST /v1/rounds/{{round_id}}/{name}"
    for name in ("close-betting", "draw", "throw", "outcome", "faults", "act")
}


def send_fresh(api: Api, route: str) -> tuple[dict[str, str], int]:
    """Send `route`'s scenario with a token made for it: (that token as who
    asked, `{"token": id, "role": role}`; the last event before it)."""
    call = SCENARIOS[route](api)
    method, path = route.split(" ", 1)
    roles = DOCUMENT["paths"][path][method.lower()]["x-roles"]
    role = next(r for r in roles if r != "table-device")
    fresh, entry = api.service.tokens.create(ApiRole(role))
    after = api.node.app.recorder.max_notification_id() or 0
    key = call.key or f"key-{uuid.uuid4()}"
    done = send(api, route, call, fresh, key)
    assert done.status_code in (200, 201), (route, done.text)
    return {"token": entry.token_id, "role": role}, after


@pytest.mark.parametrize("route", WRITES)
def test_every_action_a_write_records_names_who_asked(api: Api, route: str) -> None:
    """Over every write route: each action it records is attested by who asked,
    the token (`by`) for an action the node records as its own command or RNG
    draw, or the signing key of the device's report; no action is left with
    no one (other writes record no action: their commands name the token in
    their request's record, below)."""
    by, after = send_fresh(api, route)
    sources: list[dict[str, Any]] = [
        getattr(event, "source")  # noqa: B009 (an ActionRecorded's)
        for _, event in domain_events(api.node.app, after)
        if type(event).__qualname__ == "Round.ActionRecorded"
    ]
    assert bool(sources) == (route in ACTING), (route, sources)
    for source in sources:
        if source["kind"] in ("command", "rng"):
            assert source.get("by") == by, (route, source)
        else:
            assert source["kind"] == "device" and source["key_id"], (route, source)


# The writes that run no ledger command: a dry run (the bytes an operator is to
# sign), a proof, the tokens file, and `/settle` (it only refuses, or answers a
# settlement recorded before: above).
NO_COMMAND = {
    "POST /v1/rounds/{round_id}/fact-to-sign",
    "POST /v1/proofs/consistency",
    "POST /v1/tokens/{token_id}/revoke",
    "POST /v1/rounds/{round_id}/settle",
}
# The events recording a command's request: its own record, or a bet's event.
REQUEST_RECORDS = ("Request.Completed", "Round.BetPlaced")


@pytest.mark.parametrize("route", WRITES)
def test_every_command_a_write_records_names_the_token_that_asked(api: Api, route: str) -> None:
    """Over every write route: the record of each command it runs (a
    `Request.Completed`, or the `Round.BetPlaced` recording a bet's request)
    names the token that asked and its role, signed with the command's events."""
    by, after = send_fresh(api, route)
    recorded = [
        (type(event).__qualname__, getattr(event, "asked_by"))  # noqa: B009
        for _, event in domain_events(api.node.app, after)
        if type(event).__qualname__ in REQUEST_RECORDS
    ]
    assert bool(recorded) == (route not in NO_COMMAND), (route, recorded)
    assert all(asked == by for _, asked in recorded), (route, recorded)
    if "/bets" in route and not route.endswith("/withdraw"):
        assert {kind for kind, _ in recorded} == {"Round.BetPlaced"}, route


def test_who_placed_each_bet_is_shown_where_an_auditor_looks(api: Api) -> None:
    """A bet over HTTP names its token, one from the Python API (no session) is
    the node's own: in the round's view, its recall (the library, the CLI's
    text, the HTTP route) and its signed event."""
    table = api.table()
    round_id = api.round(table)
    player = api.wallet(1_000)
    over_http = api.ok(
        f"/v1/rounds/{round_id}/bets", {"account_id": player, "bet": {"on": "heads"}, "stake": 50}
    )["bet_id"]
    by_python = api.service.casino.place_bet(
        request_id=f"py-{uuid.uuid4()}",
        round_id=round_id,
        account_id=player,
        bet={"on": "tails"},
        stake=60,
    )
    operator_id = api.tokens["operator"].partition(".")[0]
    by = {"token": operator_id, "role": "operator"}
    view = api.get(f"/v1/rounds/{round_id}")
    assert view.status_code == 200, view.text
    bets = view.json()["bets"]
    assert {bet: bets[bet]["asked_by"] for bet in bets} == {over_http: by, by_python: None}
    recall = recall_round(api.node.app, api.node.keyring, all_games(), round_id)
    assert recall.ok, recall.problems
    placed = {e.facts["bet_id"]: e.asked for e in recall.events if e.kind == "BetPlaced"}
    assert placed == {
        over_http: f"by token {operator_id} (role operator)",
        by_python: "node command",
    }
    text = render(recall)
    assert f"bet {over_http}: account {player}" in text
    assert f", asked by token {operator_id} (role operator)" in text
    assert f"bet {by_python}: account {player}" in text and ", asked node command" in text
    over_route = api.get(f"/v1/rounds/{round_id}/recall").json()
    shown = {
        e["facts"]["bet_id"]: e["asked"] for e in over_route["events"] if e["kind"] == "BetPlaced"
    }
    assert shown == placed
