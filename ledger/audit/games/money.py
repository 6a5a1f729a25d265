"""The money invariants, re-derived from the events alone (`verify --level settlement`).

Reads every event's payload (the envelopes were already verified) and checks:
- every movement's postings sum to zero per currency;
- every wallet's balance, as its account saw it (deposits - withdrawals -
  stakes + returns), equals the sum of the postings on it, and a player's
  wallet never goes below zero, at any point in the log;
- every settlement's, void's and correction's postings are exactly what its
  results say (a correction also reverses the settlement in force);
- every operator's signature on a void, a resume or a correction is valid, by an
  operator key that may sign when its event was (validity and revocation:
  `ledger.crypto.validity`);
- every wallet and round a posting names has its stream in the log (an
  attacker who deletes a whole wallet stream leaves postings naming it).
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from eventsourcing.utils import get_topic

from ledger.audit.games.postings import expected_settlement_postings, expected_void_postings
from ledger.audit.log.key_times import SignedWhen

if TYPE_CHECKING:
    from ledger.audit.games.round_facts import RoundFacts
from ledger.crypto.actor import actor_signature, verify_fact
from ledger.crypto.keys import Keyring, Role
from ledger.domain.account import PLAYER, Account
from ledger.domain.money import imbalance, in_play, wallet
from ledger.domain.round import Round
from ledger.domain.signed_facts import correction_fact, operator_fact
from ledger.errors import VerificationError

_WALLET, _, _ = wallet("").partition(":")
_IN_PLAY, _, _ = in_play("").partition(":")

_ACCOUNT_EFFECT: dict[str, int] = {
    get_topic(Account.Deposited): +1,
    get_topic(Account.Withdrawn): -1,
    get_topic(Account.Debited): -1,
    get_topic(Account.Credited): +1,
}
_OPENED = get_topic(Account.Opened)
_ROUND_OPENED = get_topic(Round.Opened)
_SETTLED = get_topic(Round.Settled)
_VOIDED = get_topic(Round.Voided)
_RESUMED = get_topic(Round.Resumed)
_CORRECTED = get_topic(Round.Corrected)


class MoneyAudit:
    """Follows the log in order; `finish` checks what needs the whole log. A
    round's house account, currency and postings in force are its facts
    (`ledger.audit.games.round_facts`), folded once for every check."""

    def __init__(self, keyring: Keyring) -> None:
        self.keyring = keyring
        self.kinds: dict[str, str] = {}  # account id -> kind, from Account.Opened
        self.mirrored: dict[str, int] = defaultdict(int)  # account id -> balance its events give
        self.posted: dict[str, int] = defaultdict(int)  # ledger account -> sum of postings
        self.first_named: dict[str, str] = {}  # ledger account -> where a posting first named it
        self.rounds: set[str] = set()  # every round opened
        self.movements = 0
        self.wallets = 0  # wallets whose balance matched their postings

    def observe(
        self,
        stream: str,
        topic: str,
        state: dict[str, Any],
        where: str,
        when: SignedWhen,
        facts: RoundFacts | None = None,
    ) -> None:
        postings = state.get("postings")
        if postings is not None:
            self._movement(postings, where)
        if topic == _OPENED:
            self.kinds[stream] = state["kind"]
        elif topic in _ACCOUNT_EFFECT:
            self.mirrored[stream] += _ACCOUNT_EFFECT[topic] * state["amount"]
            if self.kinds.get(stream) == PLAYER and self.mirrored[stream] < 0:
                raise VerificationError(
                    f"wallet balance goes negative ({self.mirrored[stream]})", where=where
                )
        elif topic == _ROUND_OPENED:
            self.rounds.add(stream)
        elif topic in (_SETTLED, _VOIDED, _CORRECTED):
            self._paid_out(stream, topic, state, postings, where, facts)
        if topic == _CORRECTED:
            fact = correction_fact(
                stream,
                state["wrong_outcome"],
                state["right_outcome"],
                state["reason"],
                state.get("step"),
            )
            self._operator(fact, state["operator"], where, when)
        if topic in (_VOIDED, _RESUMED) and state.get("operator") is not None:
            action = "void" if topic == _VOIDED else "resume"
            self._operator(
                operator_fact(action, stream, state["reason"]), state["operator"], where, when
            )

    def _operator(self, fact: dict[str, Any], signed: Any, where: str, when: SignedWhen) -> None:
        """An operator's signature over `fact`, by a key that may sign when its event was."""
        verify_fact(
            self.keyring,
            fact,
            actor_signature(signed if isinstance(signed, dict) else {}),
            Role.OPERATOR,
            where,
            at=when.at,
            covered_at=when.covered_at,
            covered_size=when.covered_size,
        )

    def _movement(self, postings: list[dict[str, Any]], where: str) -> None:
        self.movements += 1
        off = imbalance(postings)  # type: ignore[arg-type]
        if off:
            raise VerificationError(f"postings do not balance: {off}", where=where)
        for leg in postings:
            self.posted[leg["account"]] += leg["amount"]
            self.first_named.setdefault(leg["account"], where)

    def _paid_out(
        self,
        stream: str,
        topic: str,
        state: dict[str, Any],
        postings: list[dict[str, Any]] | None,
        where: str,
        facts: RoundFacts | None,
    ) -> None:
        if facts is None:
            raise VerificationError(f"round {stream} pays out but never opened", where=where)
        house, currency = facts.house, facts.currency
        if topic == _VOIDED:
            results = state["returns"]
            expected = expected_void_postings(stream, currency, results)
        else:
            results = state["results"]
            expected = expected_settlement_postings(stream, house, currency, results)
            if topic == _CORRECTED and state.get("step") is not None:
                # A step correction reverses the settlements it names, then re-settles.
                reversal = [
                    {**leg, "amount": -leg["amount"]}
                    for leg in expected_settlement_postings(
                        stream, house, currency, state["reversed_results"]
                    )
                ]
                expected = reversal + expected
            elif topic == _CORRECTED:  # reverses the settlement in force, then re-settles
                expected = [{**leg, "amount": -leg["amount"]} for leg in facts.in_force] + expected
        if postings != expected:
            raise VerificationError(
                "postings differ from what the round's results say", where=where
            )
        if any(r["returned"] < 0 for r in results):
            raise VerificationError("a negative return", where=where)

    def saved(self) -> dict[str, Any]:
        """What the next events need (`ledger.audit.verify_state`); taken before `finish`."""
        return {
            "kinds": self.kinds,
            "mirrored": dict(self.mirrored),
            "posted": dict(self.posted),
            "first_named": self.first_named,
            "rounds": sorted(self.rounds),
            "movements": self.movements,
        }

    def restore(self, data: dict[str, Any]) -> None:
        self.kinds = dict(data["kinds"])
        self.mirrored.update(data["mirrored"])
        self.posted.update(data["posted"])
        self.first_named = dict(data["first_named"])
        self.rounds = set(data["rounds"])
        self.movements = int(data["movements"])

    def finish(self) -> list[VerificationError]:
        """Every wallet's events agree with its postings, and every account a
        posting names exists: a wallet or a round whose whole stream was
        deleted still has postings naming it elsewhere. Returns the problems."""
        problems = []
        for name, where in self.first_named.items():
            kind, _, ident = name.partition(":")
            known = self.kinds if kind == _WALLET else self.rounds if kind == _IN_PLAY else None
            if known is not None and ident not in known:
                what = "account" if kind == _WALLET else "round"
                problems.append(
                    VerificationError(
                        f"postings name {what} {ident} ({self.posted[name]} posted to {name}, "
                        f"first at {where}), but its stream is not in the log",
                        where=f"{what} {ident}",
                    )
                )
        for account_id, balance in self.mirrored.items():
            if self.posted[wallet(account_id)] != balance:
                problems.append(
                    VerificationError(
                        f"balance {balance} from its events differs from its postings "
                        f"{self.posted[wallet(account_id)]}",
                        where=f"account {account_id}",
                    )
                )
            else:
                self.wallets += 1
        return problems
