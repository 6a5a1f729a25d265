"""Building the plugin manager (a factory: nothing loads at import time) and
the typed facade the core uses, so pluggy's `Any` never spreads."""

from __future__ import annotations

import copy
import hashlib
import importlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy

from ledger.errors import ConfigError, LedgerError, PluginError
from ledger.plugins import ENTRY_POINT_GROUP, PROJECT_NAME, spec
from ledger.plugins.registry import GameRegistry, LoadedGame, rules_hash

#: Hooks under an earlier name, still called for plugins written for it (pluggy
#: keeps an implementation of a name no spec declares): old name -> the hook.
RENAMED_HOOKS = {"ledger_register_variants": "ledger_register_games"}  # alias

ALLOW_ENV = "LEDGER_PLUGINS_ALLOW"  # comma-separated entry-point names: only these load
BLOCK_ENV = "LEDGER_PLUGINS_BLOCK"  # comma-separated entry-point names: never load these


def _names(variable: str) -> set[str] | None:
    value = os.environ.get(variable)
    if value is None:
        return None
    return {name.strip() for name in value.split(",") if name.strip()}


@dataclass(frozen=True)
class PluginInfo:
    name: str
    distribution: str
    version: str


class Plugins:
    """The core's only view of the plugins: one typed method per hook."""

    def __init__(
        self,
        manager: pluggy.PluginManager,
        info: dict[str, PluginInfo],
        skipped: list[str] | None = None,
    ) -> None:
        self._manager = manager
        # Installed entry points left unloaded by the allow/block lists.
        self.skipped = skipped or []
        self._info = info
        self._games: dict[str, LoadedGame] | None = None
        self._from_rules: dict[tuple[str, str], LoadedGame | None] = {}

    @property
    def plugins(self) -> list[PluginInfo]:
        return list(self._info.values())

    def games(self) -> dict[str, LoadedGame]:
        """Every installed game, by id (built once, on first use).

        Each plugin's hooks are called through pluggy, one plugin at a time
        (`subset_hook_caller` leaving out the others' implementations, not
        their wrappers), so a failure is attributed to its plugin while
        wrappers, tracing and ordering still apply.
        """
        if self._games is None:
            found: dict[str, LoadedGame] = {}
            for name in self._names():
                info = self._plugin_info(name)
                plugin = self._manager.get_plugin(name)
                registry = GameRegistry(info.distribution, info.version, code_hash(plugin), found)
                for hook in ("ledger_register_games", *RENAMED_HOOKS):
                    if hook == "ledger_register_games" or hasattr(self._manager.hook, hook):
                        self._call(name, hook, registry=registry)
            self._games = found
        return self._games

    def game_from_rules(self, game_id: str, rules: Mapping[str, Any]) -> LoadedGame | None:
        """The game `game_id` built from its rules data (`ledger_game_from_rules`)
        by the first plugin, in name order, that recognises the data; None when
        none does. Checked like an installed game (`GameRegistry.add`), and it
        must be exactly that game: its id `game_id`, its rules hashing as `rules`
        do. Built once per (game id, rules hash)."""
        wanted = rules_hash(rules)
        key = (game_id, wanted)
        if key not in self._from_rules:
            self._from_rules[key] = self._build(game_id, rules, wanted)
        return self._from_rules[key]

    def _build(self, game_id: str, rules: Mapping[str, Any], wanted: str) -> LoadedGame | None:
        for name in self._names():
            info = self._plugin_info(name)
            offered = self._call(
                name, "ledger_game_from_rules", game_id=game_id, rules=copy.deepcopy(dict(rules))
            )
            for game in offered:
                registry = GameRegistry(
                    info.distribution, info.version, code_hash(self._manager.get_plugin(name))
                )
                registry.add(game)
                (built,) = registry.games.values()
                if (built.id, built.rules_hash) != (game_id, wanted):
                    raise PluginError(
                        info.distribution,
                        info.version,
                        f"ledger_game_from_rules built game {built.id} (rules "
                        f"{built.rules_hash[:12]}) from the rules data of {game_id} (rules "
                        f"{wanted[:12]}): a game built from rules data must be that game",
                    )
                return built
        return None

    def _names(self) -> list[str]:
        names = [self._manager.get_name(p) for p in self._manager.get_plugins()]
        return sorted(n for n in names if n is not None)

    def _plugin_info(self, name: str) -> PluginInfo:
        return self._info.get(name) or PluginInfo(name, name, "unversioned")

    def _call(self, name: str, hook: str, **kwargs: Any) -> list[Any]:
        """One plugin's implementation of `hook`, called through pluggy
        (`subset_hook_caller` leaving out the others' implementations, not their
        wrappers): its results, or its failure as one `PluginError` naming it."""
        plugin = self._manager.get_plugin(name)
        info = self._plugin_info(name)
        relay = getattr(self._manager.hook, hook)
        # Every other plugin's own implementation is left out; wrappers stay.
        others = [
            impl.plugin
            for impl in relay.get_hookimpls()
            if impl.plugin is not plugin and not (impl.wrapper or impl.hookwrapper)
        ]
        caller = self._manager.subset_hook_caller(hook, remove_plugins=others)
        try:
            return list(caller(**kwargs))
        except PluginError:
            raise
        except LedgerError as exc:
            # The plugin refusing its own configuration on purpose
            # (a bad profile file): its one line, under its name.
            raise PluginError(info.distribution, info.version, str(exc)) from exc
        except Exception as exc:
            raise PluginError(info.distribution, info.version, f"{hook} raised {exc!r}") from exc

    def game(self, game_id: str) -> LoadedGame:
        from ledger.errors import NotFoundError

        try:
            return self.games()[game_id]
        except KeyError:
            known = ", ".join(sorted(self.games())) or "none installed"
            raise NotFoundError(f"unknown game {game_id!r} ({known})") from None


