"""Who asked, in the export bundle: each command's request record carries the
HTTP token that asked (`asked_by`), or None for the node's own commands (the
CLI's, the Python API's); every record validates against docs/schemas/
payloads.json, which refuses a malformed one."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import jsonschema
import pytest

from ledger.cli.main import main
from ledger.node import Node
from tests.conftest import PASSPHRASE
from tests.export.test_export_spec import payload_schema, records
from tests.http_support import make_api

RECORDS = ("Request.Completed", "Round.BetPlaced")


def test_the_bundle_carries_who_asked_for_each_command(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = make_api(node, tmp_path)
    round_id = api.round(api.table("taixiu"))  # an installed game: the CLI's verify settles it
    player = api.wallet(1_000)  # opened and paid in by the cashier's token
    bet = api.ok(
        f"/v1/rounds/{round_id}/bets", {"account_id": player, "bet": {"bet": "big"}, "stake": 50}
    )["bet_id"]
    api.service.casino.deposit(request_id="by-python", account_id=player, amount=5)
    monkeypatch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    cli = ["--store", node.app.store_url, "--keys", str(node.keys.path)]
    simulate = ["simulate", "--rounds", "2", "--players", "2", "--tables", "1"]
    assert main([*cli, *simulate, "--card-tables", "0"]) == 0
    assert main([*cli, "export", str(tmp_path / "bundle")]) == 0

    validator = payload_schema()
    asked: dict[str, object] = {}  # request id -> who asked
    bets: dict[str, object] = {}  # bet id -> who asked
    for record in records(tmp_path / "bundle"):
        validator.validate(record)
        if record["type"] in RECORDS:
            payload = record["payload"]
            asked[payload["request_id"]] = payload["asked_by"]
            if record["type"] == "Round.BetPlaced":
                bets[payload["bet_id"]] = payload["asked_by"]
    cashier = {"token": api.tokens["cashier"].partition(".")[0], "role": "cashier"}
    operator = {"token": api.tokens["operator"].partition(".")[0], "role": "operator"}
    assert bets[bet] == operator
    assert asked["by-python"] is None
    simulated = {rid: by for rid, by in asked.items() if rid.startswith("sim-")}
    assert len(simulated) > 10 and set(map(repr, simulated.values())) == {"None"}
    over_http = [by for rid, by in asked.items() if rid != "by-python" and rid not in simulated]
    assert sorted(map(repr, over_http)) == sorted(
        map(repr, [cashier, cashier, operator, operator, operator])  # wallet, table, round, bet
    )

    placed = next(r for r in records(tmp_path / "bundle") if r["type"] == "Round.BetPlaced")
    for bad in ({"token": "t"}, {"token": "", "role": "operator"}, "operator"):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate({**placed, "payload": {**placed["payload"], "asked_by": bad}})
    older = {k: v for k, v in placed["payload"].items() if k != "asked_by"}
    with pytest.raises(jsonschema.ValidationError):  # version 3 without the field
        validator.validate({**placed, "payload": older})
