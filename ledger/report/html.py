"""The report as one self-contained HTML page: inline CSS, charts as data URIs,
no script and no external reference, so it opens the same way offline.

Every amount is formatted from integer minor units (`format_major`), every
ratio from an exact fraction (`percent`); only confidence bounds are floats.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from fractions import Fraction
from html import escape

from ledger.domain.currency import format_major, minor_unit_exponent
from ledger.domain.percent import percent
from ledger.report import charts
from ledger.report.returns import MIN_ROUNDS
from ledger.report.significant import Significant
from ledger.report.status import Status
from ledger.report.tally import Counts, ReportTally

STEP_NAMES = {60: "UTC minute", 3600: "UTC hour", 86400: "UTC day", 7 * 86400: "week"}

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 72em; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f2f2f2; } td.text, th.text { text-align: left; }
.verified { color: #0a6e0a; font-weight: bold; } .failed { color: #b00020; font-weight: bold; }
.not-verified { color: #8a5a00; font-weight: bold; }
.note { color: #555; font-size: 0.9em; } img { max-width: 100%; display: block; margin: 0.8em 0; }
pre { white-space: pre-wrap; }\ncode { background: #f5f5f5; padding: 0 0.2em; }
"""


def _money(amount: int, currency: str) -> str:
    return f"{format_major(amount, currency)} {currency}"


def _ratio(value: Fraction | None) -> str:
    return percent(value) if value is not None else "-"


def _bound(value: float) -> str:
    return f"{100 * value:.2f}%"


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], text_columns: int = 1) -> str:
    def cell(tag: str, index: int, value: str) -> str:
        kind = ' class="text"' if index < text_columns else ""
        return f"<{tag}{kind}>{escape(value)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _count_cells(counts: Counts, currency: str) -> list[str]:
    hold = Fraction(counts.house, counts.staked) if counts.staked else None
    return [
        f"{counts.rounds:,}",
        f"{counts.bets:,}",
        _money(counts.staked, currency),
        _money(counts.house, currency),
        _ratio(hold),
        f"{counts.voided_by_rules:,}",
        f"{counts.voided_by_operator:,}",
        f"{counts.resumed:,}",
        f"{counts.faults:,}",
        f"{counts.corrections:,}",
    ]


COUNT_HEADERS = [
    "rounds ended",
    "bets settled",
    "turnover",
    "house result",
    "hold",
    "voided by rules",
    "voided by operator",
    "interrupted, resumed",
    "faults",
    "corrections",
]


def _status(status: Status) -> str:
    css = {"verified": "verified", "not verified": "not-verified"}.get(status.verdict, "failed")
    parts = [f'<p class="{css}">{escape(status.verdict.upper())}</p>']
    parts += [f"<pre>{escape(chr(10).join(status.lines))}</pre>"]
    if status.checkpoint is not None:
        c = status.checkpoint
        said = (
            "The log was checked against every stored checkpoint; the newest:"
            if status.verdict == "verified"
            else "Newest stored checkpoint whose signature verifies (the log was not checked "
            "against it):"
        )
        parts.append(f"<p>{escape(said)}</p>")
        parts.append(
            _table(
                ["origin", "size", "root (base64)", "issued at", "signed by key"],
                [[c.origin, f"{c.size:,}", c.root, c.issued_at, c.key_id]],
                5,
            )
        )
    else:
        parts.append("<p>No checkpoint was checked.</p>")
    parts.append(f'<p class="note">Keyring trusted: {escape(status.keyring)}</p>')
    return "\n".join(parts)


def _returns_section(tally: ReportTally) -> str:
    rows, bars = [], []
    for (game, currency), families in sorted(tally.returns.items()):
        for kind, stats in sorted(families.items()):
            interval = stats.interval()
            theory = stats.theoretical
            inside = "-"
            if interval is not None and theory is not None:
                inside = "yes" if interval[0] <= theory <= interval[1] else "NO"
            rows.append(
                [
                    game,
                    currency,
                    kind,
                    f"{stats.rounds:,}",
                    f"{stats.bets:,}",
                    _money(stats.staked, currency),
                    _money(stats.house, currency),
                    _ratio(stats.observed),
                    f"{_bound(interval[0])} to {_bound(interval[1])}" if interval else "-",
                    _ratio(theory),
                    inside,
                ]
            )
            observed = stats.observed
            if observed is not None:
                bars.append(
                    charts.ReturnBar(
                        f"{game} {currency}: {kind}",
                        float(observed),
                        interval,
                        float(theory) if theory is not None else None,
                    )
                )
    if not rows:
        return "<p>No settled bet in the log.</p>"
    sources = [
        f"<li>{escape(game)} {escape(currency)}: {escape('; '.join(sorted(found)))}</li>"
        for (game, currency), found in sorted(tally.theory_sources.items())
    ]
    chart = charts.returns_against_theory("Observed return against theoretical", bars)
    return "\n".join(
        [
            _table(
                [
                    "game",
                    "currency",
                    "bet family",
                    "rounds",
                    "bets",
                    "turnover",
                    "house result",
                    "observed return",
                    "95% interval",
                    "theoretical",
                    "theory inside",
                ],
                rows,
                3,
            ),
            '<p class="note">Observed return = returned / staked over settled bets. The 95% '
            "interval treats each round as one sample (bets on one round share its outcome) "
            f"and is shown from {MIN_ROUNDS} rounds on. It is a normal approximation: for "
            "long-shot bets it needs many more rounds than that, and even when every payout "
            "is right about one family in twenty falls outside its interval by chance. "
            "Theoretical sources:</p>",
            "<ul>" + "".join(sources) + "</ul>",
            f'<img alt="observed return against theoretical" src="{chart}">',
        ]
    )


