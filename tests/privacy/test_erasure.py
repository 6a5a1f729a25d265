"""Personal data sealed when recorded and erased with every proof intact
(issue 40, item 1): an account's owner and a round's dealer never reach a
file in clear; `ledger erase` records an operator-signed erasure and
destroys the subject's key; every level of verify still passes, on the store
and on bundles exported before and after, on both stores."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.casino import Casino, open_ledger
from ledger.crypto.keys import Role
from ledger.erasure import erase_subject
from ledger.node import Node, open_node
from ledger.plugins.manager import get_plugin_manager
from ledger.privacy.personal import SEALED
from ledger.privacy.sealed import ERASED, is_sealed
from tests.casino_support import event_count, seen
from tests.conftest import PASSPHRASE, PG_DSN, ledger_cli
from tests.http_support import make_api
from tests.mirror_support import ClientSource, mirror_url, opened_mirror

OWNER = "Nguyễn Thị Erasable-7f3a"
KEPT = "Trần Bình Kept-2d81"
DEALER = "Lê Văn Dealer-9c1e"
REASON = "GDPR article 17, request 2026-118"
LIMITS = {"min_bet": 10, "max_bet": 5_000, "max_round": 10_000}


def played(node: Node) -> tuple[Casino, str, str, str]:
    """Two players, a physical Tài Xỉu round dealt by DEALER, settled: (casino,
    the erasable owner's account, the kept one's, the round)."""
    casino = Casino(node.app, get_plugin_manager().games())
    owner = casino.open_account(request_id="a1", owner=OWNER, currency="EUR")
    kept = casino.open_account(request_id="a2", owner=KEPT, currency="EUR")
    for n, account in enumerate((owner, kept)):
        casino.deposit(request_id=f"d{n}", account_id=account, amount=10_000)
    table = casino.open_table(
        request_id="t", name="T1", game="taixiu", kind="physical", currency="EUR", limits=LIMITS
    )
    round_id = casino.open_round(request_id="r", table_id=table, dealer=DEALER)
    for n, (account, bet) in enumerate(((owner, "small"), (kept, "big"))):
        casino.place_bet(
            request_id=f"b{n}", round_id=round_id, account_id=account, bet={"bet": bet}, stake=500
        )
    casino.close_betting(request_id="c", round_id=round_id)
    dice = {"dice": [1, 2, 4]}
    casino.record_outcome(
        request_id="o", round_id=round_id, outcome=dice, source=seen(node, casino, round_id, dice)
    )
    return casino, owner, kept, round_id


def found(written: bytes, *values: str) -> list[str]:
    """Which of `values` `written` holds, as UTF-8 or as the hex a dump prints a
    bytea column in (the events' stored bytes, on PostgreSQL)."""
    return [v for v in values if v.encode() in written or v.encode().hex().encode() in written]


def written_bytes(root: Path, store_url: str) -> bytes:
    """Every file under `root` (the SQLite file and its WAL among them) and, on
    PostgreSQL, a dump of the store's schema: what an attacker with the disk
    and the database would read."""
    found = b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())
    if "schema=" in store_url:
        schema = store_url.rpartition("schema=")[2]
        dump = subprocess.run(
            ["pg_dump", "--no-owner", "-n", schema, PG_DSN],
            capture_output=True,
            check=True,
        )
        found += dump.stdout
    return found


def test_owners_and_dealers_are_sealed_and_erased_with_every_proof_intact(
    node: Node, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    casino, owner, kept, round_id = played(node)
    personal = node.app.personal
    assert personal is not None
    recorded = casino.account(owner).owner
    assert is_sealed(recorded) and personal.reveal("owner", recorded) == OWNER
    assert personal.reveal("dealer", casino.round(round_id).dealer) == DEALER
    node.keys.create("operator-1", Role.OPERATOR, PASSPHRASE)
    node.close()

    def ledger(*args: object) -> tuple[int, str]:
        capsys.readouterr()
        with ledger_cli(store_url, node.keys.path) as run:
            code = run(*args)
        captured = capsys.readouterr()
        return code, captured.out + captured.err

    assert ledger("balances")[1].count(SEALED) == 2  # owners shown only when asked
    assert f"dealer {SEALED}" in ledger("recall", round_id)[1]
    shown = ledger("balances", "--reveal")[1]
    assert OWNER in shown and KEPT in shown
    assert ledger("export", tmp_path / "before")[0] == 0
    assert ledger("tiles", tmp_path / "tiles")[0] == 0
    clear = (OWNER, KEPT, DEALER)
    before = written_bytes(tmp_path, store_url)
    assert not found(before, *clear), "a personal value in clear"

    code, said = ledger("erase", owner, "--reason", REASON)
    assert code == 0 and f"erased data subject account-{owner}" in said, said
    code, said = ledger("erase", "--dealer", DEALER, "--reason", REASON)
    assert code == 0 and "its key destroyed" in said, said

    shown = ledger("balances", "--reveal")[1]
    assert ERASED in shown and OWNER not in shown and KEPT in shown  # the other owner stays
    code, said = ledger("recall", round_id)
    assert code == 0 and f"dealer {ERASED}" in said, said
    code, said = ledger("verify", "--level", "settlement")
    assert code == 0 and "2 erasures of personal data: operator signatures" in said, said
    for level in ("integrity", "signatures"):
        assert ledger("verify", "--level", level)[0] == 0
    assert ledger("export", tmp_path / "after")[0] == 0
    for bundle in ("before", "after"):
        code, said = ledger("verify", "--bundle", tmp_path / bundle)
        assert code == 0, said
    significant = ledger("events", "--significant")[1]
    assert significant.count("erased") == 2 and REASON in significant
    # Money is never erased: the balances are what the round paid.
    reopened = open_node(store_url, str(node.keys.path), passphrase=PASSPHRASE)
    try:
        again = Casino(reopened.app, {})
        assert [again.account(a).balance for a in (owner, kept)] == [10_500, 9_500]
        assert again.context.personal.reveal("owner", again.account(owner).owner) == ERASED
        assert again.context.personal.reveal("owner", again.account(kept).owner) == KEPT
    finally:
        reopened.close()
    after = written_bytes(tmp_path, store_url)
    assert not found(after, *clear)
    assert found(after, REASON)  # the search reads what the ledger wrote: it finds this


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("account-0b7d1c1e-3f9a-4c55-9a51-2f7c1d3b9e10", "--reason", "r"), "no data subject"),
        (("bob", "--reason", "r"), "is not a data subject id"),
        (("--dealer", "Nobody", "--reason", "r"), "no dealer 'Nobody'"),
        (("OWNER", "--reason", " "), "--reason must be a non-empty text"),
        (("OWNER", "--reason", "r", "--operator-key", "nope"), "nope"),
        (("OWNER", "--dealer", DEALER, "--reason", "r"), "name one data subject"),
        (("HOUSE", "--reason", "r"), "owner is recorded in clear (a table's house account"),
    ],
)
def test_bad_input_erases_and_records_nothing(
    node: Node,
    store_url: str,
    capsys: pytest.CaptureFixture[str],
    args: tuple[str, ...],
    says: str,
) -> None:
    casino, owner, _, round_id = played(node)
    house = str(casino.round(round_id).house_account)
    node.keys.create("operator-1", Role.OPERATOR, PASSPHRASE)
    keys = sorted(p.name for p in (node.keys.path / "subjects").rglob("*"))
    count = event_count(node.app)
    argv = [{"OWNER": owner, "HOUSE": house}.get(a, a) for a in args]
    capsys.readouterr()
    with ledger_cli(store_url, node.keys.path) as run:
        code = run("erase", *argv)
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert event_count(node.app) == count
    assert sorted(p.name for p in (node.keys.path / "subjects").rglob("*")) == keys


