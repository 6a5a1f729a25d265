"""The HTTP API over the Python API: a round played through it, retries,
reused keys, and the committed OpenAPI document (both stores)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger.http.models import ErrorBody
from ledger.node import Node
from tests.casino_support import dealer_device, operator_signer
from tests.http_support import Api, make_api, operator_signature, served_routes

OPENAPI = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    return make_api(node, tmp_path)


def test_a_physical_round_through_http_settles_and_pays(api: Api) -> None:
    player = api.wallet(1_000)
    table = api.table()
    round_id = api.round(table)
    bet = api.post(
        f"/v1/rounds/{round_id}/bets", {"account_id": player, "bet": {"on": "heads"}, "stake": 100}
    )
    assert bet.status_code == 201, bet.text
    assert api.get(f"/v1/accounts/{player}").json()["balance"] == 900
    api.ok(f"/v1/rounds/{round_id}/close-betting")
    device = dealer_device(api.node)
    api.device_token(table)
    report = device.act(round_id, 1, "dealer", "toss", {"face": "heads"}, [])
    played = api.ok(
        f"/v1/rounds/{round_id}/act",
        {"actor": "dealer", "action": "toss", "args": {"face": "heads"}, "source": report},
        "table-device",
    )
    assert played["played"]["over"] is True
    assert api.get(f"/v1/accounts/{player}").json()["balance"] == 1_100
    assert api.get(f"/v1/rounds/{round_id}").json()["status"] == "settled"


def test_an_rng_round_through_http_commits_draws_and_reveals(api: Api) -> None:
    player = api.wallet(10_000)
    table = api.table("taixiu", kind="rng")
    seed = api.post(f"/v1/tables/{table}/seeds")
    assert seed.status_code == 201, seed.text
    round_id = api.round(table)
    api.ok(
        f"/v1/rounds/{round_id}/bets", {"account_id": player, "bet": {"bet": "big"}, "stake": 100}
    )
    api.ok(f"/v1/rounds/{round_id}/close-betting")
    dice = api.ok(f"/v1/rounds/{round_id}/draw")["drawn"]["dice"]
    assert len(dice) == 3 and all(1 <= d <= 6 for d in dice)
    assert api.get(f"/v1/rounds/{round_id}").json()["status"] == "settled"
    retired = api.ok(f"/v1/tables/{table}/seeds/retire")
    assert retired["seed_id"] == seed.json()["seed_id"]


def test_a_retry_returns_the_first_result_and_status_and_records_nothing(api: Api) -> None:
    player = api.wallet(1_000)
    first = api.post(f"/v1/accounts/{player}/deposits", {"amount": 250}, "cashier", key="dep-1")
    before = api.events()
    again = api.post(f"/v1/accounts/{player}/deposits", {"amount": 250}, "cashier", key="dep-1")
    assert (
        (again.status_code, again.json())
        == (first.status_code, first.json())
        == (
            200,
            {"balance": 1_250},
        )
    )
    assert api.events() == before
    created = api.post("/v1/accounts", {"owner": "x", "currency": "EUR"}, "cashier", key="acc-1")
    retried = api.post("/v1/accounts", {"owner": "x", "currency": "EUR"}, "cashier", key="acc-1")
    assert (retried.status_code, retried.json()) == (created.status_code, created.json())
    assert created.status_code == 201


def test_the_same_key_with_other_arguments_or_command_is_409_and_records_nothing(api: Api) -> None:
    player = api.wallet(1_000)
    api.post(f"/v1/accounts/{player}/deposits", {"amount": 250}, "cashier", key="k")
    before = api.events()
    other_amount = api.post(f"/v1/accounts/{player}/deposits", {"amount": 251}, "cashier", key="k")
    other_command = api.post(
        f"/v1/accounts/{player}/withdrawals", {"amount": 250}, "cashier", key="k"
    )
    assert other_amount.status_code == other_command.status_code == 409
    assert "already used" in other_amount.json()["detail"]
    assert api.events() == before
    assert api.get(f"/v1/accounts/{player}").json()["balance"] == 1_250


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"amount": 10.0}, "amount"),  # a float, even a whole one
        ({"amount": "10"}, "amount"),  # a string
        ({"amount": True}, "amount"),  # a bool is not an int here
        ({"amount": 10, "note": "x"}, "note"),  # an unknown field
        ({}, "amount"),  # a missing one
        ([10], "body"),  # not an object
    ],
)
def test_bad_bodies_are_4xx_naming_the_field_and_record_nothing(
    api: Api, body: object, problem: str
) -> None:
    player = api.wallet(1_000)
    before = api.events()
    response = api.post(f"/v1/accounts/{player}/deposits", body, "cashier")
    assert response.status_code == 422, response.text
    assert problem in response.json()["detail"]
    assert api.events() == before


def test_malformed_json_oversized_bodies_and_missing_keys_are_4xx_recording_nothing(
    api: Api,
) -> None:
    player = api.wallet(1_000)
    before = api.events()
    headers = {**api.headers("cashier"), "content-type": "application/json"}
    path = f"/v1/accounts/{player}/deposits"
    broken = api.client.post(path, content=b'{"amount": 10', headers=headers)
    assert broken.status_code == 422 and "JSON" in broken.json()["detail"]
    huge = api.client.post(
        path, content=b'{"amount": 10, "x": "' + b"a" * 70_000 + b'"}', headers=headers
    )
    assert huge.status_code == 413 and "over" in huge.json()["detail"]
    unkeyed = api.post(path, {"amount": 10}, "cashier", key=None)
    assert unkeyed.status_code == 422 and "Idempotency-Key" in unkeyed.json()["detail"]
    refused = api.post(path, {"amount": -5}, "cashier")
    assert refused.status_code == 400 and "positive" in refused.json()["detail"]
    assert api.events() == before


def test_an_operator_void_carries_the_operators_own_signature(api: Api) -> None:
    player = api.wallet(1_000)
    round_id = api.round(api.table())
    api.ok(
        f"/v1/rounds/{round_id}/bets", {"account_id": player, "bet": {"on": "tails"}, "stake": 100}
    )
    signer = operator_signer(api.node)
    before = api.events()
    forged = operator_signature(signer, "void", round_id, "another reason")
    refused = api.post(f"/v1/rounds/{round_id}/void", {"reason": "power cut", "operator": forged})
    assert refused.status_code == 400 and "does not verify" in refused.json()["detail"]
    assert api.events() == before
    signed = operator_signature(signer, "void", round_id, "power cut")
    voided = api.ok(f"/v1/rounds/{round_id}/void", {"reason": "power cut", "operator": signed})
    assert [r["returned"] for r in voided["results"]] == [100]
    assert api.get(f"/v1/accounts/{player}").json()["balance"] == 1_000
    recorded = api.get(f"/v1/rounds/{round_id}").json()
    assert recorded["status"] == "voided"


def test_queries_balances_rounds_games_paytable_checkpoint_and_proofs(api: Api) -> None:
    player = api.wallet(1_000)
    round_id = api.round(api.table())
    balances = api.get("/v1/balances").json()
    assert {"account": f"wallet:{player}", "currency": "EUR", "balance": 1_000, "postings": 1} in (
        balances["balances"]
    )
    assert api.get("/v1/balances", account=player).json()["balances"][0]["balance"] == 1_000
    assert api.get("/v1/balances", account="nobody").status_code == 404
    rounds = api.get("/v1/rounds", open="true").json()["rounds"]
    assert [r["round_id"] for r in rounds] == [round_id]
    games = {g["id"] for g in api.get("/v1/games").json()["games"]}
    assert {"taixiu", "coin"} <= games
    lines = api.get("/v1/games/taixiu/paytable").json()["lines"]
    assert any(line["bet"] == "big" for line in lines)
    assert api.get("/v1/checkpoints/newest").status_code == 404  # none signed yet
    api.node.checkpointer().catch_up()
    newest = api.get("/v1/checkpoints/newest").json()
    assert newest["size"] == api.events()
    proof = api.get("/v1/proofs/inclusion", stream=player, version=1)
    assert proof.status_code == 200, proof.text
    from ledger.audit.proofs import verify_inclusion_bundle

    assert verify_inclusion_bundle(proof.json(), api.node.keyring).size == newest["size"]
    consistency = api.client.post(
        "/v1/proofs/consistency",
        json={"checkpoint": newest["note"]},
        headers=api.headers("auditor", None),
    )
    assert consistency.status_code == 200 and consistency.json()["to"] == newest["note"]


def test_the_committed_openapi_document_is_the_served_one(api: Api) -> None:
    served = api.client.get("/openapi.json").json()
    committed = json.loads(OPENAPI.read_text())
    assert served == committed, "run `ledger openapi --output docs/openapi.json` and commit it"


def test_every_error_response_is_the_one_error_body_by_reference(api: Api) -> None:
    """The error statuses refer to `ErrorBody`'s one schema in the components and
    are no response model of their own: FastAPI would build a pydantic field for
    each status of each route, some 300 every time an app starts."""
    document = api.client.get("/openapi.json").json()
    assert document["components"]["schemas"]["ErrorBody"] == ErrorBody.model_json_schema(
        ref_template="#/components/schemas/{model}", mode="serialization"
    )
    errors = [
        response
        for operations in document["paths"].values()
        for operation in operations.values()
        for status, response in operation["responses"].items()
        # (the public health's 503 is its answer when degraded, not an error: `Health`)
        if int(status) >= 400 and (operation["x-roles"] or status != "503")
    ]
    assert len(errors) > 100
    for response in errors:
        assert response["content"] == {
            "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
        }
    routes = served_routes(api.client.app)
    assert [r for r in routes if getattr(r, "response_fields", None)] == []
    assert any(hasattr(r, "response_fields") for r in routes)


def test_a_float_inside_a_bet_or_a_stake_is_refused_and_records_nothing(api: Api) -> None:
    player = api.wallet(1_000)
    round_id = api.round(api.table())
    before = api.events()
    path = f"/v1/rounds/{round_id}/bets"
    nested = api.post(path, {"account_id": player, "bet": {"on": 0.5}, "stake": 100})
    stake = api.post(path, {"account_id": player, "bet": {"on": "heads"}, "stake": 100.0})
    huge = api.post(path, {"account_id": player, "bet": {"on": "heads"}, "stake": 2**64})
    assert nested.status_code == 400 and "0.5" in nested.json()["detail"], nested.text
    assert stake.status_code == 422 and "stake" in stake.json()["detail"]
    assert huge.status_code == 422 and "stake" in huge.json()["detail"]
    assert api.events() == before


def closed_round_on_a_device_table(api: Api) -> tuple[str, str]:
    """(player, round): a 100 bet on heads, betting closed, the table's device token made."""
    player = api.wallet(1_000)
    table = api.table()
    round_id = api.round(table)
    api.ok(
        f"/v1/rounds/{round_id}/bets", {"account_id": player, "bet": {"on": "heads"}, "stake": 100}
    )
    api.ok(f"/v1/rounds/{round_id}/close-betting")
    api.device_token(table)
    return player, round_id


