#!/usr/bin/env python3
"""The house edge of Xì dách, measured: many rounds of the pure engine, all cores.

    .venv/bin/python tools/xidach_edge.py [--rounds 1000000] [--seats 5] [--out FILE]

A card game has no exact paytable: its return depends on how players and the
dealer play. This plays `--rounds` rounds per profile with the simple
strategies of `ledger_xidach.strategy` (players draw below 16; the dealer
draws to the minimum, checks what it is ahead of, draws below 17, stops),
every seat taken with the same stake, a fresh shuffled deck per round.

Rounds are split into chunks; chunk i of a profile is seeded from (seed,
profile, i), so the figures do not depend on how many worker processes ran
them. The edge is the house result over the turnover; its 95% confidence
interval treats each round (not each hand: hands share a dealer) as one
independent sample. Writes a JSON summary and prints a text table
(matplotlib is not a dependency, so there is no plot).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ledger_xidach.profile_files import PROFILES
from ledger_xidach.strategy import DealerStrategy, PlayerStrategy, play_round

STAKE = 100  # minor units per seat: 3:2 on 100 is exact
CHUNK = 25_000


@dataclass(frozen=True)
class Chunk:
    profile: str
    index: int
    rounds: int
    seats: int
    seed: int


def chunk_seed(seed: int, profile: str, index: int) -> int:
    digest = hashlib.sha256(f"xidach-edge/{seed}/{profile}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def run_chunk(chunk: Chunk) -> tuple[str, int, int, int, int, int]:
    """(profile, rounds, staked, returned, sum of house result, sum of its square)."""
    rules = PROFILES[chunk.profile]
    rng = random.Random(chunk_seed(chunk.seed, chunk.profile, chunk.index))
    stakes = dict.fromkeys(range(1, chunk.seats + 1), STAKE)
    player, dealer = PlayerStrategy(), DealerStrategy()
    staked = returned = net = net_sq = 0
    for _ in range(chunk.rounds):
        s, r, _actions = play_round(rules, stakes, rng, player, dealer)
        staked += s
        returned += r
        net += s - r
        net_sq += (s - r) ** 2
    return chunk.profile, chunk.rounds, staked, returned, net, net_sq


def summarise(rounds: int, staked: int, returned: int, net: int, net_sq: int) -> dict[str, float]:
    per_round = staked / rounds  # the same every round: every seat, the same stake
    mean = net / rounds
    variance = (net_sq - rounds * mean * mean) / (rounds - 1)
    half = 1.96 * math.sqrt(variance / rounds) / per_round
    edge = net / staked
    return {
        "rounds": rounds,
        "turnover": staked,
        "returned": returned,
        "house_result": net,
        "house_edge": edge,
        "ci95_low": edge - half,
        "ci95_high": edge + half,
        "observed_return": returned / staked,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1_000_000, help="rounds per profile")
    parser.add_argument("--seats", type=int, default=5, help="players per round (1..9)")
    parser.add_argument("--profiles", nargs="*", default=list(PROFILES), choices=list(PROFILES))
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("xidach_edge.json"))
    args = parser.parse_args(argv)
    if args.rounds < 2 or not 1 <= args.seats <= 9 or args.workers < 1:
        parser.error("need --rounds >= 2, --seats 1..9, --workers >= 1")

    chunks = []
    for profile in args.profiles:
        for index, start in enumerate(range(0, args.rounds, CHUNK)):
            size = min(CHUNK, args.rounds - start)
            chunks.append(Chunk(profile, index, size, args.seats, args.seed))
    totals = {p: [0, 0, 0, 0, 0] for p in args.profiles}
    started = time.monotonic()
    with multiprocessing.Pool(args.workers) as pool:
        for profile, n, s, r, net, net_sq in pool.imap_unordered(run_chunk, chunks):
            acc = totals[profile]
            for i, value in enumerate((n, s, r, net, net_sq)):
                acc[i] += value
            print(
                f"{profile}: {acc[0]:,}/{args.rounds:,} rounds, edge so far "
                f"{acc[3] / acc[1]:+.4%} ({time.monotonic() - started:.0f}s)",
                file=sys.stderr,
                flush=True,
            )

    results = {p: summarise(*acc) for p, acc in totals.items()}
    report = {
        "seats": args.seats,
        "stake": STAKE,
        "seed": args.seed,
        "player_strategy": "draw below 16",
        "dealer_strategy": "draw below min; check shown hands it beats and 3+ card hands "
        "from 18; draw below 17; stop",
        "rules": {p: PROFILES[p].profile() for p in args.profiles},
        "results": results,
    }
    args.out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    print(f"{'profile':<14}{'rounds':>11}{'house edge':>12}  95% CI")
    for profile, row in results.items():
        print(
            f"{profile:<14}{row['rounds']:>11,}{row['house_edge']:>+12.4%}  "
            f"[{row['ci95_low']:+.4%}, {row['ci95_high']:+.4%}]"
        )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
