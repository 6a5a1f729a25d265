"""A player's history proven complete (issue 40, item 4), on both stores: the
proof checks; a round removed, another account's event added, a stale head, a
span cut short or a summary edited fails; an attacker's edits to the stored
heads are refused where a proof is made and healed by the next checkpoint; a
log key that signs a wrong map is found by verify."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino
from ledger.cli.history import render
from ledger.crypto.checkpoint import Checkpoint
from ledger.errors import ConfigError, VerificationError
from ledger.history.check import check_history
from ledger.history.proof import history_proof
from ledger.history.span import Span
from ledger.node import Node
from ledger.plugins.manager import get_plugin_manager
from ledger.store.account_heads import AccountHeadsTable, HeadsTracker
from tests.attacker import Attacker
from tests.casino_support import seen
from tests.conftest import ledger_cli
from tests.http_support import make_api
from tests.mirror_support import ClientSource, mirror_url, opened_mirror

LIMITS = {"min_bet": 10, "max_bet": 5_000, "max_round": 10_000}


class Tables:
    """A player and a bystander at a physical Tài Xỉu table, round after round."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.casino = Casino(node.app, get_plugin_manager().games())
        self.player = self.casino.open_account(request_id="a1", owner="P1", currency="EUR")
        self.other = self.casino.open_account(request_id="a2", owner="P2", currency="EUR")
        for n, account in enumerate((self.player, self.other)):
            self.casino.deposit(request_id=f"d{n}", account_id=account, amount=100_000)
        self.table = self.casino.open_table(
            request_id="t", name="T1", game="taixiu", kind="physical", currency="EUR", limits=LIMITS
        )
        self.rounds: list[str] = []

    def play(self, count: int) -> None:
        casino = self.casino
        for _ in range(count):
            n = len(self.rounds)
            round_id = casino.open_round(request_id=f"r{n}", table_id=self.table, dealer="D1")
            for k, (account, bet) in enumerate(((self.player, "small"), (self.other, "big"))):
                casino.place_bet(
                    request_id=f"b{n}-{k}",
                    round_id=round_id,
                    account_id=account,
                    bet={"bet": bet},
                    stake=100,
                )
            casino.close_betting(request_id=f"c{n}", round_id=round_id)
            dice = {"dice": [1, 2, 4] if n % 2 else [6, 5, 4]}
            source = seen(self.node, casino, round_id, dice)
            casino.record_outcome(
                request_id=f"o{n}", round_id=round_id, outcome=dice, source=source
            )
            self.rounds.append(round_id)
        self.node.checkpointer().catch_up()

    def proof(self, span: Span, account: str | None = None) -> dict[str, Any]:
        keyring = self.node.keyring
        return history_proof(self.node.app, keyring, UUID(account or self.player), span)


@pytest.fixture
def tables(node: Node) -> Iterator[Tables]:
    yield Tables(node)


def check(node: Node, proof: dict[str, Any]) -> Any:
    return check_history(proof, node.keyring)


def test_the_last_rounds_are_proven_complete(node: Node, tables: Tables) -> None:
    tables.play(5)
    proof = tables.proof(Span(last=2))
    checked = check(node, proof)
    assert [r["round"] for r in checked.rounds] == tables.rounds[:-3:-1]
    assert not checked.whole  # the boundary: the third round back's event
    assert all(r["debited"] == 100 for r in checked.rounds)
    won = [r["credited"] for r in checked.rounds]  # small wins on 1+2+4, loses on 6+5+4
    assert sorted(won) == [0, 200]
    every = check(node, tables.proof(Span(last=10)))
    assert every.whole and [r["round"] for r in every.rounds] == tables.rounds[::-1]
    assert every.movements[-1].type == "Account.Opened"