def test_a_device_report_the_device_did_not_sign_is_refused_over_http(api: Api) -> None:
    """The server never vouches for a device: an outcome changed after signing, a
    report signed as another step, or none at all, is refused; nothing recorded."""
    player, round_id = closed_round_on_a_device_table(api)
    device = dealer_device(api.node)
    signed_tails = device.act(round_id, 1, "dealer", "toss", {"face": "tails"}, [])
    wrong_step = device.act(round_id, 2, "dealer", "toss", {"face": "heads"}, [])
    before = api.events()
    path = f"/v1/rounds/{round_id}/act"
    for source in (signed_tails, wrong_step, None):
        body = {"actor": "dealer", "action": "toss", "args": {"face": "heads"}, "source": source}
        refused = api.post(path, body, "table-device")
        assert refused.status_code == 400, refused.text
    assert api.events() == before
    assert api.get(f"/v1/accounts/{player}").json()["balance"] == 900


def test_an_outcome_from_a_made_up_source_is_refused_in_words(api: Api) -> None:
    """A source with no `kind` (or any kind but a device's report) is named as
    what it is, not as a `None` source; nothing is recorded."""
    _, round_id = closed_round_on_a_device_table(api)
    before = api.events()
    for source, named in (({"made": "up"}, "no kind"), ({"kind": "camera"}, "'camera'")):
        body = {"outcome": {"face": "heads"}, "source": source}
        refused = api.post(f"/v1/rounds/{round_id}/outcome", body, "table-device")
        detail = refused.json()["detail"]
        assert refused.status_code == 400 and named in detail, refused.text
        assert "None" not in detail and "dealer device's signed report" in detail
    assert api.events() == before


