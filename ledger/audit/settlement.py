"""`verify --level settlement`: everything the events say, re-derived in one
pass over the log (the envelopes were already verified), as a checklist:

1. money (`money`): every movement balances, settlements, voids and
   corrections post what their results say, every wallet's events agree
   with its postings, every account a posting names exists;
2. sources (`sources`): every outcome and faulty throw came from where its
   round's table allows: RNG throws recomputed from the round's committed
   seed, dealer device reports' signatures checked;
3. round rules (`round_rules`): each round's steps in order, operator voids
   only before an outcome, the variant's fault policy obeyed;
4. payouts (`resettle`): every settlement and correction settled again with
   the round's own variant version and rules.

A round no installed variant can re-derive (not installed, or blocked) stops it
with `CannotReDeriveError` (exit 3).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from eventsourcing.persistence import Transcoder

from ledger.audit.key_times import Coverage
from ledger.audit.money import MoneyAudit
from ledger.audit.resettle import Resettler
from ledger.audit.round_rules import RoundRulesAudit
from ledger.audit.round_variants import RoundVariants
from ledger.audit.sources import SourceAudit
from ledger.crypto.envelope import open_envelope
from ledger.crypto.keys import Keyring
from ledger.plugins.registry import LoadedGame as Variant
from ledger.store.merkle_log import MerkleLogTables, stream_of

READ_BATCH = 5000

# (log position, stream, version, topic, payload, signing time µs or None for v1) of one event.
Event = tuple[int, str, int, str, dict[str, Any], int | None]


@dataclass(frozen=True)
class SettlementCounts:
    movements: int  # money movements balanced
    wallets: int  # wallets whose events matched their postings
    rounds: int  # rounds whose life and fault policy were re-derived
    faults: int  # faulty throws whose policy consequence was re-derived
    resettled: int  # settlements and corrections settled again
    bets: int  # bet returns re-derived
    rng_throws: int  # RNG throws recomputed from their round's revealed seed
    rng_pending: int  # RNG throws whose seed is still secret: NOT recomputed
    device_reports: int  # dealer device reports whose signature verified
    rng_cards: int = 0  # RNG card draws recomputed from their round's shuffled deck
    rng_cards_pending: int = 0  # RNG card draws whose seed is still secret: NOT recomputed
    # (game, version played, version re-derived, rounds): re-derived by other code
    # than played them (same rules hash and API): information, not a failure.
    other_code: tuple[tuple[str, str, str, int], ...] = ()


def events(
    tables: MerkleLogTables, transcoder: Transcoder, progress: Callable[[int], None] | None
) -> Iterator[Event]:
    """Every event of a store, in log order."""
    position, after = 0, 0
    while rows := tables.rows_after(after, READ_BATCH):
        if progress:
            progress(len(rows))
        for _, originator_id, version, topic, state in rows:
            stream = stream_of(originator_id)
            envelope = open_envelope(bytes(state), stream=stream, version=version)
            payload = transcoder.decode(envelope.payload)
            yield position, stream, version, topic, payload, envelope.signed_at
            position += 1
        after = rows[-1][0]


def check_settlement(
    log: Iterable[Event],
    keyring: Keyring,
    variants: Mapping[str, Variant],
    coverage: Coverage | None = None,
) -> SettlementCounts:
    """Run every settlement check over the log's events (already verified, in log
    order); raise the first `VerificationError`. `coverage` gives the first
    checkpoint covering each event, which the keys of the actors' signatures
    are judged by (none: nothing is covered, a revoked key signs nothing)."""
    coverage = coverage or Coverage([])
    rounds = RoundVariants(variants)
    money = MoneyAudit(keyring)
    sources = SourceAudit(keyring)
    rules = RoundRulesAudit(rounds)
    payouts = Resettler(rounds)
    for position, stream, version, topic, state, signed_at in log:
        where = f"stream {stream} version {version} (log position {position})"
        when = coverage.when(position, signed_at)
        money.observe(stream, topic, state, where, when)
        sources.observe(stream, topic, state, where, when)
        rules.observe(stream, topic, state, where)
        payouts.observe(stream, topic, state, where)
    money.finish()
    recomputed, pending = sources.finish()
    return SettlementCounts(
        movements=money.movements,
        wallets=money.wallets,
        rounds=rules.checked,
        faults=rules.faults,
        resettled=payouts.resettled,
        bets=payouts.bets,
        rng_throws=recomputed,
        rng_pending=pending,
        device_reports=sources.device_reports,
        rng_cards=sources.cards_checked,
        rng_cards_pending=sources.cards_pending,
        other_code=tuple(
            (game, played, now, n) for (game, played, now), n in sorted(rounds.other_code.items())
        ),
    )
