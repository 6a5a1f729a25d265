"""One way to show a ratio as a percentage: two decimals, rounded half away
from zero, by integer arithmetic.

Used by the paytable (a bet's exact theoretical return) and the simulation's
report (the return seen), so both print 97.22% for 35/36 and 66.67% for 2/3.
"""

from __future__ import annotations

from fractions import Fraction


def percent(value: Fraction, places: int = 2) -> str:
    """`value` (1 is 100%) as a percentage, rounded half away from zero, exactly."""
    scale = 100 * 10**places
    magnitude = abs(value)
    scaled = (2 * magnitude.numerator * scale + magnitude.denominator) // (
        2 * magnitude.denominator
    )
    sign = "-" if value < 0 and scaled else ""
    whole, part = divmod(scaled, 10**places)
    return f"{sign}{whole}.{part:0{places}d}%" if places else f"{sign}{whole}%"
