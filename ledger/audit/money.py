"""The money invariants, re-derived from the events alone (`verify --level settlement`).

Reads every event's payload (the envelopes were already verified) and checks:
- every movement's postings sum to zero per currency;
- every wallet's balance, as its account saw it (deposits - withdrawals -
  stakes + returns), equals the sum of the postings on it, and a player's
  wallet never goes below zero, at any point in the log;
- every settlement's and void's postings are exactly what its results say;
- every operator's signature on a void or a resume is valid;
- with the variants installed, every settlement is what the round's own
  variant version and rules pay (see `resettle`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

from eventsourcing.persistence import Transcoder
from eventsourcing.utils import get_topic

from ledger.audit.dice import DiceAudit
from ledger.audit.resettle import Resettler
from ledger.crypto.actor import verify_fact
from ledger.crypto.envelope import open_envelope
from ledger.crypto.keys import Keyring, Role
from ledger.domain.account import PLAYER, Account
from ledger.domain.money import imbalance, in_play, posting, wallet
from ledger.domain.round import Round, correction_fact, operator_fact
from ledger.errors import VerificationError
from ledger.store.merkle_log import MerkleLogTables, stream_of

READ_BATCH = 5000

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


def _events(
    tables: MerkleLogTables, transcoder: Transcoder, progress: Callable[[int], None] | None
) -> Iterator[tuple[int, str, int, str, dict[str, Any]]]:
    position, after = 0, 0
    while rows := tables.rows_after(after, READ_BATCH):
        if progress:
            progress(len(rows))
        for _, originator_id, version, topic, state in rows:
            stream = stream_of(originator_id)
            envelope = open_envelope(bytes(state), stream=stream, version=version)
            yield position, stream, version, topic, transcoder.decode(envelope.payload)
            position += 1
        after = rows[-1][0]


def expected_settlement_postings(
    round_id: str, house: str, currency: str, results: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """What a settlement's postings must be, from its per-bet results alone."""
    legs = []
    for result in results:
        stake, returned = result["stake"], result["returned"]
        legs.append(posting(in_play(round_id), -stake, currency))
        if returned:
            legs.append(posting(wallet(result["account_id"]), returned, currency))
        if stake != returned:
            legs.append(posting(wallet(house), stake - returned, currency))
    return legs  # type: ignore[return-value]


def expected_void_postings(
    round_id: str, currency: str, returns: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    legs = []
    for result in returns:
        legs.append(posting(in_play(round_id), -result["stake"], currency))
        legs.append(posting(wallet(result["account_id"]), result["stake"], currency))
    return legs  # type: ignore[return-value]


def check_money(
    tables: MerkleLogTables,
    transcoder: Transcoder,
    keyring: Keyring,
    progress: Callable[[int], None] | None = None,
    resettler: Resettler | None = None,
    dice: DiceAudit | None = None,
) -> int:
    """Check every money invariant; return the number of movements checked."""
    kinds: dict[str, str] = {}
    mirrored: dict[str, int] = defaultdict(int)  # account id -> balance its events give
    posted: dict[str, int] = defaultdict(int)  # ledger account name -> sum of postings
    rounds: dict[str, tuple[str, str]] = {}  # round id -> (house account id, currency)
    in_force: dict[str, list[dict[str, Any]]] = {}  # round id -> settlement postings in force
    movements = 0
    for position, stream, version, topic, state in _events(tables, transcoder, progress):
        where = f"stream {stream} version {version} (log position {position})"
        if resettler is not None:
            resettler.observe(stream, topic, state, where)
        if dice is not None:
            dice.observe(stream, topic, state, where)
        postings = state.get("postings")
        if postings is not None:
            movements += 1
            off = imbalance(postings)
            if off:
                raise VerificationError(f"postings do not balance: {off}", where=where)
            for leg in postings:
                posted[leg["account"]] += leg["amount"]
        if topic == _OPENED:
            kinds[stream] = state["kind"]
        elif topic in _ACCOUNT_EFFECT:
            mirrored[stream] += _ACCOUNT_EFFECT[topic] * state["amount"]
            if kinds.get(stream) == PLAYER and mirrored[stream] < 0:
                raise VerificationError(
                    f"wallet balance goes negative ({mirrored[stream]})", where=where
                )
        elif topic == _ROUND_OPENED:
            rounds[stream] = (str(state["house_account"]), state["currency"])
        elif topic in (_SETTLED, _VOIDED, _CORRECTED):
            house, currency = rounds[stream]
            if topic == _VOIDED:
                results = state["returns"]
                expected = expected_void_postings(stream, currency, results)
            else:
                results = state["results"]
                expected = expected_settlement_postings(stream, house, currency, results)
                if topic == _CORRECTED:
                    reversal = [
                        {**leg, "amount": -leg["amount"]} for leg in in_force.get(stream, [])
                    ]
                    in_force[stream] = expected
                    expected = reversal + expected
                else:
                    in_force[stream] = expected
            if postings != expected:
                raise VerificationError(
                    "postings differ from what the round's results say", where=where
                )
            if any(r["returned"] < 0 for r in results):
                raise VerificationError("a negative return", where=where)
        if topic == _CORRECTED:
            fact = correction_fact(
                stream, state["wrong_outcome"], state["right_outcome"], state["reason"]
            )
            verify_fact(keyring, fact, state["operator"], Role.OPERATOR, where)
        if topic in (_VOIDED, _RESUMED) and state.get("operator") is not None:
            action = "void" if topic == _VOIDED else "resume"
            fact = operator_fact(action, stream, state["reason"])
            verify_fact(keyring, fact, state["operator"], Role.OPERATOR, where)
    for account_id, balance in mirrored.items():
        if posted[wallet(account_id)] != balance:
            raise VerificationError(
                f"balance {balance} from its events differs from its postings "
                f"{posted[wallet(account_id)]}",
                where=f"account {account_id}",
            )
    return movements
