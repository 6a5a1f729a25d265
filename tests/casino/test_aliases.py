"""The older names in one place (issue 39, item 2): `ledger.casino.aliases`
lists every alias, docs/cli.md's *Aliases* shows that list as it is, each name
on either side is one the code has, and the aliases do what they did: old HTTP
routes answer as the `act` (or `/step-corrections`) they stand for, on twin
rounds, and the old CLI spellings as theirs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest

from ledger.casino import Casino
from ledger.casino.aliases import ALIASES
from ledger.cli.main import build_parser
from ledger.devices import DealerDevice
from ledger.domain.game_table import GameTable
from ledger.domain.round import Round
from ledger.errors import InvalidCommandError
from ledger.http import responses
from ledger.http.app import openapi_document
from ledger.node import Node
from ledger.plugins import spec
from ledger.plugins.manager import RENAMED_HOOKS, get_plugin_manager
from ledger.rng.server import RngServer
from ledger.simulation import TableSpec
from tests.casino_support import dealer_device, event_count
from tests.conftest import ledger_cli
from tests.house.test_readme import commands
from tests.http_api.test_http_roles import signed
from tests.http_support import Api, make_api

CLI_DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
LIMITS = {"min_bet": 1, "max_bet": 2, "max_round": 3}
# What an alias's `Owner.member` is looked up on (a round, a table: one, for its attributes).
OWNERS: dict[str, Any] = {
    "Casino": Casino,
    "DealerDevice": DealerDevice,
    "GameTable": GameTable(
        name="T", game="coin", currency="EUR", limits=LIMITS, house_account=uuid4(), kind="rng"
    ),
    "TableSpec": TableSpec("T", "coin", LIMITS),
    "Round": Round(
        table_id=uuid4(),
        game="coin",
        game_version="1.0",
        rules_hash="0" * 64,
        currency="EUR",
        limits=LIMITS,
        house_account=uuid4(),
        dealer="D",
        seed_id=None,
        settlement_api=2,
        code_hash="",
    ),
}


def test_the_docs_list_every_alias_as_the_code_does() -> None:
    section = CLI_DOC.read_text().split("\n## Aliases\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert rows[0] == "| interface | the older name | is now |"
    documented = [tuple(cell.strip() for cell in row.strip("|").split(" | ")) for row in rows[1:]]
    assert documented == [(a.interface, a.name, a.means) for a in ALIASES]


def test_every_name_on_either_side_is_the_codes() -> None:
    parsers = {" ".join(path) for path, _ in commands(build_parser())}
    paths = {
        f"{method.upper()} {path}"
        for path, operations in openapi_document()["paths"].items()
        for method in operations
    }
    fields = set(responses.Round.model_fields)
    hooks = {name for name in dir(spec) if name.startswith("ledger_")}
    renamed = set(RENAMED_HOOKS)  # an older hook name: no spec, called as the hook it became
    seen = 0
    for alias in ALIASES:
        for text in (alias.name, alias.means):
            for name in re.findall(r"`([^`]+)`", text):
                seen += 1
                if name.startswith("ledger "):  # the command, up to its arguments
                    words = [w for w in name.split()[1:] if not w.isupper()]
                    assert " ".join(words) in parsers, name
                elif name.split()[0] in ("GET", "POST"):
                    assert name in paths, name
                elif re.fullmatch(r"[A-Z]\w+\.\w+", name):
                    owner, member = name.split(".")
                    assert hasattr(OWNERS[owner], member), name
                elif name.startswith("ledger_register_"):
                    assert name in hooks or RENAMED_HOOKS.get(name) in hooks, name
                    renamed.discard(name)
                elif "of `GET" in alias.name and re.fullmatch(r"[a-z_]+", name):
                    assert name in fields, name  # a field of the answer
    assert seen > 40
    assert renamed == set(), "a renamed hook the aliases table does not list"
    deprecated = {
        f"{method.upper()} {path}"
        for path, operations in openapi_document()["paths"].items()
        for method, operation in operations.items()
        if operation.get("deprecated")
    }
    assert deprecated == {"POST /v1/rounds/{round_id}/throw"}  # said so in its line


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    return make_api(node, tmp_path)


def physical_round(api: Api, bet: str = "big") -> tuple[str, str]:
    """A physical Tài Xỉu round with one 100 bet: (table, round)."""
    table = api.table("taixiu")
    round_id = api.round(table)
    body = {"account_id": api.wallet(1_000), "bet": {"bet": bet}, "stake": 100}
    api.ok(f"/v1/rounds/{round_id}/bets", body)
    return table, round_id


def played(api: Api, round_id: str) -> tuple[str, list[int], list[dict[str, Any]]]:
    """What a round came to: status, each bet's return, its actions as recorded."""
    found = api.get(f"/v1/rounds/{round_id}").json()
    actions = [
        {k: getattr(e, k) for k in ("step", "actor", "action", "args", "drawn")}
        for e in recorded(api.node, round_id)
        if isinstance(e, Round.ActionRecorded)
    ]
    return found["status"], sorted(r["returned"] for r in found["results"]), actions


