"""The session's summary, printed from integers and exact fractions only."""

from __future__ import annotations

from fractions import Fraction

from ledger.domain.percent import percent
from ledger.simulation.families import FAMILIES
from ledger.simulation.session import SessionResult
from ledger.simulation.tally import Stakes

EXACT_WIDTH = 9  # show a theoretical return as a fraction when it is this short


def _ratio(part: int, whole: int) -> str:
    return percent(Fraction(part, whole)) if whole else "-"


def _exact(value: Fraction) -> str:
    text = f"{value.numerator}/{value.denominator}"
    return text if len(text) <= EXACT_WIDTH else "mix"


def summary_lines(result: SessionResult) -> list[str]:
    config, tally = result.config, result.tally
    currency = config.currency
    total = tally.total
    settled_bets = total.bets
    dice_tables = [spec for spec in config.tables if spec.variant != "xidach"]
    card_tables = len(config.tables) - len(dice_tables)
    rng_tables = sum(not spec.physical for spec in dice_tables)
    lines = [
        f"session: {len(config.tables)} tables, {config.players} players, {config.rounds} rounds"
        f" in {currency}, fault rate {config.fault_rate}% per shaken throw, seed {config.seed}",
        f"dice: {rng_tables} RNG tables, {tally.seeds_committed} seeds committed before use and "
        f"{tally.seeds_revealed} revealed (a new seed at every dealer shift); "
        f"{len(dice_tables) - rng_tables} physical tables, {tally.device_reports} throws "
        "reported by a signed dealer device",
        f"cards: {card_tables} Xì dách tables; "
        f"{tally.card_reports} cards and decisions at physical ones reported by a signed "
        "dealer device, RNG ones dealt from the round's committed deck",
        f"players: {tally.players_seated} seated, {tally.players_joined} joined, "
        f"{tally.players_left} left, top-ups {tally.top_ups}; deposited {tally.deposited:,}, "
        f"cashed out {tally.withdrawn:,} {currency}",
        f"rounds: {tally.rounds_settled + tally.rounds_voided} ({tally.rounds_settled} settled, "
        f"{tally.rounds_voided} voided); faulty throws: {tally.faults} "
        f"({sum(t.reopened for t in tally.tables.values())} reopened betting)",
        f"bets: {tally.bets_placed:,} placed, {tally.bets_withdrawn:,} withdrawn, "
        f"{tally.bets_voided:,} voided, {settled_bets:,} settled",
        f"turnover: {total.staked:,} {currency}; returned {total.returned:,}; "
        f"house result {total.house:+,} {currency} (hold {_ratio(total.house, total.staked)})",
        "",
        f"{'table':<6} {'variant':<11} {'dice':<6} {'limits: min/max/round':<29} {'rounds':>6} "
        f"{'voided':>6} "
        f"{'faults':>6} {'bets':>6} {'turnover':>15} {'house result':>14} {'hold':>8}",
    ]
    for table in tally.tables.values():
        limits = table.spec.limits
        stakes = table.settled
        limit_text = f"{limits['min_bet']:,}/{limits['max_bet']:,}/{limits['max_round']:,}"
        lines.append(
            f"{table.spec.name:<6} {table.spec.variant:<11} {table.spec.dice:<6} {limit_text:<29} "
            f"{table.rounds:>6} {table.rounds_voided:>6} {table.faults:>6} {stakes.bets:>6,} "
            f"{stakes.staked:>15,} {stakes.house:>+14,} {_ratio(stakes.house, stakes.staked):>8}"
        )
    lines.append(
        f"{'all':<6} {'':<11} {'':<6} {'':<29} {tally.rounds_settled + tally.rounds_voided:>6} "
        f"{tally.rounds_voided:>6} {tally.faults:>6} {total.bets:>6,} {total.staked:>15,} "
        f"{total.house:>+14,} {_ratio(total.house, total.staked):>8}"
    )
    lines += [
        "",
        f"{'game':<14} {'rounds':>6} {'bets':>6} {'turnover':>15} {'house result':>14} "
        f"{'observed return':>16}",
    ]
    for game, (rounds, stakes) in tally.games().items():
        observed = stakes.observed_return
        lines.append(
            f"{game:<14} {rounds:>6} {stakes.bets:>6,} {stakes.staked:>15,} {stakes.house:>+14,} "
            f"{percent(observed) if observed is not None else '-':>16}"
        )
    lines += [
        "",
        f"{'bet family':<16} {'bets':>6} {'staked':>15} {'returned':>15} {'observed':>9} "
        f"{'theory':>9} {'exact':>9}",
    ]
    for family in FAMILIES:
        lines.append(_family_line(family, tally.families[family]))
    lines.append(_family_line("all", tally.dice_bets))
    lines.append(
        "(return = returned / staked on settled bets; theory = the paytable's exact return "
        "for the same stakes)"
    )
    return lines


def _family_line(name: str, stakes: Stakes) -> str:
    observed, theory = stakes.observed_return, stakes.theoretical_return
    return (
        f"{name:<16} {stakes.bets:>6,} {stakes.staked:>15,} {stakes.returned:>15,} "
        f"{percent(observed) if observed is not None else '-':>9} "
        f"{percent(theory) if theory is not None else '-':>9} "
        f"{_exact(theory) if theory is not None else '-':>9}"
    )
