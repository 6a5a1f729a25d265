"""Readable money (issue 8, item 10): major units by the ISO 4217 exponent, raw
minor units in --json, and one percentage rounding everywhere."""

from __future__ import annotations

from fractions import Fraction

import pytest

from ledger.cli.main import main
from ledger.domain.currency import format_major, minor_unit_exponent
from ledger.domain.percent import percent
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.paytable import paytable
from ledger.simulation.report import summary_lines


@pytest.mark.parametrize(
    ("currency", "exponent", "amount", "shown"),
    [
        ("EUR", 2, 123_456, "1,234.56"),
        ("EUR", 2, -5, "-0.05"),
        ("VND", 0, 1_234_567, "1,234,567"),
        ("BHD", 3, 1_234_567, "1,234.567"),
        ("JPY", 0, -300, "-300"),
        ("CLF", 4, 10_001, "1.0001"),
        ("XAU", 0, 7, "7"),  # ISO "N.A.": no minor unit, shown as is
        ("USD", 2, 0, "0.00"),  # the fallback for every other code: 2
    ],
)
def test_amounts_in_major_units(currency: str, exponent: int, amount: int, shown: str) -> None:
    assert minor_unit_exponent(currency) == exponent
    assert format_major(amount, currency) == shown


def test_one_percentage_rounding(capsys: pytest.CaptureFixture[str]) -> None:
    assert percent(Fraction(2, 3)) == "66.67%"
    assert percent(Fraction(35, 36)) == "97.22%"
    assert percent(Fraction(1, 8000)) == "0.01%"  # 0.0125% rounds half away from zero
    assert percent(Fraction(-1, 8000)) == "-0.01%"
    game = get_plugin_manager().game("taixiu")
    assert main(["paytable", "taixiu"]) == 0
    out = capsys.readouterr().out
    for line in paytable(game):
        row = next(r for r in out.splitlines() if r.split()[0] == line.bet)
        assert row.split()[-1] == percent(line.theoretical_return)
    # The simulation's report uses the very same function.
    assert summary_lines.__globals__["percent"] is percent
