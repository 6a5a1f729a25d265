"""Shared plumbing for the benchmark scripts in tools/ (not a test helper).

Each script measures a *subject* against a *baseline* in the same process run,
interleaved run by run (the order alternates, so drift and noise hit both),
and reports the medians of the rates and the median of the per-run ratios.
Results go to stdout as a plain table, to tools/results/<name>.json, and to a
PNG bar chart when matplotlib is importable.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import secrets
import shlex
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TOOLS = Path(__file__).resolve().parent
if str(TOOLS.parent) not in sys.path:  # the benchmarks write tests/demo_table.py's aggregate
    sys.path.insert(0, str(TOOLS.parent))
RESULTS = TOOLS / "results"
PG_DSN = "postgresql://postgres@127.0.0.1:5432/test"


# --- the code under test ----------------------------------------------------


def _ledger_files() -> dict[str, str]:
    import hashlib

    root = TOOLS.parent / "ledger"
    return {
        str(path.relative_to(TOOLS.parent)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*.py"))
    }


def code_fingerprint(files: dict[str, str] | None = None) -> dict[str, Any]:
    """A short hash over ledger/**/*.py (paths and contents)."""
    import hashlib

    files = _ledger_files() if files is None else files
    digest = hashlib.sha256("".join(f"{p}\0{h}\n" for p, h in files.items()).encode())
    return {"sha256": digest.hexdigest()[:16], "files": len(files)}


FILES_AT_START = _ledger_files()
CODE_AT_START = code_fingerprint(FILES_AT_START)
STARTED = datetime.now(UTC).isoformat(timespec="seconds")


def code_changes() -> dict[str, list[str]]:
    """ledger/ files changed since this run started: those this process imported, and others."""
    now = _ledger_files()
    changed = sorted(
        p for p in FILES_AT_START.keys() | now.keys() if FILES_AT_START.get(p) != now.get(p)
    )
    loaded = {
        str(Path(m.__file__).resolve().relative_to(TOOLS.parent))
        for m in list(sys.modules.values())
        if getattr(m, "__file__", None)
        and Path(m.__file__).resolve().is_relative_to(TOOLS.parent / "ledger")
    }
    return {
        "used": [p for p in changed if p in loaded],
        "other": [p for p in changed if p not in loaded],
    }


# --- machine ---------------------------------------------------------------


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cores() -> int:
    """Cores this process may run on (what `os.cpu_count()` workers will share)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def machine() -> dict[str, Any]:
    return {
        "cpu": cpu_model(),
        "os_cpu_count": os.cpu_count(),
        "usable_cores": cores(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def machine_line() -> str:
    m = machine()
    return (
        f"CPU: {m['cpu']}, os.cpu_count()={m['os_cpu_count']}, usable cores={m['usable_cores']}"
        f", Python {m['python']}; ledger code {CODE_AT_START['sha256']}"
    )


# --- arguments and progress ------------------------------------------------


def parser(description: str, *, events: int, repeats: int = 5, store: str = "both") -> Any:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--store", choices=["sqlite", "postgres", "both"], default=store)
    p.add_argument("--events", type=int, default=events, help=f"events (default {events:,})")
    p.add_argument("--repeats", type=int, default=repeats, help=f"runs (default {repeats})")
    p.add_argument("--no-files", action="store_true", help="do not write results/ JSON or PNG")
    return p


def stores(choice: str) -> list[str]:
    return ["sqlite", "postgres"] if choice == "both" else [choice]


def on_terminal() -> bool:
    return sys.stderr.isatty()


def note(message: str) -> None:
    """A progress line on stderr (on a terminal beside the bars; elsewhere, a
    log or CI, the only sign of a run that takes minutes)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def progress(label: str, total: int | None = None) -> Iterator[Callable[[int], None]]:
    """A tqdm bar on stderr when it is a terminal; a no-op callback otherwise."""
    if not on_terminal():
        yield lambda _n: None
        return
    from tqdm import tqdm

    bar = tqdm(desc=label, total=total, unit="ev", unit_scale=True, leave=False, file=sys.stderr)
    try:
        yield bar.update
    finally:
        bar.close()


# --- stores ----------------------------------------------------------------


@contextlib.contextmanager
def temp_dir(prefix: str = "ledger-bench-") -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def fresh_store(kind: str, workdir: Path) -> Iterator[str]:
    """A store URL for a new, empty store: a new SQLite file or a new PG schema."""
    tag = secrets.token_hex(4)
    if kind == "sqlite":
        path = workdir / f"bench_{tag}.db"
        try:
            yield f"sqlite:///{path}"  # workdir is absolute: sqlite:////tmp/...
        finally:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)
        return
    if kind != "postgres":
        raise ValueError(kind)
    import psycopg

    schema = f"bench_{tag}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{PG_DSN}?schema={schema}"
    finally:
        with psycopg.connect(PG_DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def settle_store(url: str, *, timeout: float = 120.0) -> float:
    """Let a store just built go quiet before it is measured; return the seconds it took.

    On PostgreSQL the build leaves dirty buffers and wakes autovacuum on the
    new tables: both would take CPU from the runs that follow (on 2 cores, a
    tenth of a run). VACUUM (ANALYZE) and CHECKPOINT do that work now, then we
    wait until no autovacuum worker is left. SQLite: the WAL is checkpointed."""
    from ledger.store.config import environment_for

    started = time.perf_counter()
    env = environment_for(url, create=False)
    if "SQLITE_DBNAME" in env:
        import sqlite3

        with contextlib.closing(sqlite3.connect(env["SQLITE_DBNAME"])) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return time.perf_counter() - started
    import psycopg

    schema = env["POSTGRES_SCHEMA"]
    with psycopg.connect(url.partition("?")[0], autocommit=True) as conn:
        tables = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
        ).fetchall()
        for (table,) in tables:
            conn.execute(f'VACUUM (ANALYZE) "{schema}"."{table}"')
        conn.execute("CHECKPOINT")
        while time.perf_counter() - started < timeout:
            busy = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE backend_type = "
                "'autovacuum worker' AND datname = current_database()"
            ).fetchone()
            if busy is None or busy[0] == 0:
                break
            time.sleep(0.5)
    return time.perf_counter() - started


def plain_env(url: str) -> dict[str, str]:
    """The same persistence settings as the ledger's, with eventsourcing's own recorder."""
    from ledger.store.config import environment_for

    env = environment_for(url)
    env.pop("APPLICATION_RECORDER_TOPIC")
    return env


@dataclass
class Keys:
    path: Path
    keyring: Any
    node_signer: Any
    checkpoint_signer: Any


def make_keys(workdir: Path) -> Keys:
    """An unencrypted key directory with the node's two keys (a benchmark, not a deploy)."""
    from ledger.crypto.keys import Role
    from ledger.crypto.keystore import KeyDirectory

    directory = KeyDirectory(workdir / "keys")
    directory.create_node_keys(None)
    return Keys(
        directory.path,
        directory.keyring(),
        directory.signer(Role.LEDGER_NODE, None),
        directory.signer(Role.CHECKPOINT, None),
    )


def make_tables(events: int, per_stream: int = 10, seed: int = 1) -> list[Any]:
    """New Table aggregates with pending events (Opened + DiceThrown...), `events` in all.

    The same seed gives the same names and dice (not the same ids: those are uuid4).
    """
    import random

    from tests.demo_table import Table

    rng = random.Random(seed)
    tables: list[Any] = []
    made = 0
    while made < events:
        size = min(per_stream, events - made)
        table = Table(name=f"T{len(tables) + 1}", dealer=f"D{rng.randint(1, 9)}")
        for _ in range(size - 1):
            table.throw_dice([rng.randint(1, 6) for _ in range(3)])
        tables.append(table)
        made += size
    return tables


def table_batches(events: int, per_stream: int = 10, seed: int = 1) -> list[list[Any]]:
    """The same domain events as `make_tables`, collected into one list per aggregate."""
    return [list(table.collect_events()) for table in make_tables(events, per_stream, seed)]


def read_one_event(app: Any, signer_check: Any, stream: str) -> None:
    """A read baseline: one event by its stream index, its envelope checked (row,
    signature): the least any read of a verified fact costs."""
    from ledger.crypto.envelope import check_row, open_envelope

    row = app.tables.row_by_stream(stream, 1)
    envelope = open_envelope(bytes(row[4]), stream=stream, version=1)
    check_row(envelope, stream=stream, version=1, topic=row[3])
    signer_check.check_signature(envelope, stream=stream, version=1)


# --- statistics and output -------------------------------------------------


@dataclass
class Comparison:
    """One subject-vs-baseline measurement on one store, over R interleaved runs."""

    store: str
    metric: str  # what is compared, e.g. "append events/s"
    baseline: str
    subject: str
    unit: str
    target: float | None  # subject/baseline must be >= target (None: informational)
    baseline_runs: list[float] = field(default_factory=list)
    subject_runs: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, baseline: float, subject: float) -> None:
        self.baseline_runs.append(baseline)
        self.subject_runs.append(subject)

    @property
    def ratios(self) -> list[float]:
        return [s / b for b, s in zip(self.baseline_runs, self.subject_runs, strict=True) if b]

    @property
    def baseline_median(self) -> float:
        return statistics.median(self.baseline_runs)

    @property
    def subject_median(self) -> float:
        return statistics.median(self.subject_runs)

    @property
    def ratio_median(self) -> float:
        return statistics.median(self.ratios)

    @property
    def met(self) -> bool | None:
        return None if self.target is None else self.ratio_median >= self.target

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data |= {
            "ratios": self.ratios,
            "baseline_median": self.baseline_median,
            "subject_median": self.subject_median,
            "ratio_median": self.ratio_median,
            "ratio_min": min(self.ratios),
            "ratio_max": max(self.ratios),
            "target_met": self.met,
        }
        return data


@dataclass
class Measure:
    """A single quantity with a ceiling target (e.g. peak memory)."""

    store: str
    metric: str
    unit: str
    limit: float | None  # must be < limit
    runs: list[float] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def met(self) -> bool | None:
        return None if self.limit is None else self.median < self.limit

    def as_json(self) -> dict[str, Any]:
        return asdict(self) | {"median": self.median, "target_met": self.met}


def _fmt(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _verdict(met: bool | None) -> str:
    return "-" if met is None else ("met" if met else "MISSED")


def render_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    return "\n".join(lines)


def comparison_table(comparisons: list[Comparison]) -> str:
    headers = [
        "store",
        "metric",
        "baseline",
        "median",
        "subject",
        "median",
        "ratio (min..max)",
        "target",
        "verdict",
    ]
    rows = []
    for c in comparisons:
        rows.append(
            [
                c.store,
                f"{c.metric} [{c.unit}]",
                c.baseline,
                _fmt(c.baseline_median),
                c.subject,
                _fmt(c.subject_median),
                f"{c.ratio_median:.3f}x ({min(c.ratios):.2f}..{max(c.ratios):.2f})",
                "" if c.target is None else f">= {c.target}x",
                _verdict(c.met),
            ]
        )
    return render_table(headers, rows)


def measure_table(measures: list[Measure]) -> str:
    headers = ["store", "metric", "median", "runs", "target", "verdict"]
    rows = [
        [
            m.store,
            f"{m.metric} [{m.unit}]",
            _fmt(m.median),
            ", ".join(_fmt(r) for r in m.runs),
            "" if m.limit is None else f"< {m.limit:g} {m.unit}",
            _verdict(m.met),
        ]
        for m in measures
    ]
    return render_table(headers, rows)


def write_results(
    name: str,
    args: argparse.Namespace,
    comparisons: list[Comparison],
    measures: list[Measure] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path | None:
    if getattr(args, "no_files", False):
        return None
    RESULTS.mkdir(exist_ok=True)
    code_now = code_fingerprint()
    changes = code_changes()
    if changes["used"]:
        print(
            f"WARNING: ledger/ files this run imported changed while it ran: "
            f"{', '.join(changes['used'])}: results may mix two versions of the code",
            file=sys.stderr,
        )
    elif changes["other"]:
        print(
            f"note: other ledger/ files changed during the run (not imported here): "
            f"{', '.join(changes['other'])}",
            file=sys.stderr,
        )
    data = {
        "script": f"tools/{name}.py",
        "started": STARTED,
        "ledger_code": {"at_start": CODE_AT_START, "at_end": code_now, "changed": changes},
        "command": shlex.join([Path(sys.executable).name, f"tools/{name}.py", *sys.argv[1:]]),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
        "comparisons": [c.as_json() for c in comparisons],
        "measures": [m.as_json() for m in measures or []],
    } | (extra or {})
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    chart(name, comparisons, measures or [])
    return path


def chart(name: str, comparisons: list[Comparison], measures: list[Measure]) -> Path | None:
    """Bar chart of the medians (baseline vs subject per comparison), if matplotlib exists."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        note("matplotlib is not installed: no PNG chart")
        return None
    panels = len(comparisons) + (1 if measures else 0)
    if not panels:
        return None
    columns = min(panels, 4)
    rows = -(-panels // columns)
    fig, grid = plt.subplots(rows, columns, figsize=(3.8 * columns, 4.0 * rows), squeeze=False)
    axes = [ax for row in grid for ax in row]
    for ax in axes[panels:]:
        ax.set_visible(False)
    for ax, c in zip(axes, comparisons, strict=False):
        bars = ax.bar(
            [c.baseline, c.subject],
            [c.baseline_median, c.subject_median],
            color=["#8da0cb", "#fc8d62"],
        )
        ax.bar_label(bars, labels=[_fmt(c.baseline_median), _fmt(c.subject_median)], fontsize=8)
        target = "" if c.target is None else f" (target >= {c.target}x)"
        ax.set_title(f"{c.store}: {c.metric}\nratio {c.ratio_median:.2f}x{target}", fontsize=9)
        ax.set_ylabel(c.unit, fontsize=8)
        ax.tick_params(axis="x", labelsize=7, rotation=12)
        ax.tick_params(axis="y", labelsize=7)
    if measures:
        ax = axes[panels - 1]
        labels = [m.store for m in measures]
        bars = ax.bar(labels, [m.median for m in measures], color="#66c2a5")
        ax.bar_label(bars, labels=[_fmt(m.median) for m in measures], fontsize=8)
        for m in measures:
            if m.limit is not None:
                ax.axhline(m.limit, color="red", linestyle="--", linewidth=1)
        ax.set_title(f"{measures[0].metric}\n(red: limit)", fontsize=9)
        ax.set_ylabel(measures[0].unit, fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
    fig.suptitle(f"{name}: {cpu_model()}, {cores()} cores", fontsize=9)
    fig.tight_layout()
    path = RESULTS / f"{name}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def replot(name: str) -> Path | None:
    """Redraw results/<name>.png from results/<name>.json."""
    data = json.loads((RESULTS / f"{name}.json").read_text())
    fields = {f for f in Comparison.__dataclass_fields__}
    comparisons = [
        Comparison(**{k: v for k, v in c.items() if k in fields}) for c in data["comparisons"]
    ]
    mfields = {f for f in Measure.__dataclass_fields__}
    measures = [Measure(**{k: v for k, v in m.items() if k in mfields}) for m in data["measures"]]
    return chart(name, comparisons, measures)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


# `ledger ARGS` run in a fresh interpreter that then prints its own peak RSS:
# VmHWM is per address space (ru_maxrss would carry this process's mark across
# fork+exec), so a worker's or the parent's memory is not counted in.
LEDGER_WITH_PEAK = """
import json, sys
from ledger.cli.main import main
code = main(sys.argv[1:])
with open("/proc/self/status") as status:
    hwm = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print("BENCH-HWM " + json.dumps({"code": code, "hwm_kb": hwm}), flush=True)
sys.exit(code)
"""


def peak_kb(stdout: str) -> int | None:
    """The peak RSS (kB) a `LEDGER_WITH_PEAK` run printed, None if it printed none."""
    line = next((x for x in stdout.splitlines() if x.startswith("BENCH-HWM ")), None)
    return None if line is None else int(json.loads(line.split(" ", 1)[1])["hwm_kb"])


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int, children: bool = False) -> float:
    """User + system CPU of a process (and of its reaped children), 0 if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    used = int(fields[11]) + int(fields[12])  # utime, stime
    if children:
        used += int(fields[13]) + int(fields[14])  # cutime, cstime
    return used / TICKS


def with_descendants(pids: list[int]) -> list[int]:
    """`pids` and every live process below them (a node's writer process)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            parents[int(entry.name)] = int(stat[1])
    found, todo = set(pids), list(pids)
    while todo:
        parent = todo.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                found.add(child)
                todo.append(child)
    return sorted(found)
