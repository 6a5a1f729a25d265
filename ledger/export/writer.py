"""`ledger export DIR`: write an auditor's bundle, streaming through the log.

What is selected: the whole log, one round (its stream's events), or a range
of log positions. A bundle that is not the whole log carries an inclusion
proof for each of its events against one checkpoint (the newest), and a
consistency proof that this checkpoint extends each older one that first
covers one of its events (signing keys are judged by the first checkpoint
covering an event: a revoked key's signatures count only under a checkpoint
issued before the revocation), so it verifies alone.
Memory stays flat in the log's size: rows are read in batches and written as
they come; only a small per-stream currency cache grows with the streams.
"""

from __future__ import annotations

import base64
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ledger.audit.log.checkpoints import valid_checkpoints
from ledger.audit.log.key_times import Coverage, checkpoint_times
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Keyring
from ledger.crypto.merkle import Subtree, consistency_proof, inclusion_proof
from ledger.crypto.witness_policy import with_cosignatures
from ledger.domain import stored_names
from ledger.errors import ConfigError, VerificationError
from ledger.export.bundle_files import (
    CHECKPOINTS,
    CONSISTENCY,
    EVENTS,
    FORMAT,
    GAMES,
    KEYRING,
    MANIFEST,
    PROOFS,
    ROUND_OPENED,
)
from ledger.export.records import (
    SCHEMA_VERSION,
    decode_payload,
    event_line,
    opening_currency,
    split_envelope,
)
from ledger.export.tlog_proofs import write_tlog_proof
from ledger.plugins.registry import LoadedGame
from ledger.plugins.registry import rules_hash as rules_hash_of
from ledger.plugins.rules_register import RecordedRules, recorded_rules
from ledger.store.application import LedgerApplication
from ledger.store.archived import ArchivedTable
from ledger.store.merkle_log import (
    CheckpointRow,
    MerkleLogTables,
    parse_checkpoint_row,
    stream_of,
)
from ledger.store.recorders import Row
from ledger.store.stream_ids import Kind, require_stream
from ledger.store.witnessing import CosignatureTable

BATCH = 5000
ROUND_OPENED_TOPIC = ":" + ROUND_OPENED
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclass(frozen=True)
class Selection:
    """What to export: everything, one round, or log positions [first, last]."""

    round_id: str | None = None
    first: int | None = None
    last: int | None = None

    @property
    def kind(self) -> str:
        if self.round_id is not None:
            return "round"
        return "all" if self.first is None and self.last is None else "range"

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "round": self.round_id, "from": self.first, "to": self.last}


@dataclass
class ExportSummary:
    directory: Path
    events: int
    checkpoints: int
    games: int
    proofs_against: int | None
    # Sizes of the older checkpoints consistency.jsonl proves the newest extends.
    consistency_from: tuple[int, ...] = ()


class _Currencies:
    """The currency of each stream, from its opening event (read once when needed)."""

    def __init__(self, tables: MerkleLogTables) -> None:
        self._tables = tables
        self._known: dict[object, str | None] = {}

    def of(self, stream: object, version: int, state: bytes) -> str | None:
        """`stream` is the row's stream id column (its form depends on the store)."""
        if version == 1:
            currency = opening_currency(state)
            if currency is not None:
                self._known[stream] = currency
            return currency
        if stream not in self._known:
            row = self._tables.row_by_stream(stream_of(stream), 1)
            self._known[stream] = opening_currency(bytes(row[4])) if row else None
        return self._known[stream]


def _rows_from(tables: MerkleLogTables, after_id: int) -> Iterator[Row]:
    while rows := tables.rows_after(after_id, BATCH):
        yield from rows
        after_id = rows[-1][0]