def test_a_span_since_a_time_takes_the_rounds_after_it(node: Node, tables: Tables) -> None:
    tables.play(2)
    middle = datetime.now().astimezone()
    tables.play(2)
    checked = check(node, tables.proof(Span(since=middle)))
    assert [r["round"] for r in checked.rounds] == tables.rounds[:1:-1]
    assert all(m.at >= middle for m in checked.movements)


def _other_accounts_event(tables: Tables) -> str:
    return str(tables.proof(Span(last=1), tables.other)["events"][0])


@pytest.mark.parametrize(
    "attack, message",
    [
        ("round removed", "an event was removed"),
        ("event of another account", "not this account's"),
        ("boundary dropped", "events are missing"),
        ("event beyond the boundary", "beyond the span"),
        ("summary edited", "not what its events say"),
        ("head moved", "a stale or forged head"),
    ],
)
def test_a_tampered_proof_fails(node: Node, tables: Tables, attack: str, message: str) -> None:
    tables.play(4)
    proof = tables.proof(Span(last=2))
    bad = copy.deepcopy(proof)
    if attack == "round removed":
        del bad["events"][2]
    elif attack == "event of another account":
        bad["events"].insert(1, _other_accounts_event(tables))
    elif attack == "boundary dropped":
        bad["events"].pop()
    elif attack == "event beyond the boundary":
        bad["events"] += tables.proof(Span(last=3))["events"][len(bad["events"]) :][:1]
    elif attack == "summary edited":
        bad["rounds"][0]["credited"] += 100
    else:
        bad["head"]["position"] += 1
    with pytest.raises(VerificationError, match=message):
        check(node, bad)
    check(node, proof)  # the untouched proof still checks


def test_a_stale_head_fails_against_the_newer_checkpoint(node: Node, tables: Tables) -> None:
    """A proof made before the player's last rounds is honest about its own
    checkpoint; handed in with the newer checkpoint it fails: those rounds
    cannot be hidden by starting from an older head."""
    tables.play(2)
    older = tables.proof(Span(last=10))
    tables.play(2)
    newer = tables.proof(Span(last=10))
    assert len(check(node, older).rounds) == 2 and len(check(node, newer).rounds) == 4
    stale = copy.deepcopy(older)
    stale["checkpoint"] = newer["checkpoint"]
    with pytest.raises(VerificationError, match="a stale or forged head"):
        check(node, stale)
    stale["map_proof"] = newer["map_proof"]  # the newer map's path, the old head
    with pytest.raises(VerificationError, match="a stale or forged head"):
        check(node, stale)


def test_the_stored_heads_are_never_trusted(node: Node, tables: Tables, store_url: str) -> None:
    """An attacker rolls the player's stored head back: the proof is made from
    the events instead (the rows do not give the signed root), and the next
    checkpoint rebuilds the map from the checked events; an altered account
    event removed, which no read gives the signed map from, stops the proof."""
    tables.play(3)
    attacker = Attacker(store_url)
    attacker.sql(
        "UPDATE ledger_account_heads SET version = version - 1 WHERE account = ?",
        (attacker.key(tables.player),),
    )
    assert len(check(node, tables.proof(Span(last=10))).rounds) == 3
    tables.play(1)  # a new checkpointer process: it reads the stored heads first
    assert len(check(node, tables.proof(Span(last=10))).rounds) == 4
    report = verify_store(node.app, node.keyring, VerifyOptions(level=Level.INTEGRITY))
    assert "the account heads map at 2 checkpoint sizes recomputed" in report.summary()
    newest = attacker.sql(
        f"SELECT MAX(originator_version) FROM {attacker.events} WHERE originator_id = ?",
        (attacker.key(tables.player),),
    )[0][0]
    attacker.sql(  # the player's last movement removed from the store
        f"DELETE FROM {attacker.events} WHERE originator_id = ? AND originator_version = ?",
        (attacker.key(tables.player), newest),
    )
    attacker.sql("DELETE FROM ledger_account_heads")
    with pytest.raises(VerificationError, match="neither the stored account heads nor the events"):
        tables.proof(Span(last=2))


