"""The report's charts, drawn by matplotlib and inlined as PNG data URIs.

matplotlib is an optional dependency (the ``report`` extra): it is imported
here only, when a report is drawn, so every other command runs without it.
Amounts reach a chart already converted for display (major units); the
sums behind them stay integers.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ledger.errors import ConfigError


@dataclass(frozen=True)
class Series:
    label: str
    moments: Sequence[datetime]
    values: Sequence[float]  # for display only: converted from integer minor units


@dataclass(frozen=True)
class ReturnBar:
    label: str
    observed: float
    interval: tuple[float, float] | None
    theoretical: float | None


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ConfigError(
            "ledger report draws its charts with matplotlib: pip install 'casino-ledger[report]'"
        ) from None
    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    return plt


def require() -> None:
    """Fail now, plainly, when matplotlib is missing (not after reading the log)."""
    _pyplot()


def _data_uri(figure: Any) -> str:
    plt = _pyplot()
    buffer = io.BytesIO()
    # No creation metadata: the same data draws the same bytes.
    figure.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def house_over_time(title: str, unit: str, series: Sequence[Series]) -> str:
    """Cumulative house result per game over time."""
    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(8, 3.6), layout="constrained")
    for line in series:
        axes.plot(line.moments, line.values, marker="o", markersize=3, label=line.label)
    axes.set_xlabel("UTC")
    axes.axhline(0, color="grey", linewidth=0.8)
    axes.set_title(title)
    axes.set_ylabel(f"cumulative house result ({unit})")
    # Whole amounts with thousands separators: no "1e7" offset to add in one's head.
    axes.yaxis.set_major_formatter(_amounts())
    axes.legend(loc="best", fontsize="small")
    figure.autofmt_xdate()
    return _data_uri(figure)


def _amounts() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda value, _: f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}")


def returns_against_theory(title: str, bars: Sequence[ReturnBar]) -> str:
    """Observed return per game and family with its 95% interval; theory as a mark."""
    plt = _pyplot()
    height = max(2.4, 0.42 * len(bars) + 1.2)
    figure, axes = plt.subplots(figsize=(8, height), layout="constrained")
    labelled: set[str] = set()

    def once(label: str) -> str | None:
        first = label not in labelled
        labelled.add(label)
        return label if first else None

    for row, bar in enumerate(bars):
        if bar.interval is not None:
            low, high = bar.interval
            axes.errorbar(
                [bar.observed],
                [row],
                xerr=[[bar.observed - low], [high - bar.observed]],
                fmt="o",
                color="tab:blue",
                capsize=4,
                label=once("observed, 95% interval"),
            )
        else:
            axes.plot([bar.observed], [row], "o", color="tab:blue", label=once("observed"))
        if bar.theoretical is not None:
            axes.plot(
                [bar.theoretical],
                [row],
                "|",
                color="tab:red",
                markersize=16,
                markeredgewidth=2,
                label=once("theoretical"),
            )
    axes.set_yticks(range(len(bars)), [bar.label for bar in bars])
    axes.invert_yaxis()
    axes.axvline(1, color="grey", linewidth=0.8)
    axes.set_xlabel("return to player (1 = every stake back)")
    axes.set_title(title)
    if labelled:
        axes.legend(loc="best", fontsize="small")
    return _data_uri(figure)
