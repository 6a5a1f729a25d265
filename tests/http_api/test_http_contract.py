"""The HTTP contract as the OpenAPI document declares it (issue 19, item 1):
every operation declares its error statuses with the one error body and its
successes with a named model, and what the server really answers (each error
status, made to happen, and every operation's success) is a status the
operation declares, with a body its schema accepts."""

from __future__ import annotations

import json
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from jsonschema import Draft202012Validator

from ledger.crypto.keys import Role
from ledger.crypto.keystore import KeyDirectory
from ledger.http.app import Service, create_app, openapi_document
from ledger.node import Node, open_node
from tests.conftest import PASSPHRASE
from tests.http_api.test_http_roles import PUBLIC, SCENARIOS, Call, coin_round
from tests.http_support import LIMITS, Api, make_api

DOC = openapi_document()
RELEASE_0_2 = Path(__file__).parents[1] / "data" / "release-0.2-store"
ERROR_REF = "#/components/schemas/ErrorBody"
COMPONENTS = "#/components/schemas/"
JSON_TYPES = ("application/json", "application/x-ndjson")  # bodies with a JSON schema
OPERATIONS = {
    f"{method.upper()} {template}": op
    for template, methods in DOC["paths"].items()
    for method, op in methods.items()
}


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    return make_api(node, tmp_path)


def operation(method: str, template: str) -> dict[str, Any]:
    found: dict[str, Any] = DOC["paths"][template][method.lower()]
    return found


def check(response: httpx.Response, method: str, template: str) -> None:
    """The response's status is declared for the operation, and its body is
    what the declared schema allows."""
    declared = operation(method, template)["responses"]
    status = str(response.status_code)
    assert status in declared, f"{method} {template} answered {status}, declares {sorted(declared)}"
    contents = declared[status].get("content", {})
    if "application/x-ndjson" in contents:  # JSON Lines: each line is one declared item
        schema = {**DOC, **contents["application/x-ndjson"]["schema"]}
        bodies = [json.loads(line) for line in response.text.splitlines()]
        assert bodies, f"{method} {template}: no line"
    elif "application/json" in contents:
        schema = {**DOC, **contents["application/json"]["schema"]}
        bodies = [response.json()]
    else:
        return
    for body in bodies:  # refs resolve against the whole document
        errors = list(Draft202012Validator(schema).iter_errors(body))
        assert not errors, f"{method} {template} {status}: {[e.message for e in errors]}"