def test_a_round_is_recalled_over_http_from_its_signed_events(api: Api) -> None:
    player = api.wallet(1_000)
    table = api.table()
    round_id = api.round(table)
    api.post(
        f"/v1/rounds/{round_id}/bets", {"account_id": player, "bet": {"on": "tails"}, "stake": 250}
    )
    api.ok(f"/v1/rounds/{round_id}/close-betting")
    report = dealer_device(api.node).act(round_id, 1, "dealer", "toss", {"face": "heads"}, [])
    api.ok(
        f"/v1/rounds/{round_id}/act",
        {"actor": "dealer", "action": "toss", "args": {"face": "heads"}, "source": report},
    )
    recalled = api.get(f"/v1/rounds/{round_id}/recall")
    assert recalled.status_code == 200, recalled.text
    body = recalled.json()
    assert (body["replay"], body["round"], body["verified"], body["problems"]) == (
        True,
        round_id,
        True,
        [],
    )
    text = json.dumps(body["events"])
    assert "250" in text and "heads" in text  # the stake and the toss, as recorded
    assert api.get("/v1/rounds/00000000-0000-4000-8000-000000000000/recall").status_code == 404
    assert api.get("/v1/rounds/not-a-round/recall").status_code == 404
    assert api.get(f"/v1/rounds/{round_id.replace('-', '').upper()}/recall").json()["verified"]
