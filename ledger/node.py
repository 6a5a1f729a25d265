"""The Python API underneath the CLI: open a ledger node from its settings."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from ledger.crypto.envelope import SignerCheck, open_envelope
from ledger.crypto.keys import Keyring, Role
from ledger.crypto.keystore import KeyDirectory, keys_dir
from ledger.errors import ConfigError, LedgerError
from ledger.privacy.personal import PersonalData
from ledger.store.anchor import Anchor, AnchorSettings
from ledger.store.application import LedgerApplication
from ledger.store.checkpoint_lock import LOCK_ENV, open_lock
from ledger.store.checkpointer import DEFAULT_ORIGIN, Checkpointer
from ledger.store.config import describe, store_url
from ledger.store.merkle_log import MerkleLogTables, parse_checkpoint_row, stream_of
from ledger.store.origin import ORIGIN_ENV
from ledger.store.sealed_rows import SealedRowsReceiver, SealedRowsSender
from ledger.store.sealing import SealingMapper
from ledger.store.witnessing import (
    DEADLINE_SECONDS,
    WITNESSES_ENV,
    SplitView,
    WitnessSubmitter,
    parse_witnesses,
)

PASSPHRASE_ENV = "LEDGER_PASSPHRASE"
log = logging.getLogger(__name__)


def origin() -> str:
    return os.environ.get(ORIGIN_ENV) or DEFAULT_ORIGIN


def holds_private_key(directory: KeyDirectory, keyring: Keyring, role: Role) -> bool:
    """True when the keys directory holds a private key file for a key of `role`."""
    return any(directory.private_key_path(r.name).exists() for r in keyring.with_role(role))


@dataclass
class Node:
    """An open ledger: the sealed application, its keys, and a checkpointer."""

    app: LedgerApplication
    keys: KeyDirectory
    keyring: Keyring
    passphrase: bytes | None
    anchor: Anchor | None = field(default=None)
    witnesses: WitnessSubmitter | None = field(default=None)

    def checkpointer(self, batch_size: int = 1000) -> Checkpointer:
        """A checkpointer for this store (refused when the store is not this node's)."""
        check_store_is_ours(self.app.tables, self.keyring, self.keys.path, origin())
        return self._checkpointer(batch_size)

    def _checkpointer(self, batch_size: int = 1000) -> Checkpointer:
        return Checkpointer(
            self.app.tables,
            signer=self.keys.signer(Role.CHECKPOINT, self.passphrase),
            signer_check=SignerCheck(self.keyring),
            keyring=self.keyring,
            origin=origin(),
            batch_size=batch_size,
            signed_here=self._signed_here,
            sealed_entry=self._sealed_entry,
            keyring_source=self.app.signing_keyring,
            on_checkpoint=self._witness_submitter().offer,
            lock=open_lock(os.environ.get(LOCK_ENV), self.keys.path),
        )

    def _witness_submitter(self) -> WitnessSubmitter:
        """The submitter to the witnesses `LEDGER_WITNESSES` names (none: it does nothing)."""
        if self.witnesses is None:
            self.witnesses = WitnessSubmitter(
                self.app.tables,
                parse_witnesses(os.environ.get(WITNESSES_ENV)),
                on_split_view=self.record_split_view,
            )
        return self.witnesses

    def record_split_view(self, view: SplitView) -> None:
        """Record a witness's split-view refusal in the log (sealed by this node's
        ledger-node key; a read-only node opens the store to write it, when it
        holds that key)."""
        from ledger.store.split_views import record_split_view

        app, opened = self.app, None
        if not self.app.can_sign:
            if not holds_private_key(self.keys, self.keyring, Role.LEDGER_NODE):
                log.error(
                    "split view reported by %s not recorded: no ledger-node key", view.witness
                )
                return
            signer = self.keys.signer(Role.LEDGER_NODE, self.passphrase)
            app = opened = LedgerApplication(
                self.app.store_url, keyring=self.keyring, signer=signer, create=False
            )
        try:
            record_split_view(app, view)
        finally:
            if opened is not None:
                opened.close()

    def _sealed_entry(self, state: bytes, stream: str, version: int, topic: str) -> bytes | None:
        mapper = self.app.mapper
        if isinstance(mapper, SealingMapper):
            return mapper.sealed_entry_hash(state, stream, version, topic)
        return None

    def _signed_here(self, entry_hash: bytes) -> bytes | None:
        mapper = self.app.mapper
        return mapper.signed_here(entry_hash) if isinstance(mapper, SealingMapper) else None

    def listen_for_sealed_rows(self, path: Path) -> SealedRowsReceiver:
        """Take what the node's other processes say they sealed (on the Unix
        socket `path`) as sealed here: the checkpointer checks those rows as
        they were made (`ledger serve`'s anchor process)."""
        mapper = self.app.mapper
        assert isinstance(mapper, SealingMapper)
        return SealedRowsReceiver(path, mapper.remember_rows)

    def tell_sealed_rows_to(self, path: str) -> None:
        """Tell the node's anchor process (listening on the Unix socket `path`)
        of every row this process seals (`ledger.store.sealed_rows`)."""
        mapper = self.app.mapper
        if isinstance(mapper, SealingMapper):
            mapper.on_sealed = SealedRowsSender(path).send

    def close(self) -> None:
        """Anchor what this node wrote (raising if it could not), then close the store."""
        try:
            if self.anchor is not None:
                anchor, self.anchor = self.anchor, None
                anchor.close()
        finally:
            try:
                if self.witnesses is not None:  # the last checkpoint, if a witness answers soon
                    self.witnesses.close(wait=DEADLINE_SECONDS)
            finally:
                self.app.close()


def refuse_new_keys_beside_events(store: str | None, directory: KeyDirectory) -> None:
    """One command on a new machine makes the node's keys; a store that already
    holds events was sealed by keys that are elsewhere (a wrong or deleted keys
    directory): new keys beside it would only make `verify` cry tampering."""
    try:
        app = LedgerApplication(store_url(store), keyring=Keyring(), create=False)
    except LedgerError:  # no store yet, or no ledger in it
        return
    try:
        held = app.tables.event_count()[0]
    finally:
        app.close()
    if held:
        raise ConfigError(
            f"{directory.path} holds no keyring with the ledger-node keys, but store "
            f"{describe(store_url(store))} already holds {held:,} events sealed by such keys: "
            "point --keys (or LEDGER_KEYS) at that store's keys directory; "
            "no keys made, nothing written"
        )


def check_store_is_ours(
    tables: MerkleLogTables, keyring: Keyring, keys_path: Path, node_origin: str
) -> None:
    """Refuse (ConfigError, nothing written) a store this node would ruin: one whose
    newest event or newest checkpoint was signed by a key this keyring does not
    hold with that role, or whose checkpoints are for another origin.

    A guard against a wrong keys directory or LEDGER_ORIGIN, not against an
    attacker (one with database rights can ruin a store anyway; `verify`
    catches that): the newest checkpoint row is found by its stored size."""
    advice = f"the keys directory {keys_path} is not this store's; nothing was written"
    last = tables.last_row()
    if last is not None:
        notification_id, originator_id, version, _, state = last
        try:
            envelope = open_envelope(bytes(state), stream=stream_of(originator_id), version=version)
        except (LedgerError, TypeError) as exc:
            raise ConfigError(
                f"the store's newest event ({notification_id}) cannot be read ({exc}): "
                "run `ledger verify`; nothing was written"
            ) from exc
        record = keyring.get(envelope.key_id)
        if record is None or record.role is not Role.LEDGER_NODE:
            raise ConfigError(
                f"the store's newest event was signed by ledger-node key "
                f"{envelope.key_id[:16]}, which this keyring does not hold: {advice}"
            )
    newest = tables.newest_checkpoint_row()
    if newest is None:
        return
    checkpoint = parse_checkpoint_row(newest)
    record = checkpoint.key_record(keyring)
    if record is None or record.role is not Role.CHECKPOINT:
        raise ConfigError(
            f"the store's newest checkpoint was signed by checkpoint key "
            f"{checkpoint.key_label}, which this keyring does not hold: {advice}"
        )
    if checkpoint.origin != node_origin:
        raise ConfigError(
            f"this node's origin is {node_origin!r} but the store's checkpoints are for "
            f"{checkpoint.origin!r} (set {ORIGIN_ENV}); nothing was written"
        )


def open_node(
    store: str | None = None,
    keys: str | None = None,
    *,
    passphrase: bytes | None = None,
    writable: bool = True,
    anchor_seconds: float | None = None,
    anchor_events: int | None = None,
) -> Node:
    """Open the store; with `writable`, load the ledger-node signing key first
    (so a wrong passphrase fails before anything touches the store), check the
    store is this node's (its keys, its origin) before anything is written, and,
    when the checkpoint key is here too, keep the log anchored in the background
    (`anchor_seconds`/`anchor_events`, else $LEDGER_ANCHOR_SECONDS/_EVENTS, else
    1 s / 1000 events; 0 turns either off)."""
    directory = keys_dir(keys)
    keyring = directory.keyring()
    signer = directory.signer(Role.LEDGER_NODE, passphrase) if writable else None
    settings = AnchorSettings.resolve(anchor_seconds, anchor_events) if writable else None
    app = LedgerApplication(
        store_url(store),
        keyring=keyring,
        signer=signer,
        create=writable,
        keyring_source=directory.keyring,
        personal=PersonalData(directory.path, passphrase),
    )
    node = Node(app, directory, keyring, passphrase)
    if not writable:
        return node
    try:
        check_store_is_ours(app.tables, keyring, directory.path, origin())
        if settings and settings.enabled and holds_private_key(directory, keyring, Role.CHECKPOINT):
            node.anchor = Anchor(node._checkpointer(), settings, lambda: not app.closing.is_set())
            app.on_recorded.append(node.anchor.recorded)
    except BaseException:
        app.close()
        raise
    return node