def _house_charts(tally: ReportTally) -> str:
    per: dict[str, dict[str, dict[int, int]]] = defaultdict(lambda: defaultdict(dict))
    for (start, game, currency), house in tally.timeline.items():
        per[currency][game][start] = house
    step = STEP_NAMES[tally.resolution]
    images = []
    for currency, games in sorted(per.items()):
        series = []
        scale = 10 ** minor_unit_exponent(currency)
        for game, points in sorted(games.items()):
            first = min(points)
            moments, values, running = [datetime.fromtimestamp(first, UTC)], [0.0], 0
            for start in sorted(points):  # each bucket's sum shown at its end
                running += points[start]
                moments.append(datetime.fromtimestamp(start + tally.resolution, UTC))
                values.append(running / scale)  # display only
            series.append(charts.Series(game, moments, values))
        uri = charts.house_over_time(
            f"Cumulative house result, by {step} ({currency})", currency, series
        )
        images.append(f'<img alt="house result over time in {escape(currency)}" src="{uri}">')
    return "\n".join(images) or "<p>No settlement in the log.</p>"


def _positions(events: int) -> str:
    """Log positions count from 0, as `verify`, proofs and findings count them."""
    return f"log positions 0 to {events - 1:,}" if events else "no log position yet"


def _table_name(name: str, table: object) -> str:
    """A table's name and its id's first digits: two tables may share a name."""
    return f"{name} ({str(table)[:8]})"


def _significant(found: Significant | None) -> str:
    if found is None:
        return "<p>Not collected.</p>"
    if not found.total:
        return "<p>None in the log.</p>"
    counts = _table(["kind", "events"], [[k, f"{n:,}"] for k, n in sorted(found.counts.items())])
    shown = len(found.newest)
    note = (
        f"The newest {shown:,} of {found.total:,}; every one: "
        "<code>ledger events --significant</code>."
        if shown < found.total
        else "Every one, in log order."
    )
    rows = [
        [f"{e.position:,}", e.at.isoformat(timespec="seconds"), e.kind, e.summary]
        for e in found.newest
    ]
    return "\n".join(
        [
            counts,
            f'<p class="note">{note} Each was checked against its signed envelope as it was '
            "read; actor signatures, chains and the Merkle tree are checked by "
            "<code>ledger verify</code>.</p>",
            _table(["log position", "signed at (UTC)", "kind", "what"], rows, 0),
        ]
    )


def render(
    tally: ReportTally, status: Status, store: str, significant: Significant | None = None
) -> str:
    open_per_game: dict[tuple[str, str], int] = defaultdict(int)
    for round_ in tally.open.values():
        open_per_game[(round_.game, round_.currency)] += 1
    games = sorted(set(tally.games) | set(open_per_game))
    game_rows = [
        [
            game,
            currency,
            *_count_cells(tally.games.get((game, currency), Counts()), currency),
            f"{open_per_game.get((game, currency), 0):,}",
        ]
        for game, currency in games
    ]
    per_table: dict[str, Counts] = defaultdict(Counts)
    for _, table, counts in tally.daily():
        per_table[table].merge(counts)
    table_rows = []
    for table, counts in per_table.items():
        name, game, currency = tally.tables.get(table, (table, "?", "?"))
        table_rows.append([_table_name(name, table), game, *_count_cells(counts, currency)])
    table_rows.sort()
    day_rows = []
    for day, table, counts in tally.daily():
        name, game, currency = tally.tables.get(table, (table, "?", "?"))
        day_rows.append(
            [day.isoformat(), _table_name(name, table), game, *_count_cells(counts, currency)]
        )
    day_rows.sort(key=lambda row: (row[0], row[1]))
    now = datetime.now(UTC).isoformat(timespec="seconds")
    span = f"{tally.first} to {tally.last}" if tally.first else "no event"
    body = [
        "<h1>Casino ledger: audit report</h1>",
        f"<p>Store <code>{escape(store)}</code>, {_positions(tally.events)} "
        f"({tally.events:,} events read), UTC days {escape(span)}; made {escape(now)}.</p>",
        "<h2>Verification</h2>",
        _status(status),
        "<h2>Significant events</h2>",
        _significant(significant),
        "<h2>Games</h2>",
        _table(["game", "currency", *COUNT_HEADERS, "open at end of log"], game_rows, 2),
        '<p class="note">Voided by rules: the game voided the round (its fault policy). '
        "Voided by operator / resumed: an operator's signed void or resume of an interrupted "
        "round. Open at end of log: rounds neither settled nor voided yet. Corrections are "
        "booked on the day they were made; amounts in major units of each currency.</p>",
        "<h2>Return per game and bet family</h2>",
        _returns_section(tally),
        "<h2>House result over time</h2>",
        _house_charts(tally),
        "<h2>Per table</h2>",
        _table(["table", "game", *COUNT_HEADERS], table_rows, 2),
        "<h2>Per table and UTC day</h2>",
        _table(["day", "table", "game", *COUNT_HEADERS], day_rows, 3),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>Casino ledger audit report</title>"
        f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
