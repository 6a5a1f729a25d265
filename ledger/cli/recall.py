"""`ledger recall ROUND_ID [--json]`: a round replayed step by step from its
signed events (see ledger.audit.recall). Text shows amounts in major units of
the round's currency; JSON keeps integer minor units beside the currency.
Exit 0 when every event verified and every check made passed (what was not
checked is listed), 1 when one did not, 2 for an unknown or malformed id."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ledger.cli.args import uuid_text
from ledger.cli.common import WithLedger, loaded_plugins
from ledger.domain.currency import format_major
from ledger.domain.stored_names import ROUND_OPENED, current_names
from ledger.privacy.personal import ERASED, shown
from ledger.privacy.sealed import is_sealed

if TYPE_CHECKING:
    from ledger.audit.recall import Recall, RecalledEvent
    from ledger.casino.opened import Ledger


def _who(event: RecalledEvent) -> str:
    return "; ".join(
        f"{k.signed} signed by {k.role or 'unknown-role'} key {k.name or '?'} ({k.key_id[:16]})"
        for k in event.keys
    )


def _postings(facts: dict[str, Any], currency: str) -> list[str]:
    legs = facts.get("postings") or []
    return [
        "postings: "
        + ", ".join(f"{leg['account']} {format_major(leg['amount'], currency)}" for leg in legs)
    ]


def _results(results: list[dict[str, Any]], currency: str) -> str:
    return "; ".join(
        f"bet {r['bet_id']} ({r['account_id']}) staked {format_major(r['stake'], currency)}, "
        f"returned {format_major(r['returned'], currency)}"
        for r in results
    )


def _source(source: dict[str, Any]) -> str:
    kind = source.get("kind")
    if kind == "rng":
        where = (
            f"counter {source.get('counter')}"
            if "counter" in source
            else f"deck positions {source.get('positions')}"
        )
        return f"RNG seed {source.get('seed_id')} {where}"
    if kind == "device":
        return "the dealer device's signed report"
    return "the node's command" if kind == "command" else f"source {kind!r}"


def describe(
    event: RecalledEvent, currency: str, erased: frozenset[str] = frozenset()
) -> list[str]:
    """What the event says, in lines for a person (facts verified before this);
    a personal value as `[sealed]`, `[erased]` once its subject is in `erased`."""
    facts = event.facts or {}
    if event.kind == "Opened":
        return _opened(facts, currency, erased)
    said = _DESCRIBED.get(event.kind)
    if said is None:
        return [f"{event.kind}: {json.dumps(facts, sort_keys=True)}"]
    return said(facts, currency, event)


def _opened(facts: dict[str, Any], currency: str, erased: frozenset[str]) -> list[str]:
    f = current_names(ROUND_OPENED, facts)  # the facts as stored: their names now
    dealer = f.get("dealer")
    subject = dealer["subject"] if isinstance(dealer, dict) and is_sealed(dealer) else None
    seed = f.get("seed_id")
    limits = f.get("limits") or {}
    return [
        f"round opened: game {f.get('game')} {f.get('game_version')} "
        f"(rules {str(f.get('rules_hash'))[:16]}, settlement API {f.get('settlement_api')}) "
        f"at table {f.get('table_id')}, dealer {ERASED if subject in erased else shown(dealer)}",
        (f"RNG table: randomness from committed seed {seed}" if seed else "physical table")
        + f"; limits {format_major(limits.get('min_bet', 0), currency)}"
        f"..{format_major(limits.get('max_bet', 0), currency)} {currency} a bet, "
        f"{format_major(limits.get('max_round', 0), currency)} a player",
    ]


def _bet_placed(f: dict[str, Any], currency: str, event: RecalledEvent) -> list[str]:
    # Who asked for it: "by token T (role R)", a "node command", or not recorded (older bets).
    asked = f", asked {event.asked}" if event.asked else ""
    return [
        f"bet {f.get('bet_id')}: account {f.get('account_id')} on {json.dumps(f.get('bet'))}, "
        f"stake {format_major(f.get('stake', 0), currency)} {currency}{asked}",
        *_postings(f, currency),
    ]


def _bet_withdrawn(f: dict[str, Any], currency: str, event: RecalledEvent) -> list[str]:
    return [
        f"bet {f.get('bet_id')} withdrawn by {f.get('account_id')}: "
        f"{format_major(f.get('stake', 0), currency)} {currency} back",
        *_postings(f, currency),
    ]


def _betting_closed(f: dict[str, Any], currency: str, event: RecalledEvent) -> list[str]:
    return ["betting closed"]


def _betting_reopened(f: dict[str, Any], currency: str, event: RecalledEvent) -> list[str]:
    return [f"betting reopened: {f.get('reason')}"]


def _outcome_recorded(f: dict[str, Any], currency: str, event: RecalledEvent) -> list[str]:
    return [f"outcome {json.dumps(f.get('outcome'))} from {_source(f.get('source') or {})}"]


def _fault_recorded(f: dict[str, Any], currency: str, event: RecalledEvent) -> list[str]:
    return [
        f"faulty draw #{f.get('faults')}: {f.get('reason')} (from {_source(f.get('source') or {})})"
    ]


def _action_recorded(f: dict[str, Any], currency: str, event: RecalledEvent) -> list[str]:
    drawn = f" drew {f.get('drawn')}" if f.get("drawn") else ""
    args = f" {json.dumps(f.get('args'))}" if f.get("args") else ""
    flags = f"; flags {', '.join(f.get('flags') or [])}" if f.get("flags") else ""
    # Who asked: a command's "node command" or "by token T (role R)"; an RNG draw's.
    asked, source = event.asked, f.get("source") or {}
    if asked is None:
        came = _source(source)
    elif source.get("kind") == "rng":
        came = f"{_source(source)}, asked {asked}"
    else:
        came = f"a command {asked}" if asked.startswith("by ") else asked
    return [
        f"action #{f.get('step')}: {f.get('actor')} {f.get('action')}{args}{drawn} "
        f"(from {came}){flags}",
        f"game state after: {json.dumps(f.get('state'), sort_keys=True)}",
    ]


def _settled(f: dict[str, Any], currency: str, event: RecalledEvent) -> list[str]:
    at = f" by action #{f.get('step')}" if f.get("step") is not None else ""
    over = " (round over)" if f.get("over") else ""
    return [
        f"settled{at}{over}: {_results(f.get('results') or [], currency)}",
        *_postings(f, currency),
    ]


def _corrected(f: dict[str, Any], currency: str, event: RecalledEvent) -> list[str]:
    at = f" at action #{f.get('step')}" if f.get("step") is not None else ""
    return [
        f"CORRECTION{at} by an operator: {json.dumps(f.get('wrong_outcome'))} -> "
        f"{json.dumps(f.get('right_outcome'))} ({f.get('reason')})",
        f"reversed: {_results(f.get('reversed_results') or [], currency)}",
        f"settled again: {_results(f.get('results') or [], currency)}",
        *_postings(f, currency),
    ]


def _voided(f: dict[str, Any], currency: str, event: RecalledEvent) -> list[str]:
    who = "an operator" if f.get("operator") else "the game's rules"
    return [
        f"VOIDED by {who}: {f.get('reason')}; returned: "
        f"{_results(f.get('returns') or [], currency)}",
        *_postings(f, currency),
    ]


def _resumed(f: dict[str, Any], currency: str, event: RecalledEvent) -> list[str]:
    return [f"RESUMED by an operator: {f.get('reason')}"]


#: Each event kind's lines (any other kind: its facts as JSON).
_DESCRIBED: dict[str, Callable[[dict[str, Any], str, RecalledEvent], list[str]]] = {
    "BetPlaced": _bet_placed,
    "BetWithdrawn": _bet_withdrawn,
    "BettingClosed": _betting_closed,
    "BettingReopened": _betting_reopened,
    "OutcomeRecorded": _outcome_recorded,
    "FaultRecorded": _fault_recorded,
    "ActionRecorded": _action_recorded,
    "Settled": _settled,
    "Corrected": _corrected,
    "Voided": _voided,
    "Resumed": _resumed,
}


def render(recall: Recall, erased: frozenset[str] = frozenset()) -> str:
    currency = recall.currency or "XXX"
    lines = [
        f"REPLAY of round {recall.round_id}: re-derived from its signed events, not a live view",
        f"amounts in {currency} (major units)",
        "",
    ]
    for event in recall.events:
        at = event.signed_at.isoformat(timespec="milliseconds") if event.signed_at else "-"
        position = "?" if event.position is None else str(event.position)
        head = f"v{event.version:<3} log {position:>9}  {at}  "
        if event.facts is None or event.problem:
            lines.append(f"{head}{event.kind}: {event.problem}")
        if event.facts is None:
            continue
        said = describe(event, currency, erased)
        lines.append(f"{head}{said[0]}" if not event.problem else f"{' ' * len(head)}{said[0]}")
        lines += [f"{' ' * len(head)}{line}" for line in said[1:]]
        lines.append(f"{' ' * len(head)}{_who(event)}")
    lines += ["", "CHECKED"] + [f"  {line}" for line in recall.checked]
    lines += ["NOT CHECKED HERE"] + [f"  {line}" for line in recall.not_checked]
    if recall.problems:
        lines += ["PROBLEMS"] + [f"  {line}" for line in recall.problems]
    lines.append(
        "RESULT: every event verified and every check above passed"
        if recall.ok
        else f"RESULT: {len(recall.problems)} problem(s): this round's record cannot be trusted"
    )
    return "\n".join(lines)


def cmd_recall(args: argparse.Namespace) -> WithLedger:
    def run(ledger: Ledger) -> int:
        from pathlib import Path

        from ledger.audit.recall import recall_round
        from ledger.crypto.keys import Keyring

        node = ledger.node
        keyring = Keyring.load(Path(args.keyring)) if args.keyring else node.keyring
        from ledger.erasure import erased_subjects

        archived = None
        if args.archive:
            from ledger.archive.check import check_archive
            from ledger.archive.files import archived_rows

            directories = [Path(directory) for directory in args.archive]
            for directory in directories:  # each checked whole before one event is read
                check_archive(directory, keyring)
            archived = archived_rows(directories)
        from ledger.audit.games.recorded_games import games_of_store

        # The round re-settled with the rules it pinned, an earlier release's too.
        games = games_of_store(node.app, ledger.games, ledger.plugins.game_from_rules)
        recall = recall_round(node.app, keyring, games, args.round, archived)
        erased = erased_subjects(node.app)
        print(json.dumps(recall.to_json(), indent=2) if args.json else render(recall, erased))
        return 0 if recall.ok else 1

    # A broken plugin fails before the store is opened.
    return WithLedger(run, plugins=loaded_plugins())


def add_recall_command(commands: Any) -> None:
    recall = commands.add_parser(
        "recall", help="replay one round step by step from its signed events (game recall)"
    )
    recall.add_argument("round", type=uuid_text, help="the round id")
    recall.add_argument("--json", action="store_true", help="JSON (integer minor units)")
    recall.add_argument(
        "--keyring", metavar="FILE", help="your own copy of the public keyring (default: keys dir)"
    )
    recall.add_argument(
        "--archive",
        action="append",
        metavar="DIR",
        help="an archive directory (ledger archive) holding the round, if the store archived it",
    )
    recall.set_defaults(handler=cmd_recall)