def recorded(node: Node, round_id: str) -> list[Any]:
    """The round's events, read back (each checked as every read is)."""
    return list(node.app.repository.event_store.get(UUID(round_id)))


def test_old_routes_play_a_round_as_act_does(api: Api) -> None:
    device = dealer_device(api.node)
    dice = [3, 5, 6]  # 14: big wins
    # Through the aliases: close-betting, then the device's throw report to /outcome.
    _, old = physical_round(api)
    assert api.ok(f"/v1/rounds/{old}/close-betting") == {"closed": old}
    report = device.throw(old, 0, {"dice": dice})
    answer = api.ok(f"/v1/rounds/{old}/outcome", {"outcome": {"dice": dice}, "source": report})
    assert answer == {"recorded": old}
    # Through act: the same moves, the device's action report.
    _, new = physical_round(api)
    api.ok(f"/v1/rounds/{new}/act", {"actor": "dealer", "action": "close_betting"})
    report = device.act(new, 1, "dealer", "throw", {}, dice)
    api.ok(f"/v1/rounds/{new}/act", {"actor": "dealer", "action": "throw", "source": report})
    assert played(api, old) == played(api, new)
    assert played(api, old)[:2] == ("settled", [200])

    # A faulty throw: /faults with a fault report, or act's fault move.
    _, old = physical_round(api)
    api.ok(f"/v1/rounds/{old}/close-betting")
    fault = {"reason": "cocked dice", "source": device.fault(old, 0, "cocked dice")}
    assert api.ok(f"/v1/rounds/{old}/faults", fault) == {
        "fault": {"faults": 1, "then": "throw again"}
    }
    _, new = physical_round(api)
    api.ok(f"/v1/rounds/{new}/close-betting")
    report = device.act(new, 1, "dealer", "fault", {"reason": "cocked dice"}, [])
    body = {"actor": "dealer", "action": "fault", "args": {"reason": "cocked dice"}}
    api.ok(f"/v1/rounds/{new}/act", {**body, "source": report})
    assert played(api, old) == played(api, new)

    # An RNG table: /draw is the dice move, its answer the dice act drew.
    table = api.table("taixiu", kind="rng")
    api.ok(f"/v1/tables/{table}/seeds")
    round_id = api.round(table)
    api.ok(
        f"/v1/rounds/{round_id}/bets",
        {"account_id": api.wallet(1_000), "bet": {"bet": "big"}, "stake": 100},
    )
    api.ok(f"/v1/rounds/{round_id}/close-betting")
    drawn = api.ok(f"/v1/rounds/{round_id}/draw")["drawn"]
    status, _, actions = played(api, round_id)
    assert status == "settled" and drawn == {"dice": actions[-1]["drawn"]}
    assert actions[-1]["actor"] == "dealer" and actions[-1]["action"] == "throw"
    # /settle: nothing left, for the alias as for any caller.
    before = api.events()
    refused = api.post(f"/v1/rounds/{round_id}/settle")
    assert refused.status_code == 400
    assert refused.json()["detail"] == f"round {round_id} is already settled"
    assert api.events() == before


