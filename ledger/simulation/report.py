"""The session's summary, printed from integers and exact fractions only."""

from __future__ import annotations

from fractions import Fraction

from ledger.domain.percent import percent
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
    draw_tables = [t.spec for t in tally.tables.values() if not t.turns]
    turn_games = list(dict.fromkeys(t.spec.game for t in tally.tables.values() if t.turns))
    turn_tables = len(tally.tables) - len(draw_tables)
    rng_tables = sum(not spec.physical for spec in draw_tables)
    lines = [
        f"session: {len(config.tables)} tables, {config.players} players, {config.rounds} rounds"
        f" in {currency}, fault rate {config.fault_rate}% per physical draw, seed {config.seed}",
        f"one draw: {rng_tables} RNG tables, {tally.seeds_committed} seeds committed before use "
        f"and {tally.seeds_revealed} revealed (a new seed at every dealer shift); "
        f"{len(draw_tables) - rng_tables} physical tables, {tally.device_reports} draws "
        "reported by a signed dealer device",
        f"turns: {turn_tables} tables ({', '.join(turn_games) or 'none'}); "
        f"{tally.card_reports} moves at physical ones reported by a signed "
        "dealer device, RNG ones drawn from the round's committed seed",
        f"players: {tally.players_seated} seated, {tally.players_joined} joined, "
        f"{tally.players_left} left, top-ups {tally.top_ups}; deposited {tally.deposited:,}, "
        f"cashed out {tally.withdrawn:,} {currency}",
        f"rounds: {tally.rounds_settled + tally.rounds_voided} ({tally.rounds_settled} settled, "
        f"{tally.rounds_voided} voided); faulty draws: {tally.faults} "
        f"({sum(t.reopened for t in tally.tables.values())} reopened betting)",
        f"bets: {tally.bets_placed:,} placed, {tally.bets_withdrawn:,} withdrawn, "
        f"{tally.bets_voided:,} voided, {settled_bets:,} settled",
        f"turnover: {total.staked:,} {currency}; returned {total.returned:,}; "
        f"house result {total.house:+,} {currency} (hold {_ratio(total.house, total.staked)})",
        "",
        f"{'table':<6} {'game':<11} {'draws':<6} {'limits: min/max/round':<29} {'rounds':>6} "
        f"{'voided':>6} "
        f"{'faults':>6} {'bets':>6} {'turnover':>15} {'house result':>14} {'hold':>8}",
    ]
    for table in tally.tables.values():
        limits = table.spec.limits
        stakes = table.settled
        limit_text = f"{limits['min_bet']:,}/{limits['max_bet']:,}/{limits['max_round']:,}"
        lines.append(
            f"{table.spec.name:<6} {table.spec.game:<11} {table.spec.draws:<6} {limit_text:<29} "
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
    for family, stakes in tally.families.items():
        lines.append(_family_line(family, stakes))
    lines.append(_family_line("all", tally.family_bets))
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