def test_every_operation_declares_its_errors_with_the_one_error_body() -> None:
    for template, methods in DOC["paths"].items():
        for method, op in methods.items():
            if f"{method.upper()} {template}" in PUBLIC:  # no token, no input: a bug of ours
                assert op["responses"]["500"]["content"]["application/json"]["schema"] == {
                    "$ref": ERROR_REF
                }
                continue
            wanted = {"400", "401", "403", "404", "422", "500", "503"}
            if method != "get":
                wanted |= {"409", "413"}
            assert wanted <= set(op["responses"]), (method, template, sorted(op["responses"]))
            for status in wanted:
                schema = op["responses"][status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": ERROR_REF}, (method, template, status)
    error = DOC["components"]["schemas"]["ErrorBody"]
    assert set(error["required"]) == {"detail", "error", "code"}


def test_every_success_is_a_named_model() -> None:
    """Each 2xx JSON body is a component (an integrator's type), and no such
    component is a free-form object: every one lists its fields."""
    schemas = DOC["components"]["schemas"]
    for name, op in OPERATIONS.items():
        successes = {s: r for s, r in op["responses"].items() if s.startswith("2")}
        assert successes, name
        for status, response in successes.items():
            contents = response.get("content", {})
            assert contents, (name, status)
            for media, content in contents.items():
                if media not in JSON_TYPES:
                    continue  # not JSON (a plot, a page): its content type is the contract
                ref = content["schema"].get("$ref", "")
                assert ref.startswith(COMPONENTS) and len(content["schema"]) == 1, (name, media)
                component = schemas[ref.removeprefix(COMPONENTS)]
                assert component.get("type") == "object" and component.get("properties"), ref
                assert component.get("additionalProperties") is not True, ref


def test_what_the_server_answers_is_what_it_declares(api: Api) -> None:
    accounts, account = "/v1/accounts", "/v1/accounts/{account_id}"
    # Successes.
    created = api.post(accounts, {"owner": "p", "currency": "EUR"}, "cashier")
    check(created, "POST", accounts)
    player = created.json()["account_id"]
    check(api.get(f"/v1/accounts/{player}"), "GET", account)
    # 401: no token; a token that is no token.
    check(api.client.get(f"/v1/accounts/{player}"), "GET", account)
    bogus = {"Authorization": "Bearer 0123456789abcdef.nope"}
    check(api.client.get(f"/v1/accounts/{player}", headers=bogus), "GET", account)
    # 403: a role that may not.
    check(api.post(accounts, {"owner": "p", "currency": "EUR"}, "auditor"), "POST", accounts)
    # 404: an id that names nothing.
    check(api.get("/v1/accounts/00000000-0000-4000-8000-000000000000"), "GET", account)
    # 422: a body the API refuses.
    check(
        api.post(accounts, {"owner": "p", "currency": "EUR", "x": 1}, "cashier"), "POST", accounts
    )
    # 409: one Idempotency-Key, other arguments.
    first = api.post(accounts, {"owner": "a", "currency": "EUR"}, "cashier", key="k1")
    check(first, "POST", accounts)
    check(
        api.post(accounts, {"owner": "b", "currency": "EUR"}, "cashier", key="k1"), "POST", accounts
    )
    # 413: a body over the limit.
    huge = api.client.post(
        accounts,
        content=b'{"owner": "' + b"x" * 70_000 + b'", "currency": "EUR"}',
        headers={**api.headers("cashier"), "content-type": "application/json"},
    )
    assert huge.status_code == 413
    check(huge, "POST", accounts)
    # 400: a command the ledger refuses (a bet over the table's limit).
    api.ok(f"/v1/accounts/{player}/deposits", {"amount": 100_000}, "cashier")
    table = api.table()
    round_id = api.round(table)
    bets = "/v1/rounds/{round_id}/bets"
    over = {"account_id": player, "bet": {"on": "heads"}, "stake": LIMITS["max_bet"] + 1}
    refused = api.post(f"/v1/rounds/{round_id}/bets", over)
    assert refused.status_code == 400, refused.text
    check(refused, "POST", bets)
    assert refused.json()["code"] == "stake_over_limit" and refused.json()["param"] == "stake"
    assert set(refused.json()) == {"detail", "error", "code", "param"}
    assert huge.json()["code"] == "body_too_large" and "param" not in huge.json()
    # The feed: a page of records, and the same records as JSON Lines.
    page = api.get("/v1/events", limit=5)
    check(page, "GET", "/v1/events")
    assert len(page.json()["events"]) == 5
    stream = api.get("/v1/events/stream", limit=5)
    assert stream.headers["content-type"].startswith("application/x-ndjson")
    check(stream, "GET", "/v1/events/stream")
    assert [json.loads(line) for line in stream.text.splitlines()] == page.json()["events"]
    check(api.get("/v1/events", after=10**12), "GET", "/v1/events")  # a position past the end


def test_every_operation_is_exercised() -> None:
    assert set(SCENARIOS) == set(OPERATIONS)


# Who makes each call: the first of these the operation allows (and a table
# device too, where it may).
CALLERS = ("operator", "cashier", "auditor", "admin")


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_each_operations_success_is_what_it_declares(api: Api, name: str) -> None:
    """A real success of each operation (tests/http_api/test_http_roles.py's scenarios)
    matches its declared model, and so does a retry's answer after a restart
    (the result the store kept); a table device's call goes through the route,
    not the bets' fast path, so both are checked."""
    method, template = name.split(" ", 1)
    allowed = OPERATIONS[name]["x-roles"]
    role = next((r for r in CALLERS if r in allowed), None)  # (None: public, no token)
    coin_round(api)  # an open round with a bet: no listing is empty, nor the feed
    token = api.tokens[role] if role is not None else None
    succeeds(api, method, template, SCENARIOS[name](api), token)
    if "table-device" in allowed:
        call = SCENARIOS[name](api)
        assert call.table is not None, name
        succeeds(api, method, template, call, api.device_token(call.table))


def succeeds(api: Api, method: str, template: str, call: Call, token: str | None) -> None:
    """`call` succeeds as declared, and so does the same call with the same
    Idempotency-Key to a restarted server (no result in memory), with the same bytes."""
    service = api.service
    restarted = Service(service.app, service.games, service.rng, service.tokens)
    headers = {"Idempotency-Key": call.key or str(uuid.uuid4())}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    first, again = (
        client.request(method, call.path, json=call.body, params=call.params, headers=headers)
        for client in (api.client, TestClient(create_app(restarted)))
    )
    for answer in (first, again):
        assert answer.status_code in (200, 201), (method, template, answer.text)
        check(answer, method, template)
    assert (again.status_code, again.content) == (first.status_code, first.content), template


def test_a_release_0_2_store_answers_what_it_declares(tmp_path: Path) -> None:
    """What old releases recorded reads as declared too: tables with no kind
    (null), settlement-API-1 rounds with their old log entries (faults,
    corrections, voids), and their recall."""
    store = tmp_path / "release-0.2"
    shutil.copytree(RELEASE_0_2, store)
    keys = KeyDirectory(store / "keys")  # only the public keyring was kept: new keys sign
    keys.create("ledger-node-2", Role.LEDGER_NODE, PASSPHRASE)
    keys.create("checkpoint-2", Role.CHECKPOINT, PASSPHRASE)
    node = open_node(
        f"sqlite:///{store / 'ledger.db'}",
        str(keys.path),
        passphrase=PASSPHRASE,
        anchor_seconds=0,
        anchor_events=0,
    )
    try:
        api = make_api(node, tmp_path)
        listed = api.get("/v1/rounds")
        check(listed, "GET", "/v1/rounds")
        rounds = listed.json()["rounds"]
        assert len(rounds) == 41
        for row in rounds:
            found = api.get(f"/v1/rounds/{row['round_id']}")
            check(found, "GET", "/v1/rounds/{round_id}")
            assert found.json()["settlement_api"] == 1
            recall = api.get(f"/v1/rounds/{row['round_id']}/recall")
            check(recall, "GET", "/v1/rounds/{round_id}/recall")
        for table_id in {row["table_id"] for row in rounds}:
            table = api.get(f"/v1/tables/{table_id}")
            check(table, "GET", "/v1/tables/{table_id}")
            assert table.json()["kind"] is None
        for path in ("/v1/balances", "/v1/events", "/v1/checkpoints/newest"):
            check(api.get(path), "GET", path)
    finally:
        node.close()


def test_the_docs_page_works_offline(api: Api) -> None:
    """/docs loads Swagger UI from the server itself (the fastapi-offline
    package), no CDN: every script and style it names is served, token-free."""
    page = api.client.get("/docs")
    assert page.status_code == 200 and "swagger-ui" in page.text
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
    assert assets and not [a for a in assets if a.startswith(("http:", "https:", "//"))], assets
    for asset in assets:
        served = api.client.get(asset)
        assert served.status_code == 200 and len(served.content) > 1_000, asset
    assert api.client.get("/openapi.json").status_code == 200
    # Public means the assets only: nothing outside them, traversal or not.
    for escape in ("/docs/assets/%2e%2e/__init__.py", "/docs/assets/..%2f..%2fcore.py"):
        assert api.client.get(escape).status_code == 404, escape
    assert api.client.get("/v1/accounts/x").status_code == 401


def test_a_bug_of_ours_answers_the_one_error_body_and_tells_nothing(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unexpected exception, or an answer its own model refuses, is a 500
    with the declared body and nothing of the exception in it."""
    player = api.wallet(1_000)
    monkeypatch.setattr(
        type(api.service.casino), "account", lambda *_: (_ for _ in ()).throw(KeyError("s3cret"))
    )
    crashed = api.get(f"/v1/accounts/{player}")
    assert crashed.status_code == 500
    check(crashed, "GET", "/v1/accounts/{account_id}")
    assert "s3cret" not in crashed.text and crashed.json()["error"] == "ServerError"
