"""A seed is revealed only once every round drawing from it is over, judged by
log position (docs/export.md, "Randomness"), attacked on both stores.

The attacker holds the node key, not the checkpoint key: it re-seals the
table's stream with the seed's reveal moved into a round still in play, just
after that round's last draw (a Xì dách dealer then stops knowing the deck),
and removes the checkpoints it no longer matches. No draw follows the reveal,
so the draw-after-reveal check sees nothing: only the round still in play at
the reveal's log position shows it. The finding holds on the store and on a
whole-log bundle of it, in one chunk or many, on one process or two.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ledger.audit.findings import Findings, Step
from ledger.audit.verify import Level, Sinks, VerifyOptions, verify_log, verify_store
from ledger.casino import Casino
from ledger.crypto.envelope import open_envelope, seal
from ledger.crypto.keys import Role
from ledger.crypto.signing import Signer
from ledger.errors import VerificationError
from ledger.export.bundle_log import BundleLog
from ledger.export.reader import Bundle
from ledger.export.records import decode_payload, split_envelope
from ledger.export.verify_bundle import verify_bundle
from ledger.export.writer import Selection, export_bundle
from ledger.node import Node
from ledger.plugins.manager import get_plugin_manager
from ledger.rng.server import RngServer
from tests.attacker import Attacker, Row
from tests.conftest import PASSPHRASE
from tests.games.test_card_round_outcomes import rng_table
from tests.games.test_xidach_rounds import offered, seated, simple_move

GAMES = get_plugin_manager().games()
LIMITS: Any = {"min_bet": 10, "max_bet": 5_000, "max_round": 10_000}


def xidach_round(casino: Casino, rng: RngServer) -> tuple[str, str]:
    """(table, round): an RNG Xì dách round played to its end."""
    table = rng_table(casino, rng)
    round_id, _ = seated(casino, table, {1: 100, 2: 200})
    moves = 0
    while not (step := offered(casino, round_id))["over"]:
        actor, action = simple_move(step)
        casino.act(request_id=f"m{moves}", round_id=round_id, actor=actor, action=action, rng=rng)
        moves += 1
    return table, round_id


def taixiu_round(casino: Casino, rng: RngServer) -> tuple[str, str]:
    """(table, round): an RNG Tài Xỉu round thrown (which settles it)."""
    table = casino.open_table(
        request_id="t", name="TX", game="taixiu", kind="rng", currency="VND", limits=LIMITS
    )
    casino.commit_seed(request_id="commit", table_id=table, rng=rng)
    player = casino.open_account(request_id="p", owner="an", currency="VND")
    casino.deposit(request_id="d", account_id=player, amount=50_000)
    round_id = casino.open_round(request_id="r", table_id=table, dealer="D")
    casino.place_bet(
        request_id="b", round_id=round_id, account_id=player, bet={"bet": "big"}, stake=1_000
    )
    casino.close_betting(request_id="c", round_id=round_id)
    casino.throw_dice(request_id="throw", round_id=round_id, rng=rng)
    return table, round_id


ROUNDS: dict[str, Callable[[Casino, RngServer], tuple[str, str]]] = {
    "xidach": xidach_round,
    "taixiu": taixiu_round,
}


def _draws(row: Row) -> bool:
    """Whether the event drew dice or cards (an action's `drawn`, an outcome)."""
    payload = decode_payload(split_envelope(row[4])[3])
    return row[3].endswith((":Round.ActionRecorded", ":Round.OutcomeRecorded")) and bool(
        payload.get("drawn", payload.get("outcome"))
    )


def _signed_at(row: Row) -> int:
    signed_at = open_envelope(row[4], stream=row[1], version=row[2]).signed_at
    assert signed_at is not None
    return signed_at


def _resealed(rows: list[Row], table: str, first: int, signer: Signer) -> list[Row]:
    """`rows` with the table's events from index `first` on numbered again in log
    order and sealed again with the node key, each chained to the one before (the
    reveal signed when the event it now follows was: the times stay in order)."""
    out, version, prev = list(rows), 0, b""
    for index, (n, stream, old_version, topic, state) in enumerate(rows):
        if stream != table:
            continue
        version += 1
        envelope = open_envelope(state, stream=stream, version=old_version)
        if index >= first:
            moved = topic.endswith(":GameTable.SeedRevealed")
            signed_at = _signed_at(rows[index - 1] if moved else rows[index])
            state, prev = seal(
                stream=stream,
                version=version,
                event_type=envelope.event_type,
                prev_hash=prev,
                payload=envelope.payload,
                signer=signer,
                signed_at=signed_at,
            )
            out[index] = (n, stream, version, topic, state)
        else:
            assert version == old_version
            prev = envelope.entry_hash
    return out


def reveal_moved_into_the_round(node: Node, table: str, round_id: str) -> int:
    """Move the table's seed reveal to just after the round's last draw, the table
    re-sealed with the node key and the checkpoints no longer matching removed;
    the reveal's new log position."""
    attacker = Attacker(node.app.store_url)
    try:
        rows = attacker.rows()
        reveal = next(
            i for i, r in enumerate(rows) if r[1] == table and r[3].endswith("SeedRevealed")
        )
        last_draw = max(i for i, r in enumerate(rows) if r[1] == round_id and _draws(r))
        at = last_draw + 1
        assert rows[at][1] != table and any(r[1] == round_id for r in rows[at:reveal])
        moved = [*rows[:at], rows[reveal], *rows[at:reveal], *rows[reveal + 1 :]]
        signer = node.keys.signer(Role.LEDGER_NODE, PASSPHRASE)
        resealed = _resealed(moved, table, at, signer)
        ids = [r[0] for r in rows]
        attacker.rewrite([(ids[i], *r[1:]) for i, r in enumerate(resealed)][at:])
        attacker.unanchor_from(at)
    finally:
        attacker.close()
    return at


def store_findings(node: Node, workers: int, chunk: int) -> list[tuple[Any, ...]]:
    found = Findings()
    verify_store(
        node.app,
        node.keyring,
        VerifyOptions(games=GAMES, workers=workers, chunk_leaves=chunk),
        sinks=Sinks(findings=found),
    )
    return [(f.step, f.position, f.round_id) for f in found.items]


def bundle_findings(bundle: Path, node: Node, workers: int, chunk: int) -> list[tuple[Any, ...]]:
    found = Findings()
    log = BundleLog(Bundle(bundle))
    verify_log(
        log,
        node.keyring,
        VerifyOptions(games=GAMES, workers=workers, chunk_leaves=chunk),
        sinks=Sinks(findings=found),
    )
    return [(f.step, f.position, f.round_id) for f in found.items]


@pytest.mark.parametrize("game", ROUNDS)
def test_a_seed_revealed_while_a_round_still_deals_from_it_fails_verify(
    node: Node, tmp_path: Path, game: str
) -> None:
    casino = Casino(node.app, GAMES)
    rng = RngServer(tmp_path / "seeds")
    table, round_id = ROUNDS[game](casino, rng)
    seed_id = casino.retire_seed(request_id="retire", table_id=table, rng=rng)
    node.checkpointer().catch_up()
    keyring = node.keyring
    verify_store(
        node.app, keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES)
    )  # honest: it passes
    at = reveal_moved_into_the_round(node, table, round_id)
    # Re-sealed cleanly: every envelope, chain and remaining checkpoint verifies.
    verify_store(node.app, keyring, VerifyOptions(level=Level.SIGNATURES))
    message = (
        rf"stream {table} version \d+ \(log position {at}\): seed {seed_id} was revealed "
        rf"while round {round_id}, which deals from it, was still in play"
    )
    with pytest.raises(VerificationError, match=message):
        verify_store(node.app, keyring, VerifyOptions(level=Level.SETTLEMENT, games=GAMES))
    expected = [(Step.SOURCES, at, round_id)]  # once, at the reveal, naming the round
    for workers, chunk in ((1, 4096), (2, 8)):
        assert store_findings(node, workers, chunk) == expected
    bundle = tmp_path / "bundle"
    export_bundle(node.app, keyring, bundle, Selection(), GAMES)
    with pytest.raises(VerificationError, match=message):
        verify_bundle(bundle, keyring=keyring, games=GAMES, workers=1, plugins=get_plugin_manager())
    for workers, chunk in ((1, 4096), (2, 8)):
        assert bundle_findings(bundle, node, workers, chunk) == expected
