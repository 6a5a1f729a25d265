"""The `ledger` command's entry point, importing nothing at module level.

The console script imports this module; `ledger.cli.main` (every command's
parser and, through them, most of the ledger) is imported when it runs.
Where `ledger verify` spawns its worker processes (it forks them on Linux
while it runs one thread), multiprocessing re-imports the script in each:
with the commands imported here at module level, each worker would spend
about a second importing commands it never runs before its first chunk.
"""

from __future__ import annotations


def main() -> int:
    from ledger.cli.main import run_program

    return run_program()
