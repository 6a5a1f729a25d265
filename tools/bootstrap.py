#!/usr/bin/env python3
"""Set up the project on a machine that has only Python, then run one job.

    python3 tools/bootstrap.py simulate [ARGS]   # set up, then `ledger simulate`
    python3 tools/bootstrap.py test [ARGS]       # set up, start PostgreSQL if needed, run pytest
    python3 tools/bootstrap.py setup             # set up only

Setting up = a virtualenv in .venv with the core package, its development
tools and every game plugin under plugins/, installed editable (the
core's optional C fast path built in place). It is redone only when a
pyproject.toml, setup.py or that C source changed since the last time.
uv installs it, put into the virtualenv by pip; pip itself where uv cannot.

The suite needs a PostgreSQL server: by default a database `test` on
127.0.0.1:5432 that the user `postgres` reaches without a password (trust);
LEDGER_TEST_PG_DSN and LEDGER_TEST_PG_URL point the tests elsewhere. When
they are not set and a local Debian/Ubuntu cluster is installed but down,
`test` starts it (pg_ctlcluster), as CI does. It also needs five things
from Debian, which `test` installs with apt-get when they are missing
(saying first what and why; no recommended packages, no upgrades of what is
already installed but what the new packages need):
chromium (the report's browser test), Go with golang-golang-x-mod-dev (the
tiles' and witnesses' interop tests), postgresql's server tools (the
fault tests make clusters of their own on other loopback ports, and mount a
small tmpfs, as root), nats-server (the publisher's tests run brokers of
their own; its docs example uses the machine's NATS on 127.0.0.1:4222) and
gcc's sanitizer runtimes (the C fast path is built again under
AddressSanitizer and UBSan).
"""

from __future__ import annotations

import getpass
import hashlib
import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
STAMP = VENV / ".bootstrap-stamp"


def plugin_dirs() -> list[Path]:
    return sorted(p.parent for p in (ROOT / "plugins").glob("*/pyproject.toml"))


# What the install depends on: the projects' metadata, and the C fast path that
# an editable install builds in place (a change to it must rebuild it).
BUILT_FROM = ["pyproject.toml", "setup.py", "ledger/crypto/_native.c"]


def fingerprint() -> str:
    digest = hashlib.sha256()
    paths = [ROOT / name for name in BUILT_FROM if (ROOT / name).exists()]
    for path in [*paths, *(p / "pyproject.toml" for p in plugin_dirs())]:
        digest.update(str(path.relative_to(ROOT)).encode() + path.read_bytes())
    return digest.hexdigest()


def setup(compiled: bool = True) -> Path:
    """The virtualenv, installed if needed. `compiled=False` for the suite:
    the installer then writes no bytecode beside the installed modules (one
    core, about 20 s of a fresh set-up with pip), which the suite never reads:
    it keeps its own under .venv/pycache (compile_for_tests)."""
    python = VENV / "bin" / "python"
    if not python.exists():
        print("bootstrap: creating .venv", file=sys.stderr)
        venv.EnvBuilder(with_pip=True).create(VENV)
    wanted = fingerprint()
    if not STAMP.exists() or STAMP.read_text() != wanted:
        print("bootstrap: installing the ledger and its plugins", file=sys.stderr)
        packages = ["-e", f"{ROOT}[dev]"]
        for plugin in plugin_dirs():
            packages += ["-e", str(plugin)]
        install(python, packages, compiled)
        STAMP.write_text(wanted)
    return python


UV = VENV / "bin" / "uv"
# The lines of each installer's output shown as progress (not its whole log).
PIP_PROGRESS = ("Collecting ", "Building ", "Installing collected", "Successfully")
UV_PROGRESS = ("Resolved ", "Prepared ", "Built ", "Installed ", "Uninstalled ")