def test_a_mirror_proves_a_history_as_its_source_does(
    node: Node, tables: Tables, store_url: str, tmp_path: Path
) -> None:
    tables.play(3)
    api = make_api(node, tmp_path / "api")
    (tmp_path / "mirror").mkdir()
    for copy_url in mirror_url(store_url, tmp_path / "mirror"):
        with opened_mirror(copy_url, node.keyring, ClientSource(api), tmp_path / "m") as mirror:
            mirror.sync()
            proof = history_proof(mirror.app, node.keyring, tables.player, Span(last=10))
            rows = AccountHeadsTable(mirror.app.tables.recorder)
            with mirror.app.tables.recorder.read() as cursor:
                stored = rows.leaves(10**9, cursor)  # the heads the mirror verified
                assert stored is not None and len(stored) == 3  # and the house
    assert check(node, proof).rounds == check(node, tables.proof(Span(last=10))).rounds


def test_a_checkpoint_signing_a_wrong_map_is_a_finding(
    node: Node, tables: Tables, monkeypatch: pytest.MonkeyPatch
) -> None:
    tables.play(1)
    honest = HeadsTracker.advance

    def wrong(self: HeadsTracker, heads: Any) -> bytes:
        honest(self, heads)
        return bytes(32)

    monkeypatch.setattr(HeadsTracker, "advance", wrong)
    tables.play(1)
    monkeypatch.undo()
    wrong_map = r"the checkpoint of size \d+ signs an account heads map"
    with pytest.raises(VerificationError, match=wrong_map):
        verify_store(node.app, node.keyring, VerifyOptions(level=Level.INTEGRITY))