def _round_rows(tables: MerkleLogTables, round_id: str) -> Iterator[tuple[int, Row]]:
    """(log position, row) of every event of the round's stream, by version."""
    version = 1
    while (row := tables.row_by_stream(round_id, version)) is not None:
        position = tables.leaf_index_of(row[0])
        if position is None:
            raise ConfigError(
                f"round {round_id} version {version} is not under a checkpoint yet: "
                "run `ledger checkpoint` first"
            )
        yield position, row
        version += 1


def _selected(
    tables: MerkleLogTables, selection: Selection, log_size: int
) -> Iterator[tuple[int, Row]]:
    if selection.round_id is not None:
        yield from _round_rows(tables, selection.round_id)
        return
    first = selection.first or 0
    last = log_size - 1 if selection.last is None else selection.last
    if first > last or last >= log_size:
        raise ConfigError(
            f"log positions {first}..{last} are not in the log (it holds positions "
            f"0..{log_size - 1})"
        )
    after = 0
    if first > 0:
        found = tables.id_at_offset(first - 1)
        if found is None:
            raise ConfigError(f"log position {first} is not in the log")
        after = found
    position = first
    for row in _rows_from(tables, after):
        if position > last:
            return
        yield position, row
        position += 1


def _games_used(
    seen: Mapping[tuple[str, str], Mapping[str, Any]],
    installed: Mapping[str, LoadedGame],
    recorded: list[RecordedRules],
) -> list[dict[str, Any]]:
    """The rules data of every (game, rules hash) a round in the bundle opened
    with: the installed game's, else the store's rules register's (an earlier
    release's rules: docs/plugins.md), once checked to hash to the rules hash."""
    kept = {(r.game, r.rules_hash): r for r in recorded if rules_hash_of(r.rules) == r.rules_hash}
    games = []
    for (game_id, pinned), opened in sorted(seen.items()):
        game = installed.get(game_id)
        if game is not None and game.rules_hash != pinned:
            game = None  # installed, but with other rules than the rounds pinned
        record = kept.get((game_id, pinned))
        games.append(
            {
                "game": game_id,
                "rules_hash": pinned,
                "settlement_api": opened.get("settlement_api", 1),
                "played_with": opened.get("game_version"),
                "rules": dict(game.rules) if game else record.rules if record else None,
                "plugin": game.plugin if game else record.plugin if record else None,
                "plugin_version": (
                    game.version if game else record.plugin_version if record else None
                ),
            }
        )
    return games