def test_corrections_is_step_corrections_of_the_last_action(api: Api) -> None:
    device = dealer_device(api.node)
    rounds = []
    for _ in range(2):
        _, round_id = physical_round(api)
        api.ok(f"/v1/rounds/{round_id}/close-betting")
        report = device.act(round_id, 1, "dealer", "throw", {}, [1, 2, 4])  # 7: small
        api.ok(
            f"/v1/rounds/{round_id}/act", {"actor": "dealer", "action": "throw", "source": report}
        )
        rounds.append(round_id)
    old, new = rounds
    assert played(api, old)[1] == [0]
    right = [6, 5, 4]  # 15: big, which the bet is
    operator = signed(api, old, "correct", "misread", outcome={"dice": right})
    body = {"outcome": {"dice": right}, "reason": "misread", "operator": operator}
    first = api.ok(f"/v1/rounds/{old}/corrections", body)
    operator = signed(api, new, "correct_step", "misread", step=1, drawn=right)
    body = {"step": 1, "drawn": right, "reason": "misread", "operator": operator}
    second = api.ok(f"/v1/rounds/{new}/step-corrections", body)
    assert [r["returned"] for r in first["results"]] == [r["returned"] for r in second["results"]]
    assert played(api, old) == played(api, new)
    corrected = [
        {k: getattr(e, k) for k in ("wrong_outcome", "right_outcome", "step")}
        for round_id in rounds
        for e in recorded(api.node, round_id)
        if isinstance(e, Round.Corrected)
    ]
    assert (
        corrected[0]
        == corrected[1]
        == {
            "wrong_outcome": {"dice": [1, 2, 4]},
            "right_outcome": {"dice": right},
            "step": 1,
        }
    )


