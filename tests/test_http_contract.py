"""The HTTP contract as the OpenAPI document declares it (issue 19, item 1):
every operation declares its error statuses with the one error body, and what
the server really answers (each error status, made to happen, and successes)
is a status the operation declares, with a body its schema accepts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from ledger.http.app import openapi_document
from ledger.node import Node
from tests.http_support import LIMITS, Api, make_api

DOC = openapi_document()
ERROR_REF = "#/components/schemas/ErrorBody"


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
            wanted = {"400", "401", "403", "404", "422", "500", "503"}
            if method != "get":
                wanted |= {"409", "413"}
            assert wanted <= set(op["responses"]), (method, template, sorted(op["responses"]))
            for status in wanted:
                schema = op["responses"][status]["content"]["application/json"]["schema"]
                assert schema == {"$ref": ERROR_REF}, (method, template, status)
    error = DOC["components"]["schemas"]["ErrorBody"]
    assert set(error["required"]) == {"detail", "error"}


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
    for response in (refused, huge):
        assert set(response.json()) == {"detail", "error"}
    # The feed: a page of records, and the same records as JSON Lines.
    page = api.get("/v1/events", limit=5)
    check(page, "GET", "/v1/events")
    assert len(page.json()["events"]) == 5
    stream = api.get("/v1/events/stream", limit=5)
    assert stream.headers["content-type"].startswith("application/x-ndjson")
    check(stream, "GET", "/v1/events/stream")
    assert [json.loads(line) for line in stream.text.splitlines()] == page.json()["events"]
    check(api.get("/v1/events", after=10**12), "GET", "/v1/events")  # a position past the end


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
