"""The verifier starts a fork server for its workers only when they will run:
for a log longer than one chunk (the store's last Merkle leaf says how long,
a hint and never a finding). A PostgreSQL store's pool runs threads, so its
workers come from a fork server; verifying a store of one chunk there used to
start one anyway, a process importing the store layer for nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import PASSPHRASE

ROOT = Path(__file__).resolve().parents[2]

# In a fresh interpreter: a fork server runs until its process ends, so the
# suite's own process may have one already. Prints the children still running
# after a verify at level integrity with two workers and `chunk` leaves a chunk.
SCRIPT = """
import json, os, sys
from ledger.audit.verify import Level, VerifyOptions, verify_store
from ledger.node import open_node

store, keys, chunk = sys.argv[1], sys.argv[2], int(sys.argv[3])
node = open_node(store, keys, writable=False)
options = VerifyOptions(level=Level.INTEGRITY, workers=2, chunk_leaves=chunk)
report = verify_store(node.app, node.keyring, options)
def parent(pid):
    try:  # a process of the machine's may end while this looks
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[1]
    except OSError:
        return None

mine = str(os.getpid())
children = [pid for pid in os.listdir("/proc") if pid.isdigit() and parent(pid) == mine]
print(json.dumps({"events": report.events, "workers": report.workers,
                  "children": len(children)}))
node.close()
"""


def verified(store: str, keys: Path, chunk: int) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, store, str(keys), str(chunk)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, int] = json.loads(done.stdout)
    return found


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server: Linux only")
def test_a_fork_server_starts_only_for_a_log_longer_than_a_chunk(
    store_url: str, tmp_path: Path
) -> None:
    from ledger.cli.main import main

    keys = tmp_path / "keys"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LEDGER_PASSPHRASE", PASSPHRASE.decode())
        patch.chdir(tmp_path)
        argv = ["--store", store_url, "--keys", str(keys), "simulate", "--rounds", "2"]
        assert main(argv) == 0
    short = verified(store_url, keys, 4096)  # the whole log in one chunk
    assert short["workers"] == 1 and short["children"] == 0, short
    assert short["events"] > 8
    if store_url.startswith("postgresql"):  # the pool's threads: workers from a fork server
        long = verified(store_url, keys, 4)  # many chunks: workers asked for
        assert long["events"] == short["events"] and long["children"] >= 1, long
