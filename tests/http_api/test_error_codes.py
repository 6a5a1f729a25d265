"""Errors a program can read (issue 41, item 4): every error body carries a
`code` of the catalogue (`ledger/error_codes.py`), and `param` when a field is
at fault. The catalogue, docs/http.md's table and the OpenAPI document's enum
are one list; real requests show the codes a back-office branches on."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from ledger.error_codes import ANY_FIELD, CATALOGUE
from ledger.http.app import openapi_document
from ledger.node import Node
from tests.http_support import LIMITS, Api, make_api

ROOT = Path(__file__).resolve().parents[2]
HTTP_PAGE = ROOT / "docs" / "http.md"
OPENAPI = ROOT / "docs" / "openapi.json"
ROW = re.compile(
    r"^\| `(?P<code>\w+)` \| (?P<status>\d{3}) \| (?P<param>[^|]*) \| (?P<meaning>.+) \|$"
)


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    return make_api(node, tmp_path)


def catalogue_rows() -> list[tuple[str, int, str | None, str]]:
    return [(e.code, e.status, e.param, e.meaning) for e in CATALOGUE]


def page_rows() -> list[tuple[str, int, str | None, str]]:
    """docs/http.md's table of error codes, row by row."""
    section = HTTP_PAGE.read_text().split("## Error codes\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        found = ROW.match(line)
        if found is None:
            continue
        param = found["param"].strip()
        rows.append(
            (
                found["code"],
                int(found["status"]),
                None if not param else param if param == ANY_FIELD else param.strip("`"),
                found["meaning"],
            )
        )
    return rows


def test_the_catalogue_the_page_and_the_openapi_document_are_one_list() -> None:
    assert len(CATALOGUE) >= 20
    assert page_rows() == catalogue_rows()
    codes = [e.code for e in CATALOGUE]
    for document in (openapi_document(), json.loads(OPENAPI.read_text())):
        field = document["components"]["schemas"]["ErrorBody"]["properties"]["code"]
        assert field["enum"] == codes
        described = field["x-enum-descriptions"]
        assert len(described) == len(codes)
        for entry, text in zip(CATALOGUE, described, strict=True):
            assert text.startswith(f"{entry.status}: {entry.meaning}"), (entry.code, text)


def refused(answer: httpx.Response, status: int, code: str, param: str | None) -> dict[str, Any]:
    """The answer is the error body with this code and param (and its old fields)."""
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    assert body["code"] == code, body
    assert body.get("param") == param, body
    assert set(body) == {"detail", "error", "code"} | ({"param"} if param else set()), body
    assert body["detail"] and body["error"], body
    return body


def bet(api: Api, round_id: str, body: dict[str, Any], key: str | None = "new") -> httpx.Response:
    return api.post(f"/v1/rounds/{round_id}/bets", body, key=key)


def test_a_back_office_branches_on_the_code_of_each_refused_bet(api: Api) -> None:
    player = api.wallet(1_000)
    table = api.table("taixiu", kind="rng")
    api.ok(f"/v1/tables/{table}/seeds")
    round_id = api.round(table)
    before = api.events()
    big = {"account_id": player, "bet": {"bet": "big"}}
    over = refused(
        bet(api, round_id, {**big, "stake": LIMITS["max_bet"] + 1}),
        400,
        "stake_over_limit",
        "stake",
    )
    assert "outside the table's limits" in over["detail"]
    refused(
        bet(api, round_id, {**big, "stake": LIMITS["min_bet"] - 1}),
        400,
        "stake_below_minimum",
        "stake",
    )
    unknown = {"account_id": player, "bet": {"bet": "purple"}, "stake": 100}
    refused(bet(api, round_id, unknown), 400, "unknown_bet", "bet")
    refused(bet(api, round_id, {**big, "stake": 2_000}), 400, "insufficient_funds", "stake")
    # A body of the wrong type: the field at fault, by the body's name for it.
    refused(bet(api, round_id, {**big, "stake": "100"}), 422, "invalid_request", "stake")
    assert api.events() == before  # nothing of a refusal is recorded
    # One Idempotency-Key, other arguments: 409.
    assert bet(api, round_id, {**big, "stake": 100}, key="bet-1").status_code == 201
    refused(bet(api, round_id, {**big, "stake": 200}, key="bet-1"), 409, "request_id_reused", None)
    # Betting closed: a late bet.
    api.ok(f"/v1/rounds/{round_id}/close-betting")
    refused(bet(api, round_id, {**big, "stake": 100}), 400, "betting_closed", None)


def test_unknown_ids_and_who_asks_have_their_codes(api: Api) -> None:
    nothing = str(uuid.uuid4())
    refused(api.get(f"/v1/rounds/{nothing}"), 404, "not_found", None)
    refused(api.client.get(f"/v1/rounds/{nothing}"), 401, "unauthorized", None)
    opened = {"owner": "p", "currency": "EUR"}
    refused(api.post("/v1/accounts", opened, "auditor"), 403, "forbidden_role", None)
    refused(
        api.post("/v1/accounts", {**opened, "currency": "XXZ"}, "cashier"),
        400,
        "invalid_currency",
        "currency",
    )
    refused(api.get("/v1/events", limit=0), 422, "invalid_request", "limit")
    # A table device's token for another table.
    mine, other = api.table(), api.table()
    api.device_token(mine)
    refused(api.get(f"/v1/tables/{other}", "table-device"), 403, "another_table", None)


def test_each_refused_bet_of_a_batch_carries_its_code_and_param(api: Api) -> None:
    player = api.wallet(1_000)
    round_id = api.round(api.table())
    heads = {"account_id": player, "bet": {"on": "heads"}}
    answer = api.post(
        f"/v1/rounds/{round_id}/bets/batch",
        {
            "bets": [
                {"request_id": "b-1", **heads, "stake": 100},
                {"request_id": "b-2", **heads, "stake": LIMITS["max_bet"] + 1},
            ]
        },
    )
    assert answer.status_code == 200, answer.text
    placed, over = answer.json()["bets"]
    assert (placed["code"], placed["param"]) == (None, None)
    assert (over["status"], over["code"], over["param"]) == (400, "stake_over_limit", "stake")


def test_a_validation_error_names_the_field_by_its_path_in_the_body(api: Api) -> None:
    round_id = api.round(api.table())
    wrong = {"request_id": "b-1", "account_id": "a", "bet": {"on": "heads"}, "stake": "10"}
    batch = api.post(f"/v1/rounds/{round_id}/bets/batch", {"bets": [wrong]})
    refused(batch, 422, "invalid_request", "bets.0.stake")
    missing = api.post("/v1/accounts", {"currency": "EUR"}, "cashier")
    refused(missing, 422, "invalid_request", "owner")
    headers = {**api.headers("cashier"), "content-type": "application/json"}
    not_json = api.client.post("/v1/accounts", content=b"{not json", headers=headers)
    refused(not_json, 422, "invalid_request", None)  # no field: a position in the text