def test_old_cli_spellings_answer_as_theirs(
    node: Node, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    casino = Casino(node.app, get_plugin_manager().games())
    rng = RngServer(tmp_path / "rng-seeds")  # where the CLI looks, beside the keys
    player = casino.open_account(request_id="a", owner="ann", currency="EUR")
    casino.deposit(request_id="d", account_id=player, amount=10_000)
    limits = {"min_bet": 10, "max_bet": 1_000, "max_round": 1_000}
    table = casino.open_table(
        request_id="t", name="T", game="taixiu", kind="rng", currency="EUR", limits=limits
    )
    casino.commit_seed(request_id="s", table_id=table, rng=rng)
    rounds = []
    for n in range(2):
        round_id = casino.open_round(request_id=f"r{n}", table_id=table, dealer="D")
        casino.place_bet(
            request_id=f"b{n}", round_id=round_id, account_id=player, bet={"bet": "big"}, stake=100
        )
        casino.act(request_id=f"c{n}", round_id=round_id, actor="dealer", action="close_betting")
        rounds.append(round_id)
    with ledger_cli(node.app.store_url, node.keys.path) as ledger:

        def run(*args: str) -> tuple[int, str, str]:
            capsys.readouterr()
            code = ledger(*args)
            out, err = capsys.readouterr()
            return code, out, err

        games = run("games")
        assert run("variants") == games and games[0] == 0
        code, out, err = run("rounds", "throw", rounds[0])
        assert (code, err) == (0, ""), err
        dice = casino.round(rounds[0]).log[-1]["action"]["drawn"]
        assert out == f"threw {dice} for round {rounds[0]}\nround {rounds[0]}: 1 bet settled\n"
        code, out, err = run("rounds", "act", rounds[1], "dealer", "throw")
        assert (code, err) == (0, ""), err
        assert out.startswith(f"recorded dealer throw in round {rounds[1]}, drew ")
        before = event_count(node.app)
        for round_id in rounds:
            code, out, err = run("rounds", "settle", round_id)
            assert (code, out) == (2, "")
            assert err == f"ledger: error: round {round_id} is already settled\n"
        assert event_count(node.app) == before
    assert [casino.round(r).status for r in rounds] == ["settled", "settled"]


def test_a_games_older_name_is_the_same_game(node: Node) -> None:
    """`variant` (issue 39, item 3): the older attributes read what `game`
    holds, `Casino.variant` is `Casino.game`, and `open_table` takes the
    older keyword; naming two games, or none, is refused and records nothing."""
    casino = Casino(node.app, get_plugin_manager().games())
    assert casino.variant("taixiu") is casino.game("taixiu")
    opened = {
        name: casino.open_table(
            request_id=f"t-{name}", name=name, kind="rng", currency="EUR", limits=LIMITS, **named
        )
        for name, named in (
            ("new", {"game": "taixiu"}),
            ("old", {"variant": "taixiu"}),
            ("both", {"game": "taixiu", "variant": "taixiu"}),
        )
    }
    for table_id in opened.values():
        table = casino.table(table_id)
        assert table.game == table.variant == "taixiu"
    # A retry through the older keyword is the same request (its stored argument name).
    again = casino.open_table(
        request_id="t-new", name="new", variant="taixiu", kind="rng", currency="EUR", limits=LIMITS
    )
    assert again == opened["new"]
    before = event_count(node.app)
    for named, says in (
        ({"game": "taixiu", "variant": "xidach"}, "names two games, 'taixiu' and 'xidach'"),
        ({}, "needs its game"),
    ):
        with pytest.raises(InvalidCommandError, match=says):
            casino.open_table(
                request_id="t-bad", name="bad", kind="rng", currency="EUR", limits=LIMITS, **named
            )
    assert event_count(node.app) == before
    game_round = OWNERS["Round"]
    assert (game_round.variant, game_round.variant_version) == (game_round.game, "1.0")
    assert TableSpec("T", variant="xidach", limits=LIMITS).game == "xidach"
    assert TableSpec("T", "xidach", LIMITS).variant == "xidach"


def test_over_http_a_table_takes_its_game_under_either_name(api: Api) -> None:
    """POST /v1/tables: `game`, or its deprecated alias `variant` (both: the same
    game); the answers carry both names, the older marked deprecated."""
    for body in ({"game": "coin"}, {"variant": "coin"}, {"game": "coin", "variant": "coin"}):
        table = api.ok(
            "/v1/tables",
            {"name": "T", "kind": "physical", "currency": "EUR", "limits": LIMITS, **body},
        )["table_id"]
        found = api.get(f"/v1/tables/{table}").json()
        assert found["game"] == found["variant"] == "coin"
    round_id = api.round(table)
    found = api.get(f"/v1/rounds/{round_id}").json()
    assert (found["game"], found["game_version"]) == (found["variant"], found["variant_version"])
    (summary,) = [r for r in api.get("/v1/rounds").json()["rounds"] if r["round_id"] == round_id]
    assert (summary["game"], summary["variant"]) == ("coin", "coin")
    before = api.events()
    for body, says in (
        ({"game": "coin", "variant": "dice"}, "names two games"),
        ({}, "needs its game"),
    ):
        refused = api.post(
            "/v1/tables",
            {"name": "T", "kind": "physical", "currency": "EUR", "limits": LIMITS, **body},
        )
        assert refused.status_code == 400, refused.text
        assert says in refused.json()["detail"]
    assert api.events() == before
    schemas = openapi_document()["components"]["schemas"]
    for model, fields in (
        ("NewTable", ("variant",)),
        ("Table", ("variant",)),
        ("Round", ("variant", "variant_version", "dice_seed", "throws")),
        ("RoundSummary", ("variant", "variant_version")),
    ):
        properties = schemas[model]["properties"]
        for field in fields:
            assert properties[field]["deprecated"] is True, (model, field)
            assert properties[field]["description"].startswith("deprecated alias of"), field
        assert all(not p.get("deprecated") for f, p in properties.items() if f not in fields)
