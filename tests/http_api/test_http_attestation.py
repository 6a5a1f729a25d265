"""Who asked for a decision at an electronic table (issue 10, item 3): a
command-sourced action played through the HTTP API records the authenticated
token as `source.by`, `verify` checks its shape, `recall` shows it; without a
session (CLI, Python API) the source stays the node's own command; a request id
is bound to the session that first used it (both stores)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ledger.audit.recall import recall_round
from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import BetRequest, Casino, attestation, runner
from ledger.cli.recall import render
from ledger.domain.request import Request
from ledger.domain.round import Round
from ledger.errors import InvalidCommandError, RequestIdReusedError, VerificationError
from ledger.http.tokens import ApiRole
from ledger.node import Node
from ledger.rng.server import RngServer
from tests.casino_support import event_count
from tests.games.test_xidach_rounds import LIMITS, offered, simple_move
from tests.http_support import Api, all_games, make_api

GAMES = all_games()


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    return make_api(node, tmp_path)


def rng_round(node: Node, tmp_path: Path) -> tuple[Casino, str]:
    """A round open on an RNG Xì dách table whose seed is committed."""
    casino = Casino(node.app, GAMES)
    table = casino.open_table(
        request_id="t", name="XD", game="xidach", kind="rng", currency="VND", limits=LIMITS
    )
    casino.commit_seed(request_id="commit", table_id=table, rng=RngServer(tmp_path / "s"))
    return casino, casino.open_round(request_id="r", table_id=table, dealer="D")


def token_id(text: str) -> str:
    return text.partition(".")[0]


def rng_table_over_http(api: Api) -> str:
    """An RNG Xì dách table with a committed seed."""
    table = api.table("xidach", currency="VND", kind="rng")
    seeded = api.post(f"/v1/tables/{table}/seeds")
    assert seeded.status_code == 201, seeded.text
    return table


def seated_round(api: Api, table: str) -> str:
    """A round of the table with two seated players."""
    round_id = api.round(table)
    for seat in (1, 2):
        player = api.wallet(10_000, currency="VND")
        bet = {"account_id": player, "bet": {"bet": f"seat:{seat}"}, "stake": 100 * seat}
        api.ok(f"/v1/rounds/{round_id}/bets", bet)
    return round_id


def rng_xidach_over_http(api: Api) -> tuple[str, str]:
    """(table, round): a seated round on an RNG Xì dách table."""
    table = rng_table_over_http(api)
    return table, seated_round(api, table)


def play_over_http(api: Api, casino: Casino, round_id: str) -> list[tuple[str, str]]:
    """Play the round to its end through /act: (action, the token it was asked with)."""
    asked = []
    while not (step := offered(casino, round_id))["over"]:
        actor, action = simple_move(step)
        who = "terminal" if actor.startswith("seat:") else "operator"
        api.ok(f"/v1/rounds/{round_id}/act", {"actor": actor, "action": action}, who)
        asked.append((action, token_id(api.tokens[who])))
    return asked


def test_every_decision_over_http_names_the_session_that_asked(api: Api) -> None:
    # The players' terminal has its own token (the API has no player role: a
    # round's play is an operator's or its table device's); the dealer's
    # moves come with the operator's token.
    api.tokens["terminal"], _ = api.service.tokens.create(ApiRole.OPERATOR)
    table = rng_table_over_http(api)
    casino = Casino(api.node.app, GAMES)
    for _ in range(30):  # the cards decide: play until a player stands on a hand
        round_id = seated_round(api, table)
        asked = play_over_http(api, casino, round_id)
        if any(action == "stand" for action, _ in asked):
            break
    else:
        pytest.fail("no player stood in 30 rounds")
    api.ok(f"/v1/tables/{table}/seeds/retire")

    report = verify_store(
        api.node.app, api.node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES)
    )
    assert report.settlement is not None and report.settlement.rng_cards_pending == 0

    recall = recall_round(api.node.app, api.node.keyring, GAMES, round_id)
    assert recall.ok, recall.problems
    events = json.loads(json.dumps(recall.to_json()))["events"]
    actions = [e for e in events if e["kind"] == "ActionRecorded"]
    decisions = 0
    for event, (action, token) in zip(actions, asked, strict=True):
        facts = event["facts"]
        assert facts["action"] == action
        by = {"token": token, "role": "operator"}
        if facts["drawn"]:  # cards: the RNG's, drawn from the committed deck, asked by `by`
            assert facts["source"]["kind"] == "rng" and facts["source"]["by"] == by
            assert event["asked"] == f"by token {token} (role operator)"
        else:
            assert facts["source"] == {"kind": "command", "by": by}
            assert event["asked"] == f"by token {token} (role operator)"
            decisions += 1
    stands = [a for a, _ in asked if a == "stand"]
    assert stands and decisions >= len(stands) + 2  # close_betting, every stand, stop
    terminal = token_id(api.tokens["terminal"])
    text = render(recall)
    assert f"stand (from a command by token {terminal} (role operator))" in text
    assert "RESULT: every event verified" in text


def test_the_python_api_records_the_nodes_own_command(node: Node, tmp_path: Path) -> None:
    casino, round_id = rng_round(node, tmp_path)
    casino.act(request_id="c", round_id=round_id, actor="dealer", action="close_betting")
    recall = recall_round(node.app, node.keyring, GAMES, round_id)
    sources = [e.facts["source"] for e in recall.events if e.facts and "source" in e.facts]
    assert sources == [{"kind": "command"}]
    assert [e.asked for e in recall.events if e.kind == "ActionRecorded"] == ["node command"]
    assert "close_betting (from node command)" in render(recall)


@pytest.mark.parametrize(
    "by",
    [
        {"token": "", "role": "operator"},
        {"token": "t" * 65, "role": "operator"},
        {"token": "t", "role": "player"},
        {"token": "t"},
    ],
)
def test_a_malformed_session_is_refused_and_records_nothing(
    node: Node, tmp_path: Path, by: dict[str, str]
) -> None:
    casino, round_id = rng_round(node, tmp_path)
    before = event_count(node.app)
    with pytest.raises(InvalidCommandError, match="the session that asked is malformed"):
        casino.act(
            request_id="c",
            round_id=round_id,
            actor="dealer",
            action="close_betting",
            attested_by=by,
        )
    assert event_count(node.app) == before


def test_a_request_id_is_bound_to_the_session_that_used_it(node: Node, tmp_path: Path) -> None:
    casino, round_id = rng_round(node, tmp_path)
    first_by = {"token": "aaaa", "role": "operator"}
    args: Any = {"round_id": round_id, "actor": "dealer", "action": "close_betting"}
    first = casino.act(request_id="c", **args, attested_by=first_by)
    before = event_count(node.app)
    assert casino.act(request_id="c", **args, attested_by=dict(first_by)) == first
    for other in ({"token": "bbbb", "role": "operator"}, None):
        with pytest.raises(RequestIdReusedError, match="already used for a different act"):
            casino.act(request_id="c", **args, attested_by=other)
    assert event_count(node.app) == before
    recall = recall_round(node.app, node.keyring, GAMES, round_id)
    sources = [e.facts["source"] for e in recall.events if e.facts and "source" in e.facts]
    assert sources == [{"kind": "command", "by": first_by}]


def test_a_retry_over_http_needs_the_same_token(api: Api) -> None:
    api.tokens["other"], _ = api.service.tokens.create(ApiRole.OPERATOR)
    _table, round_id = rng_xidach_over_http(api)
    body = {"actor": "dealer", "action": "close_betting"}
    path = f"/v1/rounds/{round_id}/act"
    first = api.post(path, body, "operator", key="close-1")
    assert first.status_code == 200, first.text
    before = api.events()
    again = api.post(path, body, "operator", key="close-1")
    assert (again.status_code, again.json()) == (200, first.json())
    stolen = api.post(path, body, "other", key="close-1")
    assert stolen.status_code == 409 and "already used" in stolen.json()["detail"]
    assert api.events() == before


BAD_BY = [
    ({"token": "", "role": "operator"}, "token must be 1..64 characters"),
    ({"token": "t" * 65, "role": "operator"}, "token must be 1..64 characters"),
    ({"token": 7, "role": "operator"}, "token must be 1..64 characters"),
    ({"token": "t", "role": "player"}, "role must be one of"),
    ({"token": "t", "role": "operator", "signature": "x"}, "must be exactly {token, role}"),
    ({"role": "operator"}, "must be exactly {token, role}"),
    ("t", "must be exactly {token, role}"),
    (None, "must be exactly {token, role}"),
]


@pytest.mark.parametrize(("bad", "problem"), BAD_BY)
def test_attack_a_malformed_by_is_caught_by_verify(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: Any, problem: str
) -> None:
    casino, round_id = rng_round(node, tmp_path)
    honest_attest = attestation.attest

    def buggy(*args: Any, **kwargs: Any) -> Any:
        drawn, source = honest_attest(*args, **kwargs)
        return drawn, {**source, "by": bad} if source["kind"] == "command" else source

    monkeypatch.setattr(attestation, "attest", buggy)  # a buggy node: records what it is handed
    casino.act(request_id="c", round_id=round_id, actor="dealer", action="close_betting")
    monkeypatch.undo()
    verify_store(
        node.app, node.keyring, VerifyOptions(level=Level.SIGNATURES)
    )  # every envelope is fine
    with pytest.raises(VerificationError) as caught:
        verify_store(node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES))
    message = str(caught.value)
    assert f"round {round_id}: close_betting: the command's source is malformed" in message
    assert problem in message
    recall = recall_round(node.app, node.keyring, GAMES, round_id)
    assert not recall.ok and any(problem in p for p in recall.problems)


@pytest.mark.parametrize(("bad", "problem"), [(b, p) for b, p in BAD_BY if b is not None])
def test_attack_a_bet_recorded_as_asked_by_a_malformed_session_is_caught_by_verify(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: Any, problem: str
) -> None:
    """A bet's `asked_by` (None: the node's own) has the one shape of `by`."""
    casino, round_id = rng_round(node, tmp_path)
    player = casino.open_account(request_id="p", owner="P", currency="VND")
    casino.deposit(request_id="d", account_id=player, amount=1_000)
    honest_place = Round.place_bet

    def buggy(self: Round, *args: Any) -> int:  # a buggy node: records what it is handed
        return honest_place(self, *args[:6], bad)

    monkeypatch.setattr(Round, "place_bet", buggy)
    bet = casino.place_bet(
        request_id="b", round_id=round_id, account_id=player, bet={"bet": "seat:1"}, stake=100
    )
    monkeypatch.undo()
    verify_store(node.app, node.keyring, VerifyOptions(level=Level.SIGNATURES))
    with pytest.raises(VerificationError) as caught:
        verify_store(node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES))
    message = str(caught.value)
    assert f"bet {bet}'s asked_by is malformed" in message and problem in message
    recall = recall_round(node.app, node.keyring, GAMES, round_id)
    assert not recall.ok and any(problem in p for p in recall.problems)


@pytest.mark.parametrize(("bad", "problem"), [(b, p) for b, p in BAD_BY if b is not None])
def test_attack_a_request_recorded_as_asked_by_a_malformed_session_is_caught_by_verify(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: Any, problem: str
) -> None:
    """A request record's `asked_by` (None: the node's own) has the one shape of `by`."""
    casino = Casino(node.app, GAMES)

    def buggy(**kwargs: Any) -> Request:  # a buggy node: records what it is handed
        return Request(**{**kwargs, "asked_by": bad})

    monkeypatch.setattr(runner, "Request", buggy)
    casino.open_account(request_id="open-it", owner="P", currency="VND")
    monkeypatch.undo()
    verify_store(node.app, node.keyring, VerifyOptions(level=Level.SIGNATURES))
    with pytest.raises(VerificationError) as caught:
        verify_store(node.app, node.keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES))
    message = str(caught.value)
    assert "request 'open-it': its asked_by is malformed" in message and problem in message


@pytest.mark.parametrize(("bad", "problem"), [(b, p) for b, p in BAD_BY if b is not None])
def test_a_bet_handed_a_malformed_session_is_refused_and_records_nothing(
    node: Node, tmp_path: Path, bad: Any, problem: str
) -> None:
    """As a writer process is handed each bet's session: one of another shape is
    refused before anything is recorded, the other bets of its batch placed."""
    casino, round_id = rng_round(node, tmp_path)
    player = casino.open_account(request_id="p", owner="P", currency="VND")
    casino.deposit(request_id="d", account_id=player, amount=1_000)
    before = event_count(node.app)
    bet = {"account_id": player, "bet": {"bet": "seat:1"}, "stake": 100}
    wrong = BetRequest("wrong", **bet, attested_by=bad)
    right = BetRequest("right", **bet, attested_by={"token": "aaaa", "role": "operator"})
    refused, placed = casino.place_bets(round_id=round_id, bets=[wrong, right])
    assert placed.error is None and placed.bet_id
    assert isinstance(refused.error, InvalidCommandError) and refused.bet_id is None
    assert "the session that asked is malformed" in str(refused.error)
    assert problem in str(refused.error)
    assert event_count(node.app) == before + 2  # the bet placed and its stake
