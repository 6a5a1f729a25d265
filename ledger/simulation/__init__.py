"""`ledger simulate`: a realistic casino session recorded on the ledger.

- `config`: the tables, players, rounds and fault rate of a session;
- `dice_source`: the RNG the tables commit to and draw from (one place to swap);
- `behaviour`: how players and dealers choose (one seeded `random.Random`);
  which bet and how bold a stake is the game's to say (`SimulatedPlay`);
- `players`: wallets, deposits, top-ups and cashing out;
- `session`: the rounds, through the casino's API (one-draw rounds);
- `turns`: rounds of turns, played by the game's own strategies;
- `tally`: what happened, in integers; `report`: the summary.
"""

from __future__ import annotations

from ledger.domain.percent import percent
from ledger.simulation.config import SessionConfig, TableSpec, check_config, default_tables
from ledger.simulation.dice_source import SessionRng, dice_source, parse_seed
from ledger.simulation.report import summary_lines
from ledger.simulation.session import SessionResult, run_session

__all__ = [
    "SessionConfig",
    "SessionResult",
    "SessionRng",
    "TableSpec",
    "check_config",
    "default_tables",
    "dice_source",
    "parse_seed",
    "percent",
    "run_session",
    "summary_lines",
]
