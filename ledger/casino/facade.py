"""`Casino`, the documented Python API: accounts, tables, rounds and their
play on a sealed ledger, each command idempotent by request id.

Every command is one call of the command runner (`ledger.casino.runner`):
applied in order with the commands arriving with it, on the live aggregates
of the node's working set, refused before anything is recorded, and saved
with the request's record in one commit shared with the others. The modules
beside this one each hold one job: accounts, tables and bets, seeds, round
play (settlement API 2: one generation; a round still open under API 1 is
refused until `migrate` ends it), corrections, payouts, who may state an
outcome, batches of bets, the migration.
"""

from __future__ import annotations

import copy
import dataclasses
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any
from uuid import UUID, uuid4

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate

from ledger.casino import accounts, aliases, corrections, migrate, rounds, seeds, tables
from ledger.casino.bet_batches import MAX_BETS, BetOutcome, BetRequest, outcome, refused
from ledger.casino.bet_channel import BetChannel
from ledger.casino.context import Context
from ledger.casino.fact_to_sign import FactRecorder, OperatorCommand, operator_body
from ledger.casino.legality import offered_moves, step_of
from ledger.casino.migrate import Migration
from ledger.casino.runner import SESSION_ARG, A, BatchSettings, CommandRunner
from ledger.crypto.signing import Signer
from ledger.domain.account import PLAYER, Account
from ledger.domain.aliases import game_named
from ledger.domain.asked_by import by_problem
from ledger.domain.game_table import GameTable
from ledger.domain.names import check_name
from ledger.domain.round import Round
from ledger.domain.round_records import BetResult, Limits
from ledger.domain.stored_names import OPEN_TABLE_GAME_ARG
from ledger.errors import InvalidCommandError, LedgerError
from ledger.games.step_cache import StepCache
from ledger.plugins.registry import LoadedGame
from ledger.rng.server import RngServer
from ledger.store.application import LedgerApplication
from ledger.store.stream_ids import Kind, parse_id, require_aggregate

ROUND_TABLES = 10_000  # rounds whose table is remembered


