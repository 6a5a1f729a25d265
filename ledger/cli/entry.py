"""The `ledger` command's entry point, importing nothing at module level.

The console script imports this module; `ledger.cli.main` (every command's
parser and, through them, most of the ledger) is imported when it runs.
`ledger verify` starts its worker processes with multiprocessing's spawn,
which re-imports the script in each: with the commands imported here at
module level, each worker would spend about a second importing commands it
never runs before verifying its first chunk.
"""

from __future__ import annotations

import signal

INTERRUPTED = 130  # the exit code of a command ended by Ctrl-C (docs/cli.md)


def main() -> int:
    from ledger.cli.main import main as run

    code = run()
    if code == INTERRUPTED:
        # Ended by Ctrl-C: another one while the interpreter exits would turn
        # the documented exit code into a death by signal (or a traceback).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code