def install(python: Path, packages: list[str], compiled: bool) -> None:
    """The packages, installed with uv where it can be had, else with pip.

    uv (PyPI's `uv`, put into the virtualenv by pip) installs the same
    packages, the same versions, in a fraction of pip's time: on a fresh clone
    with empty caches, the suite's install (no bytecode) took pip 23 s of a
    2-core machine and uv 4 s, and `setup`'s (with bytecode) pip 38 s
    (2026-12-05).
    Where uv cannot be installed, or fails, pip does the install as before.
    """
    pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check"]
    if UV.exists() or run_quietly([*pip, "--quiet", "uv"]):
        bytecode = ["--compile-bytecode"] if compiled else []
        command = [str(UV), "pip", "install", "--python", str(python), *bytecode, *packages]
        if run_install(command, UV_PROGRESS, "uv"):
            return
        print("bootstrap: uv could not install them; pip now", file=sys.stderr)
    if not run_install(
        [*pip, *packages, *([] if compiled else ["--no-compile"])], PIP_PROGRESS, "pip"
    ):
        raise SystemExit("bootstrap: pip install failed")


def run_quietly(command: list[str]) -> bool:
    return subprocess.run(command, capture_output=True, check=False).returncode == 0


def run_install(command: list[str], progress: tuple[str, ...], name: str) -> bool:
    """An installer, with a line per step that `progress` names; its last
    lines when it fails. Whether it succeeded."""
    started, log = time.monotonic(), []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as installer:
        assert installer.stdout is not None
        for line in installer.stdout:
            log.append(line)
            if line.startswith(progress):
                elapsed = time.monotonic() - started
                print(f"bootstrap: {elapsed:4.0f} s  {line.strip()[:100]}", file=sys.stderr)
    if installer.returncode != 0:
        sys.stderr.write("".join(log[-60:]))
        print(f"bootstrap: {name} install failed ({installer.returncode})", file=sys.stderr)
    return installer.returncode == 0


# Where Debian's golang-golang-x-mod-dev puts the Go packages the interop tests build against.
GO_SUMDB = Path("/usr/share/gocode/src/golang.org/x/mod/sumdb")


def missing_system_packages() -> dict[str, str]:
    """Debian packages the suite needs and this machine lacks, each with why
    (only what is missing: a Go of its own is used as it is)."""
    missing = {}
    if not shutil.which("chromium"):
        missing["chromium"] = "the report's browser test (headless Chromium)"
    if not shutil.which("go"):
        missing["golang-go"] = "the interop tests build Go programs against our logs"
    if not GO_SUMDB.is_dir():
        missing["golang-golang-x-mod-dev"] = (
            "the interop tests (Go's golang.org/x/mod/sumdb/{note,tlog})"
        )
    if not shutil.which("nats-server") and not Path("/usr/sbin/nats-server").is_file():
        missing["nats-server"] = "the publisher's tests run NATS servers of their own"
    if not any(Path("/usr/lib/postgresql").glob("*/bin/initdb")):
        # The fault tests make clusters of their own (initdb, pg_ctl, pg_basebackup);
        # the shared test server may be another machine.
        missing["postgresql"] = "the fault tests' own clusters (initdb, pg_ctl, pg_basebackup)"
    for package in sanitizer_packages():
        missing[package] = "the C fast path built with AddressSanitizer and UBSan"
    return missing


