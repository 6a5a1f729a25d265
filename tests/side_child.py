"""A side process for tests/http_api/test_side_process.py: says it is ready,
says what it was given, then waits for a stop signal and ends with exit code 3."""

from __future__ import annotations

import os
import signal
import sys
import time

from ledger.http.side_process import end_with, say_ready, stop_signals


def main(argv: list[str]) -> int:
    end_with(int(argv[0]))
    stopped = stop_signals()
    say_ready(b"ready\n")
    print(f"args={argv[1:]} setting={os.environ.get('SIDE_SETTING')} stdin={sys.stdin.read()!r}")
    sys.stdout.flush()
    while not stopped.is_set():
        time.sleep(0.01)
    return 3


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(main(sys.argv[1:]))
