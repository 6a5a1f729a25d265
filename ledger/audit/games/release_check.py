"""`ledger games check`: would the installed release strand or re-judge the
store's recorded rounds? (docs/plugins.md, "Changing a game's rules or its code")

For every (game id, rules hash, settlement API) the store's rounds pinned,
a game must re-settle them: an installed game declaring those rules, or one an
installed plugin builds from the rules data the store's rules register keeps.
A pinned triple with neither strands its rounds (verify could not check them:
exit 3). Then a sample of each triple's settled rounds is re-settled by that
game, through verify's own checks for one round (`recall_round`): a payout the
installed code computes otherwise is a release that re-judges honest history.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from uuid import UUID

from eventsourcing.persistence import Notification

from ledger.audit.games.recorded_games import games_of_store
from ledger.audit.games.round_facts import OPENED, SETTLED_TOPIC
from ledger.audit.games.round_games import REPLAYS, PinnedGames
from ledger.audit.recall import recall_round
from ledger.crypto.keys import Keyring
from ledger.errors import LedgerError
from ledger.plugins.manager import Plugins
from ledger.plugins.registry import LoadedGame
from ledger.plugins.rules_register import RecordedRules, record_rules, recorded_rules
from ledger.store.application import LedgerApplication

_PAGE = 1_000
# Verify's words for a payout the game settles otherwise (`resettle._compare`).
_PAID = re.compile(r"bet (\S+) returned (\d+), the rules pay (\d+)")
#: Settled rounds re-settled per pinned rules, the most recent first.
SAMPLE = 3


class ReleaseRefusedError(LedgerError):
    """The installed release would strand or re-judge recorded rounds: exit 1,
    as a check that found something wrong."""

    exit_code = 1


@dataclass
class PinnedUse:
    """The rounds of one (game id, rules hash, settlement API), as recorded."""

    game: str
    rules_hash: str
    settlement_api: int
    rounds: int = 0
    played_with: set[str] = field(default_factory=set)  # the plugin versions (information)
    # Settled round ids in log order (the last `keep` of `pinned_uses`).
    settled: deque[str] = field(default_factory=deque)

    def label(self) -> str:
        return f"{self.game} rules {self.rules_hash[:12]} (settlement API {self.settlement_api})"


@dataclass
class GamesCheck:
    uses: list[PinnedUse]
    recorded: list[LoadedGame] = field(default_factory=list)  # rules recorded by this check
    lines: list[str] = field(default_factory=list)  # what passed
    stranded: list[str] = field(default_factory=list)
    rejudged: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.stranded and not self.rejudged

    def problems(self) -> list[str]:
        return [*self.stranded, *self.rejudged]


def pinned_uses(app: LedgerApplication, keep: int | None = None) -> list[PinnedUse]:
    """Every (game id, rules hash, settlement API) the store's rounds opened
    with, read by event type (each `Round.Opened`, then each `Round.Settled`'s
    stream id), sorted; with the ids of its last `keep` settled rounds (None:
    all of them)."""
    uses: dict[tuple[str, str, int], PinnedUse] = {}
    of_round: dict[UUID, PinnedUse] = {}
    for row in _rows(app, OPENED):
        opened = app.mapper.to_domain_event(row)
        key = (
            str(opened.game),  # type: ignore[attr-defined]
            str(opened.rules_hash),  # type: ignore[attr-defined]
            int(getattr(opened, "settlement_api", 1)),
        )
        use = uses.setdefault(key, PinnedUse(*key, settled=deque(maxlen=keep)))
        use.rounds += 1
        use.played_with.add(str(opened.game_version))  # type: ignore[attr-defined]
        of_round[opened.originator_id] = use
    for row in _rows(app, SETTLED_TOPIC):
        round_id = UUID(str(row.originator_id))
        settled = of_round.pop(round_id, None)  # a round settled in steps: counted once
        if settled is not None:
            settled.settled.append(str(round_id))
    return [uses[key] for key in sorted(uses)]


def _rows(app: LedgerApplication, topic: str) -> Iterator[Notification]:
    """The store's events of one type, in log order, a page at a time (the
    store selects them by type: the other events are not handed over)."""
    after = 0
    while batch := app.recorder.select_notifications(
        start=after, limit=_PAGE, topics=[topic], inclusive_of_start=False
    ):
        yield from batch
        after = batch[-1].id


def game_for(games: PinnedGames, use: PinnedUse) -> LoadedGame | None:
    """The game that re-settles `use`'s rounds (as verify finds it), or None."""
    accepted = REPLAYS.get(use.settlement_api, set())
    installed = games.get(use.game)
    if (
        installed is not None
        and installed.rules_hash == use.rules_hash
        and installed.settlement_api in accepted
    ):
        return installed
    built = games.built(use.game, use.rules_hash)
    return built if built is not None and built.settlement_api in accepted else None


