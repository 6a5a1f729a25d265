"""`ledger rounds void|resume`: an operator ends or resumes an interrupted round
from the command line, and `ledger rounds --open` finds such rounds right after
a crash (it catches the projections up first)."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from ledger.casino import Casino
from ledger.cli.main import main
from ledger.node import open_node
from ledger.plugins.manager import get_plugin_manager
from ledger.rng.server import RngServer
from tests.cli.test_cli_bad_input import RIGHT, assert_one_error_line, snapshot
from tests.cli.test_cli_new_user import store_rows
from tests.games.test_xidach_rounds import LIMITS as XD_LIMITS
from tests.games.test_xidach_rounds import offered, seated, simple_move
from tests.reproducible import reproducible_session

LIMITS = {"min_bet": 100, "max_bet": 10_000, "max_round": 20_000}


@pytest.fixture
def workdir(store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keys and a small store (both backends: `store_url` is parametrised)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LEDGER_PASSPHRASE", RIGHT)
    monkeypatch.delenv("LEDGER_KEYS", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setenv("LEDGER_STORE", store_url)
    with reproducible_session(2) as seeds:
        assert main(["simulate", "--rounds", "2", "--players", "2", "--tables", "1", *seeds]) == 0
    return tmp_path


def interrupted_rounds(count: int, currency: str = "EUR") -> list[str]:
    """Rounds a process opened, took a 1,000 minor-unit bet on and closed, then
    died: left open."""
    node = open_node(None, "keys", passphrase=RIGHT.encode())
    try:
        casino = Casino(node.app, get_plugin_manager().games())
        player = casino.open_account(request_id=f"acc-{currency}", owner="Alice", currency=currency)
        casino.deposit(request_id=f"dep-{currency}", account_id=player, amount=50_000)
        table = casino.open_table(
            request_id=f"t-{currency}",
            name=f"Crash-{currency}",
            game="taixiu",
            kind="physical",
            currency=currency,
            limits=LIMITS,
        )
        rounds = []
        for n in range(count):
            round_id = casino.open_round(request_id=f"r{n}-{currency}", table_id=table, dealer="D1")
            casino.place_bet(
                request_id=f"b{n}-{currency}",
                round_id=round_id,
                account_id=player,
                bet={"bet": "big"},
                stake=1_000,
            )
            casino.close_betting(request_id=f"c{n}-{currency}", round_id=round_id)
            rounds.append(round_id)
        return rounds
    finally:
        node.close()


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def open_listed(capsys: pytest.CaptureFixture[str]) -> set[str]:
    code, out, err = run(capsys, "rounds", "--open")
    assert code == 0, err
    return {line.split()[0] for line in out.splitlines()[1:]}


def test_void_and_resume_from_the_command_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    to_void, to_resume = interrupted_rounds(2)
    # Straight after the crash, without `ledger projections update`.
    assert open_listed(capsys) == {to_void, to_resume}

    assert run(capsys, "keys", "create", "floor-op", "--role", "operator")[0] == 0
    code, out, err = run(capsys, "rounds", "void", to_void, "--reason", "shoe dropped")
    assert (code, err) == (0, ""), err
    assert f"voided round {to_void}: 1 stake returned (10.00 EUR)" in out
    code, out, err = run(capsys, "rounds", "resume", to_resume, "--reason", "power back")
    assert (code, err) == (0, ""), err
    assert f"resumed round {to_resume}" in out

    # The void is recorded (the round leaves the open list); the resumed round
    # is open again, as it should be, until it is settled.
    assert open_listed(capsys) == {to_resume}
    code, out, _ = run(capsys, "balances")
    assert code == 0
    code, out, err = run(capsys, "verify")
    assert code == 0, err
    assert out.startswith("OK: ")


def test_a_revoked_operator_key_does_not_count_as_a_choice(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """After one operator key is revoked and another created, `rounds void`
    signs with the one valid key (a revoked key signs nothing from its
    revocation on, so it is no choice to make)."""
    (to_void,) = interrupted_rounds(1)
    assert run(capsys, "keys", "create", "old-op", "--role", "operator")[0] == 0
    code, _, err = run(capsys, "keys", "revoke", "old-op", "--reason", "left the floor")
    assert code == 0, err
    assert run(capsys, "keys", "create", "new-op", "--role", "operator")[0] == 0
    code, out, err = run(capsys, "rounds", "void", to_void, "--reason", "shoe dropped")
    assert (code, err) == (0, ""), err
    assert f"voided round {to_void}" in out
    code, out, err = run(capsys, "verify")
    assert code == 0, err


def test_a_killed_sessions_rounds_are_finished_and_its_seeds_retired_from_the_cli(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a session killed mid-round leaves on RNG tables: a dice round
    awaiting its throw, a card round dealt but not played out, and both
    tables' seeds committed and secret. From the command line: `rounds throw`,
    `rounds act` (the game's moves, cards drawn for them), `seeds` to find
    the seeds in use, `seeds retire` to reveal them; then verify passes."""
    rng = RngServer(workdir / "rng-seeds")
    node = open_node(None, "keys", passphrase=RIGHT.encode())
    try:
        casino = Casino(node.app, get_plugin_manager().games())
        dice_table = casino.open_table(
            request_id="t-dice",
            name="TX",
            game="taixiu",
            kind="rng",
            currency="EUR",
            limits=LIMITS,
        )
        casino.commit_seed(request_id="s-dice", table_id=dice_table, rng=rng)
        player = casino.open_account(request_id="acc", owner="Alice", currency="EUR")
        casino.deposit(request_id="dep", account_id=player, amount=50_000)
        dice_round = casino.open_round(request_id="r-dice", table_id=dice_table, dealer="D1")
        casino.place_bet(
            request_id="b-dice",
            round_id=dice_round,
            account_id=player,
            bet={"bet": "big"},
            stake=1_000,
        )
        casino.close_betting(request_id="c-dice", round_id=dice_round)
        card_table = casino.open_table(
            request_id="t-card",
            name="XD",
            game="xidach",
            kind="rng",
            currency="VND",
            limits=XD_LIMITS,
        )
        casino.commit_seed(request_id="s-card", table_id=card_table, rng=rng)
        card_round, players = seated(casino, card_table, {1: 100, 2: 200})
        for attempt in range(1, 20):  # a deal can end its round (a natural): deal again
            for action in ("close_betting", "deal"):
                casino.act(
                    request_id=f"{action}-{attempt}",
                    round_id=card_round,
                    actor="dealer",
                    action=action,
                    rng=rng,
                )
            if not offered(casino, card_round)["over"]:
                break
            card_round = casino.open_round(
                request_id=f"r-{attempt}", table_id=card_table, dealer="D"
            )
            for seat, who in players.items():
                casino.place_bet(
                    request_id=f"b-{attempt}-{seat}",
                    round_id=card_round,
                    account_id=who,
                    bet={"bet": f"seat:{seat}"},
                    stake=100,
                )
        assert not offered(casino, card_round)["over"]
    finally:
        node.close()  # killed here: nothing more from this process

    assert open_listed(capsys) == {dice_round, card_round}
    code, out, err = run(capsys, "rounds", "throw", dice_round)
    assert (code, err) == (0, ""), err
    assert f"round {dice_round}: 1 bet settled" in out
    while True:
        reader = open_node(None, "keys", writable=False)
        try:
            step = offered(Casino(reader.app, get_plugin_manager().games()), card_round)
        finally:
            reader.close()
        if step["over"]:
            break
        actor, action = simple_move(step)
        code, out, err = run(capsys, "rounds", "act", card_round, actor, action)
        assert (code, err) == (0, ""), err
    assert open_listed(capsys) == set()

    code, out, err = run(capsys, "seeds")
    in_use = {line.split()[0] for line in out.splitlines()[1:]}
    assert (code, in_use) == (0, {dice_table, card_table}), out
    for table in (dice_table, card_table):
        code, out, err = run(capsys, "seeds", "retire", table)
        assert (code, err) == (0, ""), err
        assert f"of table {table}" in out
    assert run(capsys, "seeds")[1].splitlines()[1:] == []
    code, out, err = run(capsys, "verify")
    assert code == 0, err
    assert out.startswith("OK: ")


