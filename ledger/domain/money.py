"""Money: integer minor units of an ISO 4217 currency, moved by balanced postings.

No float ever touches an amount: amounts are `int` (never `bool`), checked on
the way in, and every movement is a set of postings summing to zero per
currency (double entry).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Final, TypedDict

from ledger.errors import InvalidCommandError

# Anything above this many minor units is a typo or an attack, not a bet
# (10^13 cents is a hundred billion in a two-decimal currency).
MAX_AMOUNT: Final = 10**13

CASHIER: Final = "cashier"  # the outside world: deposits come from it, withdrawals go to it


class Posting(TypedDict):
    """One leg of a movement, as stored (JSON-safe)."""

    account: str
    amount: int  # minor units; negative = out of the account
    currency: str


def wallet(account_id: object) -> str:
    return f"wallet:{account_id}"


def in_play(round_id: object) -> str:
    return f"in-play:{round_id}"


def cashier(currency: str) -> str:
    return f"{CASHIER}:{currency}"


def check_currency(code: object) -> str:
    """The ISO 4217 code in its canonical upper case ('eur' -> 'EUR'), else refused.

    pycountry matches case-insensitively: returning its own spelling keeps one
    cashier account and one balance per currency, however the code was typed.
    Imported here, where a code is checked: pycountry reads its installed
    version's metadata when imported (about 10 ms of every process that imports
    money, most of which never checks a currency).
    """
    import pycountry

    found = pycountry.currencies.get(alpha_3=code) if isinstance(code, str) else None
    if found is None or not isinstance(code, str) or len(code) != 3:
        raise InvalidCommandError(
            f"{code!r} is not an ISO 4217 currency code", code="invalid_currency", param="currency"
        )
    return str(found.alpha_3)


def check_amount(value: object, what: str = "amount", *, param: str | None = None) -> int:
    """A positive whole number of minor units, within reason (`param`: the
    field it was given in, for the error's `param`)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidCommandError(
            f"{what} must be a whole number of minor units, not {value!r}",
            code="invalid_amount",
            param=param,
        )
    if value <= 0:
        raise InvalidCommandError(
            f"{what} must be positive, not {value}", code="invalid_amount", param=param
        )
    if value > MAX_AMOUNT:
        raise InvalidCommandError(
            f"{what} {value} is larger than the limit {MAX_AMOUNT}",
            code="invalid_amount",
            param=param,
        )
    return value


def posting(account: str, amount: int, currency: str) -> Posting:
    return {"account": account, "amount": amount, "currency": currency}


def transfer(source: str, target: str, amount: int, currency: str) -> list[Posting]:
    """Move `amount` from `source` to `target`: two legs summing to zero."""
    return [posting(source, -amount, currency), posting(target, amount, currency)]


def imbalance(postings: Iterable[Posting]) -> dict[str, int]:
    """Per currency, the sum of the postings (all zero when balanced)."""
    totals: dict[str, int] = defaultdict(int)
    for leg in postings:
        totals[leg["currency"]] += leg["amount"]
    return {currency: total for currency, total in totals.items() if total}


def check_balanced(postings: list[Posting]) -> list[Posting]:
    off = imbalance(postings)
    if off:
        raise InvalidCommandError(f"postings do not balance: {off}", code="invalid_settlement")
    return postings
