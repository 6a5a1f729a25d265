"""The HTTP API's game-neutral names (issue 20, item 1): `POST /draw` with its
deprecated alias `POST /throw` (one command: the same draw, idempotency and
errors), and a round's `seed_id` and `draws` beside their deprecated aliases
`dice_seed` and `throws` (the same values), at dice and card tables alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ledger.http.app import openapi_document
from ledger.node import Node
from tests.casino_support import dealer_device
from tests.http_api.test_http_attestation import rng_xidach_over_http
from tests.http_api.test_http_roles import coin_round, rng_round
from tests.http_support import Api, make_api

DRAW, THROW = "/v1/rounds/{round_id}/draw", "/v1/rounds/{round_id}/throw"


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    return make_api(node, tmp_path)


def seeded_round(api: Api) -> tuple[str, str]:
    """(seed, round): a closed RNG tai xiu round with one bet."""
    table, round_id = rng_round(api, closed=True)
    return api.get(f"/v1/tables/{table}").json()["active_seed"], round_id


def committed_dice(api: Api, seed: str, round_id: str, counter: int) -> list[int]:
    """The dice the table's committed seed gives this round's draw `counter`."""
    return list(api.service.rng.throw(seed, round_id, counter))


def test_draw_and_its_alias_throw_draw_the_same_committed_dice(api: Api) -> None:
    for path, answer in (("draw", "drawn"), ("throw", "thrown")):
        seed, round_id = seeded_round(api)
        response = api.post(f"/v1/rounds/{round_id}/{path}")
        assert response.status_code == 200, response.text
        assert response.json() == {answer: {"dice": committed_dice(api, seed, round_id, 0)}}
        assert api.get(f"/v1/rounds/{round_id}").json()["status"] == "settled"


def test_a_retry_on_either_route_gets_the_first_draw_and_records_nothing(api: Api) -> None:
    _seed, round_id = seeded_round(api)
    drawn = api.post(f"/v1/rounds/{round_id}/draw", key="draw-1")
    before = api.events()
    thrown = api.post(f"/v1/rounds/{round_id}/throw", key="draw-1")
    again = api.post(f"/v1/rounds/{round_id}/draw", key="draw-1")
    assert drawn.status_code == thrown.status_code == again.status_code == 200
    assert drawn.json()["drawn"] == thrown.json()["thrown"] == again.json()["drawn"]
    assert api.events() == before


def test_draw_and_throw_refuse_alike(api: Api) -> None:
    """A physical table has no seed; a card game draws its cards through /act."""
    _table, physical, _bet = coin_round(api, closed=True)
    _table, cards = rng_xidach_over_http(api)
    for round_id, says in ((physical, "has no RNG seed"), (cards, "draws no dice now")):
        before = api.events()
        answers = [api.post(f"/v1/rounds/{round_id}/{path}") for path in ("draw", "throw")]
        assert [a.status_code for a in answers] == [400, 400], [a.text for a in answers]
        assert answers[0].json() == answers[1].json()
        assert says in answers[0].json()["detail"]
        assert api.events() == before


def test_the_document_serves_both_and_marks_throw_deprecated() -> None:
    paths = openapi_document()["paths"]
    draw, throw = paths[DRAW]["post"], paths[THROW]["post"]
    assert throw["deprecated"] is True and "deprecated" not in draw
    assert "/draw" in throw["summary"] and "replaces it" in throw["description"]
    assert draw["x-roles"] == throw["x-roles"]
    assert draw["parameters"] == throw["parameters"]
    assert set(draw["responses"]) == set(throw["responses"])
    ok = "#/components/schemas/"
    assert draw["responses"]["200"]["content"]["application/json"]["schema"]["$ref"] == (
        ok + "Drawn"
    )
    assert throw["responses"]["200"]["content"]["application/json"]["schema"]["$ref"] == (
        ok + "Thrown"
    )
    fields = openapi_document()["components"]["schemas"]["Round"]["properties"]
    for alias, name in (("dice_seed", "seed_id"), ("throws", "draws")):
        assert fields[alias]["description"].startswith(f"deprecated alias of `{name}`")


def names(round_state: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    return (
        round_state["seed_id"],
        round_state["dice_seed"],
        round_state["draws"],
        round_state["throws"],
    )


def test_a_dice_rounds_seed_and_draws_under_both_names(api: Api) -> None:
    seed, round_id = seeded_round(api)
    assert names(api.get(f"/v1/rounds/{round_id}").json()) == (seed, seed, 0, 0)
    api.ok(f"/v1/rounds/{round_id}/draw")
    assert names(api.get(f"/v1/rounds/{round_id}").json()) == (seed, seed, 1, 1)


def test_a_card_rounds_seed_is_its_decks_and_its_cards_are_dealt_not_drawn(api: Api) -> None:
    table, round_id = rng_xidach_over_http(api)
    seed = api.get(f"/v1/tables/{table}").json()["active_seed"]
    for action in ("close_betting", "deal"):
        api.ok(f"/v1/rounds/{round_id}/act", {"actor": "dealer", "action": action})
    state = api.get(f"/v1/rounds/{round_id}").json()
    assert seed is not None and names(state) == (seed, seed, 0, 0)
    assert len(state["dealt"]) == 6  # two cards to each of two seats and to the dealer


def test_a_physical_rounds_faulty_draw_counts_and_it_has_no_seed(api: Api) -> None:
    _table, round_id, _bet = coin_round(api, closed=True)
    report = dealer_device(api.node).fault(round_id, 0, "coin fell")
    api.ok(f"/v1/rounds/{round_id}/faults", {"reason": "coin fell", "source": report})
    state = api.get(f"/v1/rounds/{round_id}").json()
    assert names(state) == (None, None, 1, 1) and state["faults"] == 1