def test_an_erasure_cut_short_after_its_event_is_finished_on_the_next_open(
    node: Node, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, owner, _, _ = played(node)
    node.keys.create("operator-1", Role.OPERATOR, PASSPHRASE)
    operator = node.keys.signer(Role.OPERATOR, PASSPHRASE)
    personal = node.app.personal
    assert personal is not None

    def crash(self: Any, subject: str) -> bool:
        raise SystemExit("killed between the event and the key")

    monkeypatch.setattr(type(personal), "erase", crash)
    with pytest.raises(SystemExit):
        erase_subject(node.app, personal, f"account-{owner}", REASON, operator)
    monkeypatch.undo()
    assert personal.holds(f"account-{owner}")  # the event is recorded, the key still here
    node.close()
    with open_ledger(store_url, str(node.keys.path), passphrase=PASSPHRASE) as reopened:
        assert not personal.holds(f"account-{owner}")
        assert reopened.casino.owner(owner) == ERASED


def test_a_mirror_and_the_feed_of_an_erased_store_hold_no_value_and_verify(
    node: Node, store_url: str, tmp_path: Path
) -> None:
    """The regulator's copy made after an erasure, and the event feed it reads:
    no personal value in clear, the erasure there, every level of verify passes."""
    _, owner, _, _ = played(node)
    node.keys.create("operator-1", Role.OPERATOR, PASSPHRASE)
    operator = node.keys.signer(Role.OPERATOR, PASSPHRASE)
    assert node.app.personal is not None
    erase_subject(node.app, node.app.personal, f"account-{owner}", REASON, operator)
    node.checkpointer().catch_up()
    api = make_api(node, tmp_path / "api")
    feed = api.get("/v1/events", limit=1000).content
    assert b"SubjectErased" in feed
    assert not found(feed, OWNER, KEPT, DEALER)
    (tmp_path / "mirror").mkdir()
    for copy_url in mirror_url(store_url, tmp_path / "mirror"):
        keyring = node.keys.keyring()  # with the operator key made since the node opened
        with opened_mirror(copy_url, keyring, ClientSource(api), tmp_path / "m") as mirror:
            assert mirror.sync().events == event_count(node.app)
            report = verify_store(
                mirror.app,
                keyring,
                VerifyOptions(
                    level=Level.SETTLEMENT, workers=1, games=get_plugin_manager().games()
                ),
            )
            assert report.erasures == 1
        copied = written_bytes(tmp_path / "mirror", copy_url)
        assert not found(copied, OWNER, KEPT, DEALER)
        assert found(copied, REASON)  # the search reads the copy: it finds this


def test_the_privacy_report_names_what_a_store_recorded_in_clear(
    node: Node, store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store written before sealing: every owner and dealer it holds in clear is
    listed (a house account names no one); a store written now: none."""
    older = tmp_path / "older"
    shutil.copytree(Path(__file__).parents[1] / "data" / "pre-rename-store", older)
    with ledger_cli(f"sqlite:///{older / 'ledger.db'}", older / "keys") as run:
        capsys.readouterr()
        assert run("privacy", "report", "--json") == 0
        captured = capsys.readouterr()
    listed = [json.loads(line) for line in captured.out.splitlines()]
    assert {(v["event"], v["field"]) for v in listed} == {
        ("Account.Opened", "owner"),
        ("Round.Opened", "dealer"),
    }
    assert f"{len(listed)} personal values recorded in clear" in captured.err
    played(node)
    with ledger_cli(store_url, node.keys.path) as run:
        capsys.readouterr()
        assert run("privacy", "report") == 0
    assert capsys.readouterr().out.startswith("no personal value is recorded in clear")