class Casino:
    """Accounts, tables and rounds on a sealed ledger."""

    def __init__(
        self,
        app: LedgerApplication,
        games: Mapping[str, LoadedGame],
        *,
        max_attempts: int = 50,
        batch: BatchSettings | None = None,
    ) -> None:
        self.app = app
        self.games = games
        self.context = Context(app, games)
        self.runner = CommandRunner(app, batch, max_attempts=max_attempts)
        self._round_tables: OrderedDict[str, str] = OrderedDict()
        self._bets_to: BetChannel | None = None
        self._by: dict[str, str] | None = None  # who asked (`asked_by`)

    def asked_by(self, by: Mapping[str, str]) -> Casino:
        """This casino, its commands asked by an authenticated session (`by`:
        {"token": id, "role": API role}, as `ledger.domain.asked_by` checks it):
        each command's request is bound to it (the same request id from another
        session is refused, `RequestIdReusedError`), and an action the node
        records as its own command or RNG draw names it as its `by`. The HTTP
        API asks every command through one; the CLI's are the node's own."""
        if (problem := by_problem(dict(by))) is not None:
            raise InvalidCommandError(
                f"the session that asked is malformed: {problem}", code="invalid_value"
            )
        bound = copy.copy(self)
        bound._by = dict(by)
        return bound

    def _run(self, command: str, request_id: str, args: dict[str, Any], body: Any) -> Any:
        return self.runner.run(command, request_id, _bound(args, self._by), body)

    def send_bets_to(self, path: str) -> None:
        """Place bets through the node's writer process listening on the Unix
        socket `path` (`ledger serve`'s, `ledger.http.writer_process`); every
        other command stays here. Raises OSError when it cannot be reached."""
        self._bets_to = BetChannel.to_writer_process(path, self.submit_bets_here)

    def stop_sending_bets(self) -> None:
        """Place bets here from now on (a serving worker shutting down hangs up)."""
        if self._bets_to is not None:
            self._bets_to.close()

    @property
    def steps(self) -> StepCache:
        """Each round's last replay, so a command continues it."""
        return self.context.steps

    # Reading: copies of the aggregates as the store holds them now.
    def _get(
        self, cls: type[A], aggregate_id: UUID | str, kind: Kind, version: int | None = None
    ) -> A:
        """The aggregate `aggregate_id` names when it is a `kind` (else the one
        refusal of `ledger.store.stream_ids`: unknown, or of another kind); at
        `version`, when given (1: as it was opened, one event read)."""
        key = parse_id(aggregate_id, kind)
        try:
            found: Aggregate | None = self.app.repository.get(key, version=version)
        except AggregateNotFoundError:
            found = None
        checked = require_aggregate(found, aggregate_id, kind, self.app.tables)
        assert isinstance(checked, cls)
        return checked

    def account(self, account_id: UUID | str) -> Account:
        return self._get(Account, account_id, Kind.ACCOUNT)

    def owner(self, account_id: UUID | str) -> str:
        """The account's owner in clear (the node's vault opened: its passphrase),
        `[erased]` once erased; `account(...).owner` is the value as sealed."""
        return self.context.personal.reveal("owner", self.account(account_id).owner)

    def round(self, round_id: UUID | str) -> Round:
        return self._get(Round, round_id, Kind.ROUND)

    def table(self, table_id: UUID | str) -> GameTable:
        return self._get(GameTable, table_id, Kind.TABLE)

    def fact_to_sign(
        self,
        *,
        command: OperatorCommand,
        round_id: str,
        key_id: str,
        reason: str,
        outcome: dict[str, Any] | None = None,
        step: int | None = None,
        drawn: list[int] | None = None,
    ) -> bytes:
        """The exact bytes operator key `key_id` must sign (Ed25519) for `command`
        (void, resume, correct, correct_step) with these arguments: the command
        runs dry, so a command that would be refused is refused now, and nothing
        is recorded. Send the signature with the command itself."""
        signer = FactRecorder(key_id)
        body = operator_body(
            self.context, command, round_id, reason, signer, outcome=outcome, step=step, drawn=drawn
        )
        self.runner.run(command, f"fact-to-sign-{uuid4()}", {}, body, dry=True)
        if signer.message is None:  # every operator command signs its fact
            raise RuntimeError(f"{command} finished without asking for a signature")
        return signer.message

    def moves(self, round_id: UUID | str) -> dict[str, list[str]]:
        """Who may do what next in a round, from its game's step (`act` takes one);
        empty once it is over, and for a round of settlement API 1, which takes
        no move (`migrate` ends one still open)."""
        game_round = self.round(round_id)
        if game_round.settlement_api < 2:
            return {}
        game = self.context.game_of(game_round)
        return offered_moves(game, step_of(self.context, game, game_round), game_round)

    def game(self, game_id: str) -> LoadedGame:
        """The installed game `game_id` (NotFoundError when none is)."""
        return self.context.game(game_id)

    def known_table_of_round(self, round_id: UUID | str) -> str | None:
        """The table of a round already looked up (no read: None when not yet)."""
        return self._round_tables.get(str(round_id))

    def table_of_round(self, round_id: UUID | str) -> str:
        """The table a round is played at (read once, from the round's first event
        alone: a round never moves, and one taking bets may hold thousands)."""
        key = str(round_id)
        found = self._round_tables.get(key)
        if found is None:
            opened = self._get(Round, round_id, Kind.ROUND, version=1)
            found = self._round_tables[key] = str(opened.table_id)
            if len(self._round_tables) > ROUND_TABLES:
                self._round_tables.popitem(last=False)
        return found

    # Accounts.
    def open_account(
        self, *, request_id: str, owner: str, currency: str, kind: str = PLAYER
    ) -> str:
        check_name(owner, "owner", param="owner")  # before a key or a tag is made for it
        personal = self.context.personal
        args = {"owner": personal.tag("owner", owner), "currency": currency, "kind": kind}
        body = accounts.open_account(personal, kind, owner, currency)
        return str(self._run("open_account", request_id, args, body))

    def deposit(self, *, request_id: str, account_id: str, amount: int) -> int:
        args = {"account_id": str(account_id), "amount": amount}
        body = accounts.deposit(request_id, account_id, amount)
        return int(self._run("deposit", request_id, args, body))

    def withdraw(self, *, request_id: str, account_id: str, amount: int) -> int:
        args = {"account_id": str(account_id), "amount": amount}
        body = accounts.withdraw(request_id, account_id, amount)
        return int(self._run("withdraw", request_id, args, body))

    def close_account(self, *, request_id: str, account_id: str, reason: str) -> None:
        body = accounts.close_account(account_id, reason)
        self._run("close_account", request_id, {"account_id": str(account_id)}, body)

    # Tables, rounds and bets.
    def open_table(
        self,
        *,
        request_id: str,
        name: str,
        game: str | None = None,
        kind: str,
        currency: str,
        limits: Limits,
        variant: str | None = None,  # alias
    ) -> str:
        """Open a table of `game` (its id; required), as an RNG table
        (`kind="rng"`: commit a seed, then its rounds draw from it) or a
        physical one (`"physical"`: its dealer device reports every outcome);
        its id. The game's older keyword is an alias (`ledger.casino.aliases`)."""
        named = game_named(game, variant)  # alias
        args = {
            "name": name,
            OPEN_TABLE_GAME_ARG: named,  # its stored name: a retry made before matches
            "kind": kind,
            "currency": currency,
            "limits": dict(limits),
        }
        body = tables.open_table(self.context, name, named, kind, currency, limits)
        return str(self._run("open_table", request_id, args, body))

    def open_round(self, *, request_id: str, table_id: str, dealer: str) -> str:
        check_name(dealer, "dealer", param="dealer")
        args = {"table_id": str(table_id), "dealer": self.context.personal.tag("dealer", dealer)}
        body = tables.open_round(self.context, table_id, dealer)
        return str(self._run("open_round", request_id, args, body))

    def place_bet(
        self, *, request_id: str, round_id: str, account_id: str, bet: dict[str, Any], stake: int
    ) -> str:
        """Place a bet from a wallet (the stake leaves it now); its id."""
        return str(
            self.submit_bet(
                request_id=request_id,
                round_id=round_id,
                account_id=account_id,
                bet=bet,
                stake=stake,
            ).result()
        )

    def submit_bet(
        self, *, request_id: str, round_id: str, account_id: str, bet: dict[str, Any], stake: int
    ) -> Future[str]:
        """`place_bet`, answered through a future once its batch commits: for a
        caller that must not block on it (the HTTP API's betting window awaits
        it with `asyncio.wrap_future`)."""
        if self._bets_to is not None:
            request = BetRequest(request_id, str(account_id), bet, stake, self._by)
            return self._bets_to.submit(str(round_id), [request])[0]
        return self._submit_bet_here(request_id, round_id, account_id, bet, stake, self._by)

    def _submit_bet_here(
        self,
        request_id: str,
        round_id: str,
        account_id: str,
        bet: dict[str, Any],
        stake: int,
        by: Mapping[str, str] | None,
    ) -> Future[str]:
        args = {
            "round_id": str(round_id),
            "account_id": str(account_id),
            "bet": bet,
            "stake": stake,
        }
        body = tables.place_bet(self.context, request_id, round_id, account_id, bet, stake)
        return self.runner.submit(
            "place_bet", request_id, _bound(args, by), body, recorded_in_event=True
        )

    def submit_bets_here(self, round_id: str, bets: Sequence[BetRequest]) -> list[Future[str]]:
        """Each bet placed by this process's runner (the writer's own placing; a
        bet it refuses at once holds its error)."""
        answers: list[Future[str]] = []
        for request in bets:
            try:
                answer = self._submit_bet_here(
                    request.request_id,
                    round_id,
                    request.account_id,
                    request.bet,
                    request.stake,
                    request.attested_by,
                )
            except LedgerError as error:  # e.g. a request id out of bounds
                answer = refused(error)
            answers.append(answer)
        return answers

    def place_bets(self, *, round_id: str, bets: Sequence[BetRequest]) -> list[BetOutcome]:
        """Place up to `MAX_BETS` bets on one round, each on its own (see
        `ledger.casino.bet_batches`): their outcomes, in order, once committed."""
        answers = self.submit_bets(round_id=round_id, bets=bets)
        return [outcome(request, answer) for request, answer in zip(bets, answers, strict=True)]

    def submit_bets(self, *, round_id: str, bets: Sequence[BetRequest]) -> list[Future[str]]:
        """`place_bets`, each bet answered through a future once its commit is
        durable (a refused bet's future holds its error). A batch of no bets or
        more than `MAX_BETS`, or for no round, is refused whole (raised)."""
        if not 0 < len(bets) <= MAX_BETS:
            raise InvalidCommandError(
                f"a batch holds 1..{MAX_BETS} bets, not {len(bets)}",
                code="invalid_value",
                param="bets",
            )
        self.table_of_round(round_id)  # no such round: the batch is refused whole
        if self._by is not None:  # each bet asked by this casino's session
            bets = [dataclasses.replace(b, attested_by=self._by) for b in bets]
        if self._bets_to is not None:
            return self._bets_to.submit(str(round_id), bets)
        return self.submit_bets_here(str(round_id), bets)

    def withdraw_bet(self, *, request_id: str, round_id: str, account_id: str, bet_id: str) -> None:
        args = {"round_id": str(round_id), "account_id": str(account_id), "bet_id": bet_id}
        body = tables.withdraw_bet(self.context, request_id, round_id, account_id, bet_id)
        self._run("withdraw_bet", request_id, args, body)

    # Seeds.
    def commit_seed(self, *, request_id: str, table_id: str, rng: RngServer) -> str:
        """Commit the table to a new secret seed (its SHA-256, in a signed event)
        before any round draws from it."""
        body = seeds.commit_seed(table_id, rng)
        return str(self._run("commit_seed", request_id, {"table_id": str(table_id)}, body))

    def retire_seed(self, *, request_id: str, table_id: str, rng: RngServer) -> str:
        """Reveal the table's seed, so anyone can recompute every draw made with it."""
        body = seeds.retire_seed(table_id, rng)
        return str(self._run("retire_seed", request_id, {"table_id": str(table_id)}, body))

    # Play: `act`, the one play command.
    def act(
        self,
        *,
        request_id: str,
        round_id: str,
        actor: str,
        action: str,
        args: Mapping[str, Any] | None = None,
        source: dict[str, Any] | None = None,
        rng: RngServer | None = None,
        attested_by: Mapping[str, str] | None = None,
    ) -> Any:
        """Take one of the moves the game offers now: legality from its last step
        (an illegal move is refused naming round, actor and action, and nothing
        is recorded), randomness drawn by the core (RNG, `rng`: dice from the
        round's committed seed, cards from its shuffled deck by position) or
        taken from a dealer device's signed report (`source`,
        `ledger.devices.action_report`). Settlement API 2 rounds record it as
        `Round.ActionRecorded`, then settle in the same commit whatever bets the
        game's step settles (`Round.Settled` of that step) or void it.

        `attested_by` ({"token": id, "role": API role}: the HTTP API's
        authenticated session) is recorded as the `by` of a command-sourced
        action, the node's statement of who asked (`ledger.domain.asked_by`);
        without it such an action is the node's own command. It is part of the
        request: the same request id from another session is refused."""
        given = attested_by if attested_by is not None else self._by
        by = None if given is None else dict(given)
        if by is not None and (problem := by_problem(by)) is not None:
            raise InvalidCommandError(
                f"act: the session that asked is malformed: {problem}", code="invalid_value"
            )
        fingerprint_args: dict[str, Any] = {
            "round_id": str(round_id),
            "actor": actor,
            "action": action,
            "args": dict(args or {}),
            "source": source,
        }
        if by is not None:  # only when given: an earlier request's fingerprint is unchanged
            fingerprint_args[SESSION_ARG] = by
        body = rounds.act(self.context, round_id, actor, action, args, source, rng, by)
        result = self.runner.run("act", request_id, fingerprint_args, body)
        return dict(result) if isinstance(result, dict) else result

    # Older names: aliases of `act` and the rest, in one place (`ledger.casino.aliases`).
    def variant(self, game_id: str) -> LoadedGame:  # alias
        """An alias of `game`."""
        return self.game(game_id)

    def close_betting(self, *, request_id: str, round_id: str) -> None:
        """An alias of `act`: the move the game declares closes betting
        (`close_action`), by the actor it lets take it (`ledger.casino.aliases`)."""
        body = aliases.close_betting(self.context, round_id, self._by)
        self._run("close_betting", request_id, {"round_id": str(round_id)}, body)

    def throw_dice(self, *, request_id: str, round_id: str, rng: RngServer) -> dict[str, Any]:
        """An alias of `act`: the move that draws dice next, from the round's
        committed seed, settling what it settles; answers {"dice": drawn}."""
        body = aliases.throw_dice(self.context, round_id, rng, self._by)
        return dict(self._run("throw_dice", request_id, {"round_id": str(round_id)}, body))

    def record_outcome(
        self,
        *,
        request_id: str,
        round_id: str,
        outcome: dict[str, Any],
        source: dict[str, Any],
    ) -> None:
        """An alias of `act`: a physical table's outcome, as its dealer device
        reported it: `source` is the device's signed report
        (`ledger.devices.throw_report`) of this outcome as the round's next
        draw. An RNG round refuses it: its draws come only from its seed. The
        round records it as the game's next action (`Round.ActionRecorded`, the
        report kept as its source) and settles in the same commit what that
        step settles."""
        args = {"round_id": str(round_id), "outcome": outcome, "source": source}
        body = aliases.record_outcome(self.context, round_id, outcome, source)
        self._run("record_outcome", request_id, args, body)

    def record_fault(
        self, *, request_id: str, round_id: str, reason: str, source: dict[str, Any]
    ) -> dict[str, Any]:
        """An alias of `act` (its `fault` move): a faulty draw at a physical
        table, as its dealer device reported it
        (`ledger.devices.fault_report`; an RNG draw is never faulty), then what
        the game's fault policy says: draw again with bets locked, reopen
        betting, or void the round after too many (every stake returned), all
        in one commit."""
        args = {"round_id": str(round_id), "reason": reason, "source": source}
        body = aliases.record_fault(self.context, round_id, reason, source)
        return dict(self._run("record_fault", request_id, args, body))

    def settle(self, *, request_id: str, round_id: str) -> list[BetResult]:
        """An alias kept for callers of settlement API 1, with nothing left to
        settle: a round's draw or action settles what
        its game settles (its results: `Casino.round(R).results`). A round
        already settled is refused ("round R is already settled"), and so is
        one not yet over; nothing is recorded. (Settlement API 1 settled a
        decided round with it; `migrate` settles one left open.)"""
        body = aliases.settle(self.context, round_id)
        return list(self._run("settle", request_id, {"round_id": str(round_id)}, body))

    # Operators.
    def correct(
        self,
        *,
        request_id: str,
        round_id: str,
        outcome: dict[str, Any],
        reason: str,
        operator: Signer,
    ) -> list[BetResult]:
        """An alias of `correct_step` of the round's last action (`ledger.casino.
        aliases`), the right result given as an outcome ({kind: drawn}, or the
        arguments of a move that draws nothing): an operator corrects a settled
        round's outcome (signed with an operator key): the settlement is
        reversed with compensating postings and the round settled again, every
        wallet and the house adjusted, in one commit. A wallet that can no
        longer cover what it must give back stops the correction."""
        args = {"round_id": str(round_id), "outcome": outcome, "reason": reason}
        body = corrections.correct(self.context, round_id, outcome, reason, operator)
        return list(self._run("correct", request_id, args, body))

    def correct_step(
        self,
        *,
        request_id: str,
        round_id: str,
        step: int,
        drawn: list[int],
        reason: str,
        operator: Signer,
    ) -> list[BetResult]:
        """An operator corrects what a physical table's device misread (settlement
        API 2): action number `step` drew `drawn`. The game replays the round
        with the corrected draw and the same later actions; every settlement from
        that action on is reversed with compensating postings and the bets
        re-settled as re-derived, every wallet and the house adjusted, in one
        commit. Refused on an RNG table, on a round not yet over, and when the
        corrected draw would make a later action illegal, void the round, or
        change which bets are settled from that action on."""
        args = {"round_id": str(round_id), "step": step, "drawn": drawn, "reason": reason}
        body = corrections.correct_step(self.context, round_id, step, drawn, reason, operator)
        return list(self._run("correct_step", request_id, args, body))

    def void_round(
        self, *, request_id: str, round_id: str, reason: str, operator: Signer
    ) -> list[BetResult]:
        args = {"round_id": str(round_id), "reason": reason}
        body = rounds.void_round(self.context, round_id, reason, operator)
        return list(self._run("void_round", request_id, args, body))

    def resume_round(
        self, *, request_id: str, round_id: str, reason: str, operator: Signer
    ) -> None:
        args = {"round_id": str(round_id), "reason": reason}
        body = rounds.resume_round(self.context, round_id, reason, operator)
        self._run("resume_round", request_id, args, body)

    # Upgrading.
    def rounds_to_migrate(self) -> list[Migration]:
        """Every round still open under settlement API 1 (release 0.2 and before),
        with what `migrate` does to it: settle it on its recorded outcome, or void
        it (every stake back) when it has none. Refused, with nothing to migrate
        yet, when a decided round's game is not installed to settle it."""
        return migrate.plan(self.context, migrate.open_api_1_rounds(self.app))

    def migrate(
        self,
        *,
        reason: str = migrate.REASON,
        operator: Signer | None = None,
        request_id: str | None = None,
    ) -> list[Migration]:
        """End every round still open under settlement API 1 (`rounds_to_migrate`)
        in one commit, the voids signed by `operator` with `reason`; what was
        done. Nothing open: nothing recorded, an empty list. Any refusal (no
        operator key for a void) records nothing."""
        found = self.rounds_to_migrate()
        if not found:
            return []
        args = {"rounds": [m.round_id for m in found], "reason": reason}
        body = migrate.finish(self.context, found, reason, operator)
        done = self._run("migrate", request_id or migrate.request_id(found), args, body)
        return migrate.from_json(done)


def _bound(args: dict[str, Any], by: Mapping[str, str] | None) -> dict[str, Any]:
    """A command's fingerprinted arguments, with the session that asked when there
    is one (a request recorded without one keeps its fingerprint)."""
    if by is None:
        return args
    # A copy of it; one of another shape is refused by the runner, as malformed.
    return {**args, SESSION_ARG: dict(by) if isinstance(by, Mapping) else by}