_CODE_HASHES: dict[str, str] = {}


def code_hash(plugin: Any) -> str:
    """SHA-256 over the plugin package's Python files (relative path and bytes),
    recorded with each round for information: which code played it."""
    module_name = plugin.__name__ if isinstance(plugin, ModuleType) else type(plugin).__module__
    module = importlib.import_module(module_name)
    package = importlib.import_module(module.__package__ or module_name)
    # A plugin defined in a script (`python -c`, a notebook) has no file to hash.
    origin = getattr(package, "__file__", None) or getattr(module, "__file__", None)
    if origin is None:
        return ""
    # A package: all its files; a lone module: that file.
    root = Path(origin).parent if origin.endswith("__init__.py") else None
    files = sorted(root.rglob("*.py")) if root is not None else [Path(origin)]
    key = str(root or origin)
    if key not in _CODE_HASHES:
        digest = hashlib.sha256()
        for path in files:
            if "__pycache__" in path.parts:
                continue
            name = str(path.relative_to(root)) if root is not None else path.name
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
        _CODE_HASHES[key] = digest.hexdigest()
    return _CODE_HASHES[key]


def get_plugin_manager(
    *, load_entry_points: bool = True, extra: Iterable[tuple[str, Any, str]] = ()
) -> Plugins:
    """Build the manager: add the hookspecs, load entry points (allow/block
    lists from the environment), register `extra` (name, plugin, version)."""
    manager = pluggy.PluginManager(PROJECT_NAME)
    manager.add_hookspecs(spec)
    info: dict[str, PluginInfo] = {}
    skipped: list[str] = []
    allow, block = _names(ALLOW_ENV), _names(BLOCK_ENV)
    if load_entry_points:
        points = list(entry_points(group=ENTRY_POINT_GROUP))
        installed = ", ".join(sorted(p.name for p in points)) or "none"
        for variable, names in ((ALLOW_ENV, allow), (BLOCK_ENV, block)):
            missing = sorted((names or set()) - {point.name for point in points})
            if missing:
                # A typo would silently load nothing, or block nothing: say so instead.
                raise ConfigError(
                    f"{variable} names {', '.join(missing)}, which is not installed "
                    f"(installed: {installed})"
                )
        for point in points:
            if (allow is not None and point.name not in allow) or (block and point.name in block):
                skipped.append(point.name)
                continue
            distribution = point.dist.name if point.dist else point.name
            version = point.dist.version if point.dist else "unversioned"
            try:
                plugin = point.load()
            except Exception as exc:
                raise PluginError(
                    distribution, version, f"installed but broken: {type(exc).__name__}: {exc}"
                ) from exc
            _register(manager, point.name, plugin, distribution, version)
            info[point.name] = PluginInfo(point.name, distribution, version)
    for name, plugin, version in extra:
        _register(manager, name, plugin, name, version)
        info[name] = PluginInfo(name, name, version)
    return Plugins(manager, info, skipped)


def _register(
    manager: pluggy.PluginManager, name: str, plugin: Any, distribution: str, version: str
) -> None:
    try:
        manager.register(plugin, name=name)
    except (ValueError, pluggy.PluginValidationError) as exc:
        raise PluginError(distribution, version, f"does not fit the hook specs: {exc}") from exc