def sanitizer_packages() -> list[str]:
    """What tests/audit/test_native_sanitized.py lacks to build ledger/crypto/_native.c
    under gcc's sanitizers: gcc itself, or the runtimes its libgcc-N-dev brings."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return ["gcc"]
    runtime = subprocess.run(
        [gcc, "-print-file-name=libasan.so"], capture_output=True, text=True, check=False
    ).stdout.strip()
    if Path(runtime).is_absolute() and Path(runtime).exists():
        return []
    version = subprocess.run(
        [gcc, "-dumpversion"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return [f"libgcc-{version.split('.')[0]}-dev"]


def apt_install(packages: list[str]) -> list[str]:
    """apt-get's command installing these packages and only what they depend on.

    --no-install-recommends: not what they merely recommend (with chromium's
    and postgresql's recommends, a new user's machine got 112 packages in place
    of 25, udev, avahi and a print system among them, and upgraded its systemd
    packages to match the new udev). --no-upgrade: a listed package already
    installed stays as it is. A package they depend on is still upgraded when
    they need a newer version than the installed one (apt-get has no option
    against that); the simulation before the install names any such."""
    return ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "--no-upgrade", *packages]


def simulated(output: str) -> tuple[list[str], list[str]]:
    """What `apt-get install -s` would install new and what it would upgrade,
    from its lines `Inst NAME (VERSION ...)` and `Inst NAME [OLD] (VERSION ...)`."""
    new, upgraded = [], []
    for line in output.splitlines():
        if line.startswith("Inst "):
            name, _, rest = line[5:].partition(" ")
            (upgraded if rest.startswith("[") else new).append(name)
    return new, upgraded


def install_system_packages() -> None:
    """What the suite needs from Debian, installed with apt (as root, or sudo)
    when it is missing and apt is there: said first, package by package, then
    one update, what the install would do (simulated), and the install."""
    missing = missing_system_packages()
    if not missing or not shutil.which("apt-get"):
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    print(
        f"bootstrap: the suite needs {len(missing)} Debian package(s) this machine lacks;"
        " apt-get installs only these and what they depend on, nothing they merely"
        " recommend, and upgrades no installed package they do not need newer:",
        file=sys.stderr,
    )
    for package, why in missing.items():
        print(f"bootstrap:   {package}: {why}", file=sys.stderr)
    install = apt_install(list(missing))
    if subprocess.run([*sudo, "apt-get", "update", "-qq"], check=False).returncode == 0:
        plan = subprocess.run(
            [*install[:2], "-s", *install[2:]], capture_output=True, text=True, check=False
        )
        new, upgraded = simulated(plan.stdout)
        print(f"bootstrap: apt-get installs {len(new)}: {' '.join(new)}", file=sys.stderr)
        if upgraded:
            print(f"bootstrap: and upgrades {len(upgraded)}: {' '.join(upgraded)}", file=sys.stderr)
        if subprocess.run([*sudo, *install], check=False).returncode == 0:
            return
    print(f"bootstrap: could not install {' '.join(missing)}", file=sys.stderr)


# Where the suite's processes keep their bytecode (tests/bytecode_cache.py).
TEST_PYCACHE = VENV / "pycache"
# The parts of the standard library the suite never imports (and its own
# site-packages, not this project's).
STDLIB_UNUSED = r"[/\\](test|idlelib|lib2to3|tkinter|turtledemo|ensurepip|site-packages)[/\\]"
# And of the virtualenv: the packages' own tests, and what only the developer
# tools use (mypy, mypyc) or nothing the suite runs reaches (graphql,
# fontTools, markdown_it, pycryptodome's self-tests); a third of its files.
# Whatever of it a test does import is compiled then, by that process.
VENV_UNUSED = r"[/\\](tests?|mypy|mypyc|graphql|fontTools|SelfTest|markdown_it)[/\\]"


def reuse_compiled(tree: Path, tag: str) -> None:
    """The bytecode Python's installer compiled beside its standard library,
    linked into the suite's cache where the cache would put it (compileall then
    finds it up to date instead of compiling it again: about half the set-up's
    compiling). A file it does not match is compiled as before."""
    for cache in tree.rglob("__pycache__"):
        target = TEST_PYCACHE / cache.parent.relative_to(cache.parent.anchor)
        for compiled in cache.glob(f"*.{tag}.pyc"):
            destination = target / compiled.name
            if destination.exists():
                continue
            target.mkdir(parents=True, exist_ok=True)
            try:
                os.link(compiled, destination)
            except OSError:  # another file system: a copy
                shutil.copyfile(compiled, destination)


def compile_for_tests(python: Path) -> None:
    """Compile the bytecode the suite reads, once, before it starts.

    The suite keeps bytecode under .venv/pycache (tests/bytecode_cache.py),
    where no installer put any: on a fresh set-up its first test processes
    all compiled the same standard library, packages and sources at once,
    about 30 s of a 2-core machine's run. Done again after each new set-up
    (the sources edited since are compiled as they are imported)."""
    done = TEST_PYCACHE / ".compiled-for"
    if done.exists() and done.read_text() == STAMP.read_text():
        return
    stdlib, tag = subprocess.run(
        [
            str(python),
            "-c",
            "import sys, sysconfig; print(sysconfig.get_paths()['stdlib']);"
            " print(sys.implementation.cache_tag)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    ours = [str(ROOT / name) for name in ("ledger", "plugins", "tests")]
    started = time.monotonic()
    reuse_compiled(Path(stdlib), tag)
    for targets, skip in (
        ([stdlib], ["-x", STDLIB_UNUSED]),
        ([str(VENV / "lib")], ["-x", VENV_UNUSED]),
        (ours, []),
    ):
        subprocess.run(
            [str(python), "-m", "compileall", "-q", "-j", "0", *skip, *targets],
            env={**os.environ, "PYTHONPYCACHEPREFIX": str(TEST_PYCACHE)},
            stdout=subprocess.DEVNULL,  # a file that does not compile is the suite's to report
            check=False,
        )
    done.write_text(STAMP.read_text())
    print(f"bootstrap: bytecode compiled in {time.monotonic() - started:.0f} s", file=sys.stderr)


def start_postgres() -> None:
    """Start the local cluster if it is installed, down, and the tests would use it."""
    if os.environ.get("LEDGER_TEST_PG_DSN") or not shutil.which("pg_isready"):
        return
    ready = ["pg_isready", "-q", "-h", "127.0.0.1", "-p", "5432"]
    if subprocess.run(ready, check=False).returncode == 0:
        return
    clusters = Path("/etc/postgresql")
    if not shutil.which("pg_ctlcluster") or not clusters.is_dir():
        print("bootstrap: PostgreSQL is not running on 127.0.0.1:5432", file=sys.stderr)
        return
    for version in sorted(p.name for p in clusters.iterdir()):
        print(f"bootstrap: starting PostgreSQL {version}/main", file=sys.stderr)
        start = ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "start"]
        subprocess.run(start, check=False)


def ask_passphrase_first(rest: list[str]) -> None:
    """For `simulate` on a terminal: the key passphrase now, before the install,
    so nothing is typed (and echoed) while pip runs; handed to the session as
    LEDGER_PASSPHRASE, so it does not ask again. Twice only when no keyring
    exists yet (the session will make keys with it)."""
    if os.environ.get("LEDGER_PASSPHRASE") or "--unencrypted" in rest or not sys.stdin.isatty():
        return
    keys = Path(os.environ.get("LEDGER_KEYS") or ROOT / "keys")
    typed = getpass.getpass("Key passphrase: ")
    if typed and not (keys / "keyring.json").exists() and getpass.getpass("Again: ") != typed:
        raise SystemExit("bootstrap: the two passphrases differ")
    if typed:
        os.environ["LEDGER_PASSPHRASE"] = typed


JOBS = ("simulate", "test", "setup")


def main(argv: list[str]) -> int:
    job, *rest = argv or ["setup"]
    if job in ("-h", "--help"):  # nothing is set up for it
        try:
            print(__doc__, flush=True)
        except BrokenPipeError:  # `--help | head`: the reader had what it wanted
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    if job not in JOBS:
        print(f"bootstrap: unknown job {job!r} (simulate, test or setup; --help)", file=sys.stderr)
        return 2
    if job == "simulate":
        ask_passphrase_first(rest)
    python = setup(compiled=job != "test")
    if job == "setup":
        return 0
    if job == "simulate":
        command = [str(VENV / "bin" / "ledger"), "simulate", *rest]
    elif job == "test":
        install_system_packages()
        start_postgres()
        compile_for_tests(python)
        command = [str(python), "-m", "pytest", *rest]
    else:  # (JOBS above)
        raise AssertionError(job)
    os.chdir(ROOT)
    os.execv(command[0], command)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
