"""`ledger verify --bundle DIR`: a bundle verified on a machine with no database.

Every bundle is checked by `ledger verify`'s own checklist
(`ledger.audit.verify.Verifier`), every level included: a whole-log bundle
read as a log (`bundle_log.BundleLog`), its roots recomputed from its
events; a partial bundle (one round, or a range of log positions) as a log
source that proves the inclusion of what it holds (`partial_log`: an
inclusion proof per event against one checkpoint, consistency proofs that
this checkpoint extends the older ones first covering some of its events).

At level settlement, a round's game is the installed one declaring the rules
hash it pinned or, when none does, the game an installed plugin builds from
the rules data the bundle's games.jsonl carries (`ledger_game_from_rules`,
after the data is checked to hash to the rules hash): a bundle is
self-contained for rules wherever the game's code is installed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.audit.games.round_games import games_from_rules
from ledger.audit.verify import Level, Sinks, VerificationReport, VerifyOptions, verify_log
from ledger.crypto.checkpoint import Checkpoint
from ledger.crypto.keys import Keyring
from ledger.errors import ConfigError, VerificationError
from ledger.export.bundle_files import GAMES
from ledger.export.bundle_log import BundleLog
from ledger.export.partial_log import PartialBundleLog
from ledger.export.reader import Bundle
from ledger.export.tlog_proofs import refuse_tlog_proofs
from ledger.plugins.manager import Plugins
from ledger.plugins.registry import LoadedGame


@dataclass
class BundleReport:
    kind: str
    keyring_source: str
    events: int = 0
    games: int = 0
    store: VerificationReport | None = None  # a whole-log bundle: verify's own report
    lines: list[str] = field(default_factory=list)  # a partial bundle: what was checked
    built: list[str] = field(default_factory=list)  # games built from the bundle's rules data

    def summary(self) -> str:
        if self.store is not None:
            head = self.store.summary().replace("OK: ", "OK (bundle, the whole log): ", 1)
            extra = [
                "   every checkpoint's root recomputed from the bundle's events (a bundle "
                "holds no Merkle tree: consistency between checkpoints follows from the roots)",
                f"   {self.games} game profiles' rules match the rules hash their rounds pinned",
            ]
        else:
            events = f"{self.events} event{'' if self.events == 1 else 's'}"
            head, extra = f"OK (bundle, {self.kind}): {events}", self.lines
        return "\n".join([head, *extra, *self.built, f"   keyring: {self.keyring_source}"])


def verify_bundle(
    directory: Path,
    *,
    keyring: Keyring | None = None,
    level: Level = Level.SETTLEMENT,
    trusted: Checkpoint | None = None,
    workers: int | None = None,
    progress: Callable[[int], None] | None = None,
    games: Mapping[str, LoadedGame] | None = None,
    plugins: Plugins | None = None,
) -> BundleReport:
    """Verify the bundle in `directory`; raise the first `VerificationError`.

    `keyring` is the auditor's own (default: the bundle's keyring.json). At level
    settlement, `plugins` (the caller's: this layer loads none) build the games
    of the rules data in games.jsonl that none of `games` (default: `plugins`'
    games) declares."""
    bundle = Bundle(directory)
    source = "the auditor's own keyring" if keyring is not None else "the bundle's keyring.json"
    keyring = keyring if keyring is not None else bundle.keyring()
    profiles = bundle.games()  # the rules data of games.jsonl
    report = BundleReport(bundle.kind, source, games=len(profiles))
    if level is Level.SETTLEMENT:
        if plugins is None:
            raise ValueError("level settlement re-derives every round: verify_bundle(plugins=...)")
        pinned = games_from_rules(
            plugins.games() if games is None else games,
            _rules_data(profiles),
            plugins.game_from_rules,
            source=f"bundle {GAMES}",
        )
        report.built = [
            f"   {game_id} (rules {rules[:12]}) is not installed here: its game was built "
            f"from the rules data in {GAMES} by {game.plugin} {game.version}"
            for game_id, rules, game in pinned.built_games
        ]
        games = pinned
    if bundle.whole_log:
        refuse_tlog_proofs(bundle.directory)
        log: BundleLog | PartialBundleLog = BundleLog(bundle)
    elif trusted is not None:
        raise ConfigError("--trusted needs a whole-log bundle (consistency proofs)")
    else:
        log = PartialBundleLog(bundle, keyring)
    options = VerifyOptions(level=level, trusted=trusted, workers=workers, games=games)
    try:
        verified = verify_log(log, keyring, options, Sinks(progress=progress))
    except VerificationError as exc:
        message = str(exc)
        raise VerificationError(
            message if message.startswith("bundle") else f"bundle: {message}"
        ) from None
    report.events = verified.events
    if isinstance(log, BundleLog):
        report.store = verified
    else:
        report.lines = [*log.lines(verified.streams, level is not Level.INTEGRITY)]
        if verified.settlement is not None:
            counts = verified.settlement
            report.lines.append(
                f"   {counts.rounds} rounds re-derived (step order, fault policy); "
                f"{counts.resettled} settlements re-settled with their own game and rules "
                f"({counts.bets} bets)"
            )
        report.lines.append(
            "   NOT CHECKED here: money across wallets, RNG seeds and device reports outside "
            "the bundle, events of the log not in the bundle (verify a whole-log bundle for those)"
        )
    _check_manifest_count(bundle, report.events)
    _check_profiles(bundle, profiles)
    return report


def _rules_data(games: list[dict[str, Any]]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(game id, rules hash, rules data) of every game profile carrying its rules
    (`Bundle.games` has checked each against its hash)."""
    return [
        (g["game"], g["rules_hash"], g["rules"])
        for g in games
        if type(g.get("game")) is str and type(g.get("rules")) is dict
    ]


def _check_manifest_count(bundle: Bundle, events: int) -> None:
    stated = bundle.manifest.get("events")
    if stated != events:
        raise VerificationError(
            f"bundle manifest.json says {stated!r} events but events.jsonl holds {events}: "
            "the bundle is incomplete or was added to"
        )


def _check_profiles(bundle: Bundle, games: list[dict[str, object]]) -> None:
    """Every round's pinned rules are in games.jsonl, as data."""
    present = {(g.get("game"), g.get("rules_hash")) for g in games if g.get("rules") is not None}
    for game, rules in sorted(bundle.profiles_used):
        if (game, rules) not in present:
            raise VerificationError(
                f"bundle {GAMES}: the rules of {game} (rules hash {rules[:12]}), which a round "
                "opened with, are missing"
            )