def test_a_store_from_before_the_map_gets_one_at_its_next_checkpoint(
    node: Node, tables: Tables, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkpoints signed as a release before the map signed them (no accounts
    line, no heads rows): no proof yet; the next checkpoint builds the map from
    the checked events, signs it, and the history is proven from there."""
    unsigned = Checkpoint.sign

    def old_release(**kwargs: Any) -> Checkpoint:
        return unsigned(**(kwargs | {"accounts": None}))

    monkeypatch.setattr(Checkpoint, "sign", old_release)
    monkeypatch.setattr(AccountHeadsTable, "upsert", lambda *_: None)
    tables.play(2)
    assert node.app.tables.latest_checkpoint().accounts is None  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="no checkpoint signs the accounts' heads yet"):
        tables.proof(Span(last=2))
    monkeypatch.undo()
    tables.play(1)
    assert len(check(node, tables.proof(Span(last=10))).rounds) == 3
    report = verify_store(node.app, node.keyring, VerifyOptions(level=Level.INTEGRITY))
    assert "the account heads map at 1 checkpoint sizes recomputed" in report.summary()


def test_bad_input_is_one_line_and_writes_nothing(
    node: Node, tables: Tables, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tables.play(1)
    out = tmp_path / "proof.json"
    existing = tmp_path / "existing.json"
    existing.write_text("{}")
    cases = [
        (["history", str(UUID(int=7)), "--out", str(out)], "no account"),
        (["history", tables.player, "--since", "yesterday", "--out", str(out)], "not a date"),
        (["history", tables.player, "--since", "2026-12-01T10:00"], "no UTC offset"),
        (["history", tables.player, "--last", "0"], "--last must be"),
        (["history", tables.player, "--last", "2", "--since", "2026-12-01"], "not both"),
        (["history", tables.player, "--out", str(existing)], "exists"),
        (["history", "--check", str(existing)], "is not a history proof"),
        (["history", "--check", str(tmp_path / "missing.json")], "is not a history proof"),
        (["history"], "name the account"),
    ]
    with ledger_cli(store_url, node.keys.path) as run:
        for argv, said in cases:
            capsys.readouterr()
            assert run(*argv) == 2, argv
            err = capsys.readouterr().err
            assert said in err and len(err.strip().splitlines()) == 1, (argv, err)
            assert "Traceback" not in err
    assert not out.exists() and existing.read_text() == "{}"


def test_the_http_route_serves_a_proof_anyone_checks(
    node: Node, tables: Tables, tmp_path: Path
) -> None:
    tables.play(3)
    api = make_api(node, tmp_path)
    answer = api.client.get(
        f"/v1/accounts/{tables.player}/history",
        params={"last": 2},
        headers=api.headers("auditor", key=None),
    )
    assert answer.status_code == 200, answer.text
    checked = check(node, answer.json())
    assert [r["round"] for r in checked.rounds] == tables.rounds[:0:-1]
    for params, status in (({"since": "soon"}, 400), ({"last": 0}, 422)):
        bad = api.client.get(
            f"/v1/accounts/{tables.player}/history",
            params=params,
            headers=api.headers("auditor", key=None),
        )
        assert bad.status_code == status, (params, bad.text)
    missing = api.client.get(
        f"/v1/accounts/{UUID(int=5)}/history", headers=api.headers("auditor", key=None)
    )
    assert missing.status_code == 404


def test_the_history_shows_who_asked_for_each_movement(
    node: Node, tables: Tables, tmp_path: Path
) -> None:
    """Who asked for a deposit, a withdrawal or a stake, as its signed request
    record says: a token over HTTP, the node's own (None) from the Python API;
    an edited `asked_by` or another request's record fails; a proof of format
    v1 (before who asked) still checks."""
    tables.play(1)  # the Python API: a deposit and a stake, the node's own
    api = make_api(node, tmp_path)
    player = tables.player
    round_id = api.round(api.table("taixiu"))
    bet = {"account_id": player, "bet": {"bet": "big"}, "stake": 100}
    api.ok(f"/v1/rounds/{round_id}/bets", bet)
    api.ok(f"/v1/accounts/{player}/withdrawals", {"amount": 5}, "cashier")
    node.checkpointer().catch_up()
    answer = api.client.get(
        f"/v1/accounts/{player}/history", headers=api.headers("auditor", key=None)
    )
    assert answer.status_code == 200, answer.text
    proof = answer.json()
    checked = check(node, proof)
    operator = {"token": api.tokens["operator"].partition(".")[0], "role": "operator"}
    cashier = {"token": api.tokens["cashier"].partition(".")[0], "role": "cashier"}
    shown = {m.version: (m.type, checked.asked.get(m.version, "-")) for m in checked.movements}
    assert sorted(shown.values(), key=repr) == sorted(
        [
            ("Account.Opened", "-"),  # no request record is linked to an opening
            ("Account.Deposited", None),
            ("Account.Debited", None),  # the stake of the Python API's bet (lost: no return)
            ("Account.Debited", operator),
            ("Account.Withdrawn", cashier),
        ],
        key=repr,
    )
    assert len(proof["requests"]) == len(proof["asked"]) == 4
    text = render(checked, proof)  # `ledger history`'s lines
    assert f"Account.Withdrawn 5, asked by token {cashier['token']} (role cashier)" in text
    assert "Account.Deposited 100000, asked node command" in text

    edited = copy.deepcopy(proof)
    edited["asked"][0]["asked_by"] = operator if proof["asked"][0]["asked_by"] is None else None
    swapped = copy.deepcopy(proof)
    swapped["requests"][0], swapped["requests"][1] = proof["requests"][1], proof["requests"][0]
    for forged in (edited, swapped):
        with pytest.raises(VerificationError):
            check(node, forged)
    older = {k: v for k, v in proof.items() if k not in ("requests", "asked")}
    older["format"] = "casino-ledger/account-history/v1"
    assert check(node, older).asked == {}
    with pytest.raises(ValueError, match="exactly"):  # v2 without who asked
        check(node, {**older, "format": proof["format"]})
