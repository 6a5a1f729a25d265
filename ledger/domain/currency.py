"""How many minor units a currency's major unit holds (ISO 4217), for display.

Amounts are stored and computed as int minor units; this only says where the
decimal point goes when a person reads them (2 for EUR: 1050 -> 10.50; 0 for
VND; 3 for BHD). pycountry carries the codes but not the exponents, so the
exceptions to ISO 4217's common exponent of 2 are listed here (ISO 4217 list
one, 2024). Fallback: a code not listed has exponent 2, except the codes ISO
marks "N.A." (gold, SDR, test codes...), shown as plain integers.
"""

from __future__ import annotations

from typing import Final

_EXPONENT_0: Final = frozenset(
    [
        "BIF",
        "CLP",
        "DJF",
        "GNF",
        "ISK",
        "JPY",
        "KMF",
        "KRW",
        "PYG",
        "RWF",
        "UGX",
        "UYI",
        "VND",
        "VUV",
        "XAF",
        "XOF",
        "XPF",
    ]
)
_EXPONENT_3: Final = frozenset(["BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"])
_EXPONENT_4: Final = frozenset(["CLF", "UYW"])
# ISO 4217 "N.A.": no minor unit at all (precious metals, fund and test codes).
_NO_MINOR_UNIT: Final = frozenset(
    ["XAG", "XAU", "XBA", "XBB", "XBC", "XBD", "XDR", "XPD", "XPT", "XSU", "XTS", "XUA", "XXX"]
)


def minor_unit_exponent(currency: str) -> int:
    """Digits after the decimal point in `currency`'s major unit."""
    if currency in _EXPONENT_0 or currency in _NO_MINOR_UNIT:
        return 0
    if currency in _EXPONENT_3:
        return 3
    if currency in _EXPONENT_4:
        return 4
    return 2


def format_major(amount: int, currency: str) -> str:
    """`amount` minor units as major units, exactly (integer arithmetic, no float):
    format_major(-123456, "EUR") == "-1,234.56"."""
    exponent = minor_unit_exponent(currency)
    major, minor = divmod(abs(amount), 10**exponent)
    sign = "-" if amount < 0 else ""
    return f"{sign}{major:,}.{minor:0{exponent}d}" if exponent else f"{sign}{major:,}"