def test_amounts_in_major_units_as_balances_shows_them(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1,000 minor units by each currency's ISO 4217 exponent (3, 2, 0).
    shown = {"BHD": ("1.000", "0.000"), "EUR": ("10.00", "0.00"), "JPY": ("1,000", "0")}
    opened = {currency: interrupted_rounds(1, currency)[0] for currency in shown}
    code, out, err = run(capsys, "rounds", "--open")
    assert code == 0, err
    header, *rows = out.splitlines()
    assert header.split()[5:8] == ["STAKES", "RETURNED", "CUR"]
    listed = {row.split()[0]: tuple(row.split()[5:8]) for row in rows}
    assert listed == {opened[c]: (*shown[c], c) for c in shown}

    assert run(capsys, "keys", "create", "floor-op", "--role", "operator")[0] == 0
    code, out, err = run(capsys, "rounds", "void", opened["BHD"], "--reason", "table closed")
    assert (code, err) == (0, ""), err
    assert "1 stake returned (1.000 BHD)" in out


def test_refusals_record_nothing(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (round_id,) = interrupted_rounds(1)
    store = os.environ["LEDGER_STORE"]

    def refused(*argv: str, needle: str) -> None:
        files, rows = snapshot(workdir / "keys"), store_rows(store)
        code, out, err = run(capsys, *argv)
        line = assert_one_error_line(err)
        assert code == 2, err
        assert needle in line, line
        assert out == ""
        assert snapshot(workdir / "keys") == files
        assert store_rows(store) == rows

    refused("rounds", "void", round_id, "--reason", "x", needle="no valid operator private key")
    assert run(capsys, "keys", "create", "op-a", "--role", "operator")[0] == 0
    assert run(capsys, "keys", "create", "op-b", "--role", "operator")[0] == 0
    refused("rounds", "void", round_id, "--reason", "x", needle="2 valid operator keys")
    refused("rounds", "void", round_id, "--reason", "x", "--operator-key", "op-c", needle="'op-c'")
    refused(
        "rounds",
        "void",
        round_id,
        "--reason",
        "x",
        "--operator-key",
        "ledger-node",
        needle="'ledger-node' is a ledger-node key, not operator",
    )
    refused(
        "rounds",
        "void",
        round_id,
        "--reason",
        "a\nb",
        "--operator-key",
        "op-a",
        needle="control character",
    )
    refused(
        "rounds", "void", round_id, "--reason", " ", "--operator-key", "op-a", needle="--reason"
    )
    assert (
        run(capsys, "rounds", "void", round_id, "--reason", "x", "--operator-key", "op-a")[0] == 0
    )
    refused(
        "rounds",
        "void",
        round_id,
        "--reason",
        "again",
        "--operator-key",
        "op-b",
        needle="already voided",
    )
    refused(
        "rounds", "resume", round_id, "--reason", "again", "--operator-key", "op-b", needle="voided"
    )