def check_release(
    app: LedgerApplication,
    keyring: Keyring,
    plugins: Plugins,
    *,
    record: bool,
    sample: int = SAMPLE,
) -> GamesCheck:
    """The whole check: when `record` (a store open for writing), first record
    in the store's rules register the rules data of every installed game it
    lacks, so no later release can strand the rounds these rules will pin."""
    installed = plugins.games()
    recorded_now = record_rules(app, installed.values()) if record else []
    recorded = recorded_rules(app)
    games = games_of_store(app, installed, plugins.game_from_rules)
    check = check_games(app, keyring, games, recorded, sample)
    check.recorded = recorded_now
    return check


def refuse_if_stranded_or_rejudged(check: GamesCheck) -> None:
    """Refuse the release (one line per problem, exit 1) unless the check passed."""
    if not check.ok:
        problems = check.problems()
        more = f" (and {len(problems) - 1} more: `ledger games check` lists them)"
        raise ReleaseRefusedError(problems[0] + (more if len(problems) > 1 else ""))


def check_games(
    app: LedgerApplication,
    keyring: Keyring,
    games: PinnedGames,
    recorded: list[RecordedRules],
    sample: int = SAMPLE,
) -> GamesCheck:
    """Each pinned use found its game, and `sample` of its settled rounds
    re-settle to the payouts recorded."""
    check = GamesCheck(pinned_uses(app, keep=sample))
    for use in check.uses:
        game = game_for(games, use)
        if game is None:
            check.stranded.append(_stranded(use, games, recorded))
            continue
        how = (
            "installed"
            if games.get(use.game) is game
            else "built from the store's rules register's data"
        )
        resettled = _resettle(app, keyring, games, use, game, sample, check)
        check.lines.append(
            f"{use.label()}: {_count(use.rounds, 'round')}; {game.plugin} {game.version} "
            f"({how}); {_count(resettled, 'settled round')} re-settled with it"
        )
    return check


def _resettle(
    app: LedgerApplication,
    keyring: Keyring,
    games: Mapping[str, LoadedGame],
    use: PinnedUse,
    game: LoadedGame,
    sample: int,
    check: GamesCheck,
) -> int:
    """Re-settle the most recent `sample` settled rounds of `use`; a difference
    is named in `check.rejudged`. The number re-settled."""
    done = 0
    for round_id in reversed(list(use.settled)[-sample:] if sample else []):
        first = app.tables.row_by_stream(round_id, 1)
        if first is None or first[3] is None:
            continue  # archived: its events are in an archive directory, not the store
        recall = recall_round(app, keyring, games, round_id)
        done += 1
        if recall.problems:
            check.rejudged.append(
                f"this release would re-judge recorded rounds of {use.game} (rules "
                f"{use.rules_hash[:12]}, played with {_versions(use)}): round {round_id} "
                f"{_difference(recall.problems[0], game)}; a payout change needs a new rules "
                "version (docs/plugins.md)"
            )
    return done


def _difference(problem: str, game: LoadedGame) -> str:
    """Verify's finding on the round, said as what was paid and what the
    installed code pays (its own words when it is another finding)."""
    found = _PAID.search(problem)
    if found is None:
        return f"fails with {game.plugin} {game.version}: {problem}"
    bet, paid, pays = found.groups()
    code = f"{game.plugin} {game.version}"
    return f"paid {paid} on bet {bet}, the installed code ({code}) pays {pays}"


def _stranded(use: PinnedUse, games: PinnedGames, recorded: list[RecordedRules]) -> str:
    record = next(
        (r for r in recorded if (r.game, r.rules_hash) == (use.game, use.rules_hash)), None
    )
    installed = games.get(use.game)
    now = (
        f"installed: {installed.plugin} {installed.version} (rules {installed.rules_hash[:12]})"
        if installed is not None
        else f"no game {use.game} is installed"
    )
    if record is None:
        why = "the store's rules register holds no rules data for them"
        fix = f"reinstall the plugin release that played them ({_versions(use)})"
    else:
        why = "no installed plugin builds a game from the rules data the store records"
        fix = f"reinstall {record.plugin} {record.plugin_version}"
    return (
        f"this release would strand {_count(use.rounds, 'recorded round')} of {use.label()}: "
        f"{now}; "
        f"{why}: {fix}, or install a release whose plugin declares those rules or rebuilds "
        "them (ledger_game_from_rules)"
    )


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _versions(use: PinnedUse) -> str:
    return ", ".join(sorted(use.played_with))
