"""`verify --level settlement`: everything the events say, re-derived in one
pass over the log (the envelopes were already verified). Each round's events
are folded once into its facts (`ledger.audit.games.round_facts`), which four
numbered steps read:

8. money (`money`): every movement balances, settlements, voids and
   corrections post what their results say, every wallet's events agree
   with its postings, every account a posting names exists;
9. sources (`sources`): every outcome and faulty draw came from where its
   round's table allows: RNG draws recomputed from the round's committed
   seed at its reveal, which comes after every draw and after the end of
   every round on the seed in the log; dealer device reports' signatures
   checked;
10. round rules (`round_rules`): each round's steps in order, operator voids
    only before any draw, the game's fault policy obeyed;
11. payouts (`resettle`): every settlement and correction settled again with
    the round's own game and rules.

With a `Findings` sink every problem is a finding and the pass goes on (a
round with one is not checked further); without one the first problem is
raised. A round no installed game can re-derive is a `not-checked` finding
(`CannotReDeriveError`, exit 3, when raised).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ledger.audit.findings import SETTLEMENT_STEPS as SETTLEMENT_STEPS
from ledger.audit.findings import Finding, Findings, Step
from ledger.audit.games.money import MoneyAudit
from ledger.audit.games.resettle import Resettler
from ledger.audit.games.round_archive import RoundArchive
from ledger.audit.games.round_facts import OPENED, ROUND_TOPICS, RoundFacts, RoundFold
from ledger.audit.games.round_games import RoundGames
from ledger.audit.games.round_rules import RoundRulesAudit
from ledger.audit.games.sources import SEED_REVEALED, Located, SourceAudit, in_play_at_reveal
from ledger.audit.log.key_times import Coverage, SignedWhen
from ledger.audit.log.log_events import Event
from ledger.crypto.keys import Keyring
from ledger.domain.round_records import SETTLED, VOIDED
from ledger.domain.stored_names import RENAMED_TOPICS, current_names
from ledger.errors import CannotReDeriveError, FindingKind, LedgerError, VerificationError
from ledger.plugins.registry import LoadedGame

#: A payload missing a field or of the wrong shape: what reading it raises.
_MALFORMED = (KeyError, TypeError, ValueError, AttributeError, IndexError)


@dataclass(frozen=True)
class SettlementCounts:
    movements: int  # money movements balanced
    wallets: int  # wallets whose events matched their postings
    rounds: int  # rounds whose life and fault policy were re-derived
    faults: int  # faulty draws whose policy consequence was re-derived
    resettled: int  # settlements and corrections settled again
    bets: int  # bet returns re-derived
    rng_dice: int  # RNG dice draws recomputed from their round's revealed seed
    rng_pending: int  # RNG dice draws whose seed is still secret: NOT recomputed
    device_reports: int  # dealer device reports whose signature verified
    rng_cards: int = 0  # RNG card draws recomputed from their round's shuffled deck
    rng_cards_pending: int = 0  # RNG card draws whose seed is still secret: NOT recomputed
    # (game, version played, version re-derived, rounds): re-derived by other code
    # than played them (same rules hash and API): information, not a failure.
    other_code: tuple[tuple[str, str, str, int], ...] = ()


def check_settlement(
    log: Iterable[Event],
    keyring: Keyring,
    games: Mapping[str, LoadedGame],
    coverage: Coverage | None = None,
    findings: Findings | None = None,
) -> SettlementCounts:
    """Run every settlement check over the log's events (already verified, in log
    order). `coverage` gives the first checkpoint covering each event, which
    the keys of the actors' signatures are judged by (none: nothing is
    covered, a revoked key signs nothing). With `findings`, every problem is
    added there; without, the first is raised."""
    audit = SettlementAudit(keyring, games, coverage, findings)
    for event in log:
        audit.observe(event)
    return audit.finish()


class SettlementAudit:
    """The settlement level over one log, event by event."""

    def __init__(
        self,
        keyring: Keyring,
        games: Mapping[str, LoadedGame],
        coverage: Coverage | None = None,
        findings: Findings | None = None,
        *,
        raise_unknown: bool = True,
        steps: Collection[Step] = SETTLEMENT_STEPS,
        archive: RoundArchive | None = None,
    ) -> None:
        """`raise_unknown`: without a findings sink, whether a round no installed
        game re-derives raises (else its money and sources are still checked,
        and `cannot` says why its rules were not). `steps`: which of the four
        run (a partial bundle has no wallets or seeds to check)."""
        self.steps = frozenset(steps)
        self.coverage = coverage or Coverage([])
        self.findings = findings
        self.raise_unknown = raise_unknown
        self.cannot: str | None = None
        self.games = RoundGames(games)
        self.facts: dict[str, RoundFacts] = {}  # rounds not yet over
        self.archive = archive if archive is not None else RoundArchive()  # rounds over
        self._games: dict[tuple[str, str, int], LoadedGame] = {}
        # (game, version played, version re-derived) -> rounds: information only.
        self.other_code: dict[tuple[str, str, str], int] = {}
        self.fold = RoundFold()
        self.money = MoneyAudit(keyring)
        self.sources = SourceAudit(keyring)
        self.rules = RoundRulesAudit()
        self.payouts = Resettler()
        self.rounds = 0  # rounds whose game re-derives them

    def observe(self, event: Event) -> None:
        position, stream, version, topic, state, signed_at = event
        if self.findings is not None and self.findings.altered_at(position):
            return  # its payload is not what was signed: its finding is listed
        where = f"stream {stream} version {version} (log position {position})"
        when = self.coverage.when(position, signed_at)
        self.check(stream, topic, state, where, when, position, v1=signed_at is None)

    def check(
        self,
        stream: str,
        topic: str,
        state: dict[str, Any],
        where: str,
        when: SignedWhen,
        position: int | None = None,
        *,
        v1: bool = False,
    ) -> None:
        """One event: every check reads the facts before it, then the fold applies it.
        `v1`: its envelope is format v1 (written by release 0.1). An opening
        event is read under the names it has now, whatever names it was
        stored under (`ledger.domain.stored_names`)."""
        if topic in RENAMED_TOPICS:
            state = current_names(topic, state)
        facts = self.facts.get(stream)
        if facts is None and stream in self.archive:  # an event after its round ended
            facts = self._unarchive(stream)
        try:
            if topic == OPENED and facts is None and "game" in state:
                facts = self._opened(stream, state, position)
        except _MALFORMED as exc:
            self._found(Step.RULES, _malformed(topic, exc, where), position, stream, None)
        if Step.MONEY in self.steps:
            try:
                self.money.observe(stream, topic, state, where, when, facts)
            except (VerificationError, *_MALFORMED) as exc:
                self._found(Step.MONEY, _malformed(topic, exc, where), position, stream, facts)
        if Step.SOURCES in self.steps and (facts is None or not facts.tainted):
            try:
                self.sources.observe(
                    stream,
                    topic,
                    state,
                    Located(position, stream, where),
                    when,
                    facts,
                    release="0.1" if v1 else None,
                )
            except (VerificationError, *_MALFORMED) as exc:
                self._found(Step.SOURCES, _malformed(topic, exc, where), position, stream, facts)
            else:
                if topic == SEED_REVEALED:
                    self._in_play_at_reveal(state["seed_id"], where, position, stream)
            self._reveals()
        if facts is None or topic not in ROUND_TOPICS:
            return
        if facts.game is not None and not facts.tainted:
            for step, check in ((Step.RULES, self.rules), (Step.PAYOUTS, self.payouts)):
                try:
                    check.observe(facts, topic, state, where)
                except (VerificationError, *_MALFORMED) as exc:
                    self._found(step, _malformed(topic, exc, where), position, stream, facts)
                    break
        try:
            self.fold.apply(facts, topic, state)
        except (LedgerError, *_MALFORMED) as exc:
            if not facts.tainted:  # a check already said what is wrong otherwise
                self._found(Step.RULES, _malformed(topic, exc, where), position, stream, facts)
            facts.tainted = True
        if facts.status in (SETTLED, VOIDED):  # over: out of memory until named again
            del self.facts[stream]
            self.archive.put(stream, facts.to_json())

    def saved(self) -> dict[str, Any]:
        """Everything the next events need (`ledger.audit.verify_state`), taken
        after the last event and before `finish`; the ended rounds' archive is
        saved beside it (`archive.save_to`)."""
        return {
            "money": self.money.saved(),
            "sources": self.sources.saved(),
            "open": [facts.to_json() for facts in self.facts.values()],
            "archive": self.archive.index,
            "rounds": self.rounds,
            "faults": self.rules.faults,
            "resettled": [self.payouts.resettled, self.payouts.bets],
            "other_code": [[*key, n] for key, n in sorted(self.other_code.items())],
        }

    def restore(self, data: dict[str, Any], archive: RoundArchive) -> None:
        """Go on from a saved state (`saved`), its ended rounds in `archive`."""
        self.money.restore(data["money"])
        self.sources.restore(data["sources"])
        self.archive = archive
        for facts in data["open"]:
            self.facts[str(facts["round_id"])] = self._revived(facts)
        self.rounds = int(data["rounds"])
        self.rules.faults = int(data["faults"])
        self.payouts.resettled, self.payouts.bets = map(int, data["resettled"])
        self.other_code = {(g, p, v): int(n) for g, p, v, n in data["other_code"]}

    def _unarchive(self, stream: str) -> RoundFacts:
        facts = self.facts[stream] = self._revived(self.archive.take(stream))
        return facts

    def _revived(self, data: dict[str, Any]) -> RoundFacts:
        """A round's facts read back, with the game its pins name."""
        pins = data["pins"]
        game = self._games.get(_pinned(pins)) if pins else None
        if game is None and pins:
            try:
                game = self.games.of(str(data["round_id"]), pins)
            except CannotReDeriveError:
                game = None
        return RoundFacts.from_json(data, game)

    def _opened(self, stream: str, state: dict[str, Any], position: int | None) -> RoundFacts:
        game: LoadedGame | None = None
        pins = {k: state.get(k) for k in _PINS}
        try:
            game = self._games.get(_pinned(pins)) or self.games.of(stream, state)
            self._games[_pinned(pins)] = game
            self.rounds += 1
            played = (str(pins["game_version"]), str(pins["code_hash"] or ""))
            if played != (game.version, game.code_hash):
                info = (game.id, played[0], game.version)
                self.other_code[info] = self.other_code.get(info, 0) + 1
        except CannotReDeriveError as exc:
            self.cannot = str(exc)
            if self.findings is not None or self.raise_unknown:
                self._found(Step.RULES, exc, position, stream, None, round_id=stream)
        facts = self.facts[stream] = RoundFacts(
            round_id=stream,
            game_id=str(state["game"]),
            game=game,
            house=str(state["house_account"]),
            currency=state["currency"],
            table_id=str(state["table_id"]),
            seed=state.get("seed_id"),
            pins=pins,
        )
        return facts

    def _found(
        self,
        step: Step,
        exc: LedgerError,
        position: int | None,
        stream: str | None,
        facts: RoundFacts | None,
        round_id: str | None = None,
    ) -> None:
        """A problem: raised at once without a findings sink; else a finding, and
        the rest of its round is not checked (what follows from it would repeat it)."""
        if self.findings is None:
            raise exc
        if facts is not None:
            facts.tainted = True
            round_id = facts.round_id
        self.findings.add_error(
            step,
            exc,
            kind=FindingKind.RULE_BROKEN,
            position=position,
            stream=stream,
            round_id=round_id,
        )

    def _in_play_at_reveal(
        self, seed_id: object, where: str, position: int | None, table: str
    ) -> None:
        """Every round the log has opened on the seed just revealed and not yet ended
        (this pass reads in log order: the reveal's log position decides)."""
        for facts, problem in in_play_at_reveal(seed_id, list(self.facts.values()), where):
            self._found(Step.SOURCES, problem, position, table, facts)

    def _reveals(self) -> None:
        """Problems the sources check found late (RNG draws recomputed at a reveal)
        and draws accepted under an older release's rules."""
        sources = self.sources
        while sources.late:
            late = sources.late.pop(0)
            round_facts = self.facts.get(late.at.stream)
            self._found(Step.SOURCES, late.error, late.at.position, late.at.stream, round_facts)
        while sources.older:
            older = sources.older.pop(0)
            if self.findings is None:
                raise VerificationError(older.message)
            at = older.at
            self.findings.add(
                Finding(
                    FindingKind.OLDER_RELEASE,
                    Step.SOURCES,
                    older.message,
                    at.position,
                    at.stream,
                    at.stream,
                    older.rule,
                    older.release,
                )
            )

    def finish(self) -> SettlementCounts:
        for problem in self.money.finish():
            where = problem.where or ""
            self._found(Step.MONEY, problem, None, where.split(" ", 1)[-1] or None, None)
        rng_pending, cards_pending = self.sources.pending()
        return SettlementCounts(
            movements=self.money.movements,
            wallets=self.money.wallets,
            rounds=self.rounds,
            faults=self.rules.faults,
            resettled=self.payouts.resettled,
            bets=self.payouts.bets,
            rng_dice=self.sources.rng_dice,
            rng_pending=rng_pending,
            device_reports=self.sources.device_reports,
            rng_cards=self.sources.cards_checked,
            rng_cards_pending=cards_pending,
            other_code=tuple(
                (game, played, now, n) for (game, played, now), n in sorted(self.other_code.items())
            ),
        )


#: What a round's Round.Opened pins its game by (`RoundGames.of` reads them).
_PINS = ("game", "rules_hash", "settlement_api", "game_version", "code_hash")


def _pinned(pins: Mapping[str, Any]) -> tuple[str, str, int]:
    return str(pins["game"]), str(pins["rules_hash"]), int(pins.get("settlement_api") or 1)


def _malformed(topic: str, exc: BaseException, where: str) -> LedgerError:
    """A check's own error as it is; a payload it could not read, said so."""
    if isinstance(exc, LedgerError):
        return exc
    name = topic.rsplit(".", 1)[-1].rsplit(":", 1)[-1]
    what = f"no field {exc}" if isinstance(exc, KeyError) else str(exc)
    return VerificationError(f"a malformed {name} payload ({what})", where=where)