def export_bundle(
    app: LedgerApplication,
    keyring: Keyring,
    directory: Path,
    selection: Selection,
    installed: Mapping[str, LoadedGame],
    progress: Callable[[int], None] | None = None,
    on_total: Callable[[int], None] | None = None,
) -> ExportSummary:
    """Write the bundle into `directory` (created; must be empty if it exists).

    The files are written into a scratch directory beside it, renamed into
    place only when complete: a refused or failed export leaves nothing."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise ConfigError(f"cannot export to {directory}: it exists and is not an empty directory")
    if not directory.parent.is_dir():
        raise ConfigError(f"cannot export to {directory}: {directory.parent} is not a directory")
    if selection.round_id is not None:  # a table's or an account's id is refused, not exported
        selection = replace(
            selection, round_id=require_stream(app.tables, selection.round_id, Kind.ROUND)
        )
    _refuse_archived(app, selection)
    scratch = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        summary = _export_into(app, keyring, scratch, selection, installed, progress, on_total)
        if directory.exists():
            directory.rmdir()
        scratch.rename(directory)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    summary.directory = directory
    return summary


def _refuse_archived(app: LedgerApplication, selection: Selection) -> None:
    """An export reads the store: positions whose events left for an archive
    (`ledger archive`) are not in it. The archive directory is the export of those."""
    if selection.round_id is not None:
        first = app.tables.row_by_stream(selection.round_id, 1)
        if first is not None and first[3] is None:
            raise ConfigError(
                f"round {selection.round_id} is archived: its events are in its archive "
                "directory's events.jsonl (ledger archive check DIR verifies it; docs/archive.md)"
            )
        return
    archived = sum(ArchivedTable(app.tables).counts().values())
    if archived:
        raise ConfigError(
            f"{archived} events of this store left it for archives (ledger archive): an export "
            "of log positions would miss them; export single rounds, and keep the archive "
            "directories, which verify on their own (docs/archive.md)"
        )


def _export_into(
    app: LedgerApplication,
    keyring: Keyring,
    directory: Path,
    selection: Selection,
    installed: Mapping[str, LoadedGame],
    progress: Callable[[int], None] | None,
    on_total: Callable[[int], None] | None,
) -> ExportSummary:
    tables = app.tables
    log_size, _ = tables.event_count()
    if log_size == 0:
        raise ConfigError("the log is empty: nothing to export")
    valid = valid_checkpoints(tables, keyring)
    checkpoint = max(valid, key=lambda c: c.size, default=None)
    partial = selection.kind != "all"
    if partial and checkpoint is None:
        raise ConfigError("no valid checkpoint in the store: run `ledger checkpoint` first")
    if on_total:
        on_total(log_size if selection.kind == "all" else 0)
    subtree = tables.subtree_reader() if partial else None
    proving = _Proving(tables, checkpoint, subtree, valid) if subtree and checkpoint else None
    written = _write_events(tables, directory, selection, log_size, proving, progress)
    older: tuple[int, ...] = ()
    if proving is not None:
        older = tuple(sorted(proving.first_covering - {proving.checkpoint.size}))
        _write_consistency(directory / CONSISTENCY, older, proving.checkpoint.size, proving.subtree)
    checkpoints = _write_checkpoints(tables, directory / CHECKPOINTS)
    (directory / KEYRING).write_text(keyring.to_json(), encoding="utf-8")
    games = _games_used(written.rounds, installed, recorded_rules(app))
    with (directory / GAMES).open("w", encoding="utf-8") as out:
        for game in games:
            out.write(_dumps(game) + "\n")
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "format": FORMAT,
        "origin": checkpoint.origin if checkpoint else None,
        "selection": selection.to_json(),
        "log_size": log_size,
        "events": written.count,
        "first_position": written.first,
        "last_position": written.last,
        "proofs_against": checkpoint.size if partial and checkpoint else None,
        "exported_at": datetime.now(UTC).isoformat(),
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return ExportSummary(
        directory,
        written.count,
        checkpoints,
        len(games),
        checkpoint.size if partial and checkpoint else None,
        older,
    )


@dataclass
class _Written:
    """What the events written say, for the manifest and the games file."""

    count: int = 0
    first: int | None = None
    last: int | None = None
    # (game, rules hash) -> the opening payload of a round played with them
    rounds: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)


class _Proving:
    """A partial bundle's proofs: each event's inclusion under the newest
    checkpoint, and the first checkpoint covering each (whose issue time its
    key is judged by, so the consistency proofs to those are written too)."""

    def __init__(
        self,
        tables: MerkleLogTables,
        checkpoint: Checkpoint,
        subtree: Subtree,
        valid: list[Checkpoint],
    ) -> None:
        self.checkpoint, self.subtree = checkpoint, subtree
        self.coverage = Coverage(checkpoint_times(valid))
        self.first_covering: set[int] = set()
        # A round's tlog-proofs carry the checkpoint as witnesses cosigned it.
        self.note = CosignatureTable(tables).cosigned(checkpoint).to_note()

    def proof_line(self, directory: Path, position: int, state: bytes, round_kind: bool) -> str:
        checkpoint = self.checkpoint
        if position >= checkpoint.size:
            raise ConfigError(
                f"log position {position} is not under the newest checkpoint (size "
                f"{checkpoint.size}): run `ledger checkpoint` first"
            )
        path = inclusion_proof(position, checkpoint.size, self.subtree)
        if round_kind:
            entry = split_envelope(state)[1]
            write_tlog_proof(directory, position, entry, path, self.note)
        self.first_covering.add(self.coverage.first_covering(position)[1] or checkpoint.size)
        record = {
            "position": position,
            "tree_size": checkpoint.size,
            "proof": [_b64(p) for p in path],
        }
        return _dumps(record) + "\n"


def _write_events(
    tables: MerkleLogTables,
    directory: Path,
    selection: Selection,
    log_size: int,
    proving: _Proving | None,
    progress: Callable[[int], None] | None,
) -> _Written:
    """events.jsonl (and a partial bundle's proofs.jsonl), a thousand lines a write."""
    written = _Written()
    currencies = _Currencies(tables)
    with (
        (directory / EVENTS).open("w", encoding="utf-8") as events,
        (directory / PROOFS).open("w", encoding="utf-8") if proving else nullcontext() as proofs,
    ):
        pending: list[str] = []  # lines written a batch at a time
        for position, row in _selected(tables, selection, log_size):
            state = bytes(row[4])
            pending.append(event_line(position, state, currencies.of(row[1], row[2], state)))
            if row[3].endswith(ROUND_OPENED_TOPIC):
                payload = decode_payload(split_envelope(state)[3])
                payload = stored_names.current_names(stored_names.ROUND_OPENED, payload)
                key = (str(payload.get("game")), str(payload.get("rules_hash")))
                written.rounds.setdefault(key, payload)
            if proofs is not None and proving is not None:
                proofs.write(
                    proving.proof_line(directory, position, state, selection.kind == "round")
                )
            written.count += 1
            written.first = position if written.first is None else written.first
            written.last = position
            if written.count % 1000 == 0:
                events.write("".join(pending))
                pending.clear()
                if progress:
                    progress(1000)
        events.write("".join(pending))
    if progress:
        progress(written.count % 1000)
    return written


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _write_consistency(path: Path, older: tuple[int, ...], size: int, subtree: Subtree) -> None:
    """One RFC 9162 consistency proof per older size: the tree of `size` extends it."""
    with path.open("w", encoding="utf-8") as out:
        for old in older:
            proof = consistency_proof(old, size, subtree)
            record = {"from_size": old, "to_size": size, "proof": [_b64(p) for p in proof]}
            out.write(_dumps(record) + "\n")


def _write_checkpoints(tables: MerkleLogTables, path: Path) -> int:
    """Every stored checkpoint as its exact note text, by the size column; then,
    for each checkpoint witnesses cosigned, its note with their cosignature
    lines (the same signed statement again, which a reader without a witness
    policy takes as a copy; `verify --witness-policy` counts them)."""
    rows = sorted(
        tables.checkpoint_rows(), key=lambda r: (0, r[0]) if type(r[0]) is int else (1, 0)
    )
    written = len(rows)
    with path.open("w", encoding="utf-8") as out:
        for column, note in rows:
            size = column if type(column) is int else None
            text = note if isinstance(note, str) else None
            out.write(_dumps({"tree_size": size, "note": text}) + "\n")
        for cosigned in _cosigned(tables, rows):
            out.write(_dumps({"tree_size": cosigned.size, "note": cosigned.to_note()}) + "\n")
            written += 1
    return written


def _cosigned(tables: MerkleLogTables, rows: list[CheckpointRow]) -> list[Checkpoint]:
    """The stored checkpoints with the cosignatures stored for them (rows that do
    not parse are left to the reader to report, as written above)."""
    by_size: dict[object, list[object]] = {}
    for size, _, note in CosignatureTable(tables).notes():
        by_size.setdefault(size, []).append(note)
    found = []
    for row in rows:
        notes = by_size.get(row[0])
        if not notes:
            continue
        try:
            checkpoint = parse_checkpoint_row(row)
        except VerificationError:
            continue
        cosigned = with_cosignatures(checkpoint, notes)
        if cosigned.others != checkpoint.others:
            found.append(cosigned)
    return found
