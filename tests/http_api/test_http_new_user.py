"""Issue 37 over HTTP, on both stores: an id of the wrong kind in a path or a
body is a 404 naming what the id is; a settled round is not settled again; a
body that is not declared as JSON is a 415 on every route that takes one, the
bets' fast path included. Each refusal in the one error body, the status its
operation declares, and nothing recorded."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from ledger.http.app import openapi_document
from ledger.node import Node
from tests.api_1_rounds import api_1_round
from tests.http_api.test_http_contract import check
from tests.http_api.test_http_roles import SCENARIOS, Call, coin_round, toss
from tests.http_support import Api, make_api

DOC = openapi_document()
OPERATIONS = {
    f"{method.upper()} {template}": operation
    for template, methods in DOC["paths"].items()
    for method, operation in methods.items()
}
CALLERS = ("operator", "cashier", "auditor", "admin")
ID_PARAMETERS = ("round_id", "table_id", "account_id")
WITH_AN_ID = sorted(
    name for name in OPERATIONS if any("{" + p + "}" in name for p in ID_PARAMETERS)
)
WITH_A_BODY = sorted(name for name, op in OPERATIONS.items() if "requestBody" in op)


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    return make_api(node, tmp_path)


def caller(name: str) -> str:
    allowed = OPERATIONS[name]["x-roles"]
    return next(role for role in CALLERS if role in allowed)


def send(
    api: Api,
    name: str,
    call: Call,
    *,
    role: str | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """`call` as operation `name` (its body as JSON text, with `headers`' content type)."""
    method = name.split(" ", 1)[0]
    sent = {**api.headers(role or caller(name)), **(headers or {})}
    if headers is None and call.body is not None:
        sent["content-type"] = "application/json"
    content = None if call.body is None else json.dumps(call.body).encode()
    return api.client.request(method, call.path, content=content, params=call.params, headers=sent)


# Item 1: an id of the wrong kind.

KIND_OF_PARAMETER = {"round_id": "round", "table_id": "table", "account_id": "account"}
# The id given instead: a table's for a round, a round's for a table or an account.
GIVEN_INSTEAD = {"round": "table", "table": "round", "account": "table"}
A = {"round": "a round", "table": "a table", "account": "an account"}


def ids_of_each_kind(api: Api) -> dict[str, str]:
    table = api.table()
    return {"table": table, "round": api.round(table), "account": api.wallet(100)}


def with_wrong_id(name: str, call: Call, ids: dict[str, str]) -> tuple[Call, str, str]:
    """`call` with its path's id (round, table or account) replaced by an id of
    another kind: (the call, the kind it wanted, the kind it got)."""
    template = name.split(" ", 1)[1]
    segments, given = template.split("/"), call.path.split("/")
    for index, segment in enumerate(segments):
        parameter = segment.strip("{}")
        if parameter in KIND_OF_PARAMETER:
            wanted = KIND_OF_PARAMETER[parameter]
            instead = GIVEN_INSTEAD[wanted]
            given[index] = ids[instead]
            return Call("/".join(given), call.body, call.params), wanted, instead
    raise AssertionError(f"{name} has no id of a stream in its path")


@pytest.mark.parametrize("name", WITH_AN_ID)
def test_an_id_of_another_kind_in_a_path_is_404_naming_it(api: Api, name: str) -> None:
    call, wanted, instead = with_wrong_id(name, SCENARIOS[name](api), ids_of_each_kind(api))
    before = api.events()
    answer = send(api, name, call)
    assert answer.status_code == 404, answer.text
    check(answer, name.split(" ", 1)[0], name.split(" ", 1)[1])
    wrong = re.search(r"[0-9a-f-]{36}", call.path.split("/v1/")[1])
    assert wrong is not None
    assert answer.json() == {
        "detail": f"{wrong.group(0)} is {A[instead]}, not {A[wanted]}",
        "error": "NotFoundError",
        "code": "not_found",
    }
    assert api.events() == before


def test_an_id_of_another_kind_in_a_body_is_404_naming_it(api: Api) -> None:
    # Every path parameter naming a stream is one the test above walks.
    found = {p for name in OPERATIONS for p in re.findall(r"\{(\w+)\}", name)}
    assert found - {"bet_id", "game_id", "token_id"} == set(ID_PARAMETERS), found
    ids = ids_of_each_kind(api)
    before = api.events()
    opened = api.post("/v1/rounds", {"table_id": ids["round"], "dealer": "D1"})
    assert opened.status_code == 404
    assert opened.json()["detail"] == f"{ids['round']} is a round, not a table"
    body = {"account_id": ids["table"], "bet": {"on": "heads"}, "stake": 100}
    for role in ("operator", "table-device"):  # the fast path, and the route
        if role == "table-device":
            api.device_token(ids["table"])
        placed = api.post(f"/v1/rounds/{ids['round']}/bets", body, role)
        assert placed.status_code == 404, (role, placed.text)
        assert placed.json()["detail"] == f"{ids['table']} is a table, not an account"
    assert api.events() == before


# Item 2: a settled round is not settled again.


def test_a_settled_round_is_not_settled_again(api: Api) -> None:
    """A round was settled by the toss that decided it, and a round of
    settlement API 1 by `migrate`: both refuse another settlement (400, a
    refused command) and record nothing."""
    _, tossed, _ = coin_round(api)
    api.ok(f"/v1/rounds/{tossed}/close-betting")
    api.ok(f"/v1/rounds/{tossed}/act", toss(api, tossed, "heads"))
    casino = api.service.casino
    old = api_1_round(api.node, casino, api.table())
    old.bet(api.wallet(), {"on": "heads"}, 100)
    old.close_betting().outcome({"face": "heads"})
    (migrated,) = casino.migrate()  # decided: settled on its outcome, no operator key
    assert migrated.action == "settle" and migrated.returned == 200
    before = api.events()
    for round_id in (old.id, tossed):
        for _ in range(2):  # a retry with another key: refused again
            again = api.post(f"/v1/rounds/{round_id}/settle")
            assert again.status_code == 400, again.text
            check(again, "POST", "/v1/rounds/{round_id}/settle")
            assert again.json() == {
                "detail": f"round {round_id} is already settled",
                "error": "InvalidCommandError",
                "code": "round_settled",
            }
    assert api.events() == before


# Item 3: 415 for a body that is not declared as JSON.

NOT_JSON = {
    "text/plain": {"content-type": "text/plain"},
    "no content type": {},
    "form data": {"content-type": "application/x-www-form-urlencoded"},
    "JSON in Latin-1": {"content-type": "application/json; charset=latin-1"},
    "JSON-like type": {"content-type": "application/json-patch+json"},
}


def test_every_route_that_takes_a_body_declares_415() -> None:
    assert len(WITH_A_BODY) >= 17, WITH_A_BODY
    for name, operation in OPERATIONS.items():
        declared = "415" in operation["responses"]
        assert declared == (name in WITH_A_BODY), name
        if declared:
            schema = operation["responses"]["415"]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorBody"}, name


@pytest.mark.parametrize("name", WITH_A_BODY)
def test_a_body_not_declared_as_json_is_415(api: Api, name: str) -> None:
    """Each route's good call, its body JSON text under another content type
    (or none): 415, nothing recorded; declared as JSON (a UTF-8 charset named
    or not) the same call succeeds."""
    call = SCENARIOS[name](api)
    method, template = name.split(" ", 1)
    roles = [caller(name)] + (["table-device"] if call.table is not None else [])
    for role in roles:
        if role == "table-device":
            assert call.table is not None
            api.device_token(call.table)
        before = api.events()
        for what, headers in NOT_JSON.items():
            refused = send(api, name, call, role=role, headers=headers)
            assert refused.status_code == 415, (what, role, refused.text)
            check(refused, method, template)
            assert refused.json() == {
                "detail": "the body must be sent as JSON: Content-Type: application/json",
                "error": "UnsupportedMediaType",
                "code": "unsupported_media_type",
            }
        assert api.events() == before
    json_utf8 = {"content-type": "application/json; charset=UTF-8"}
    done = send(api, name, call, role=roles[-1], headers=json_utf8)
    assert done.status_code in (200, 201), done.text


def test_the_content_type_is_one_and_judged_only_where_a_body_is_taken(api: Api) -> None:
    """Two Content-Types are 415 (a server reading the first and a proxy the
    last must not disagree); a route that takes no body answers as before."""
    wallet = api.wallet(1_000)
    headers = [
        *api.headers("cashier").items(),
        ("content-type", "application/json"),
        ("content-type", "text/plain"),
    ]
    answer = api.client.post(
        f"/v1/accounts/{wallet}/deposits", content=b'{"amount": 5}', headers=headers
    )
    assert answer.status_code == 415
    assert api.get(f"/v1/accounts/{wallet}").json()["balance"] == 1_000
    _, round_id, _ = coin_round(api)
    closed = api.client.post(
        f"/v1/rounds/{round_id}/close-betting",
        headers={**api.headers("operator"), "content-type": "text/plain"},
    )
    assert closed.status_code == 200, closed.text


def test_a_role_that_may_not_is_named_with_its_article(api: Api) -> None:
    """Issue 37: "a auditor token may not do this"."""
    refused = api.post("/v1/accounts", {"owner": "o", "currency": "EUR"}, "auditor")
    assert refused.status_code == 403
    assert refused.json()["detail"].startswith("an auditor token may not do this")
    refused = api.post("/v1/accounts", {"owner": "o", "currency": "EUR"}, "operator")
    assert refused.json()["detail"].startswith("an operator token may not do this")
