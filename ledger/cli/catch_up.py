"""The read models brought up to the log's end before a command reads them."""

from __future__ import annotations

from ledger.cli.progress import progress_bar
from ledger.node import Node
from ledger.projections import ProjectionRunner


def catch_up(node: Node) -> None:
    """The projections up to the log's end (only when it moved on)."""
    runner = ProjectionRunner(node.app)
    if not runner.is_built() or runner.status().behind:
        with progress_bar("projecting") as (advance, _):
            runner.catch_up(progress=advance)
