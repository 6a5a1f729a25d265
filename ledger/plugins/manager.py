"""Building the plugin manager (a factory: nothing loads at import time) and
the typed facade the core uses, so pluggy's `Any` never spreads."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

import pluggy

from ledger.errors import ConfigError, PluginError
from ledger.plugins import ENTRY_POINT_GROUP, PROJECT_NAME, spec
from ledger.plugins.registry import LoadedVariant, VariantRegistry

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
        self._variants: dict[str, LoadedVariant] | None = None

    @property
    def plugins(self) -> list[PluginInfo]:
        return list(self._info.values())

    def variants(self) -> dict[str, LoadedVariant]:
        """Every installed variant, by id (built once, on first use)."""
        if self._variants is None:
            found: dict[str, LoadedVariant] = {}
            for impl in self._manager.hook.ledger_register_variants.get_hookimpls():
                info = self._info.get(impl.plugin_name) or PluginInfo(
                    impl.plugin_name, impl.plugin_name, "unversioned"
                )
                registry = VariantRegistry(info.distribution, info.version, found)
                try:
                    impl.function(registry=registry)
                except PluginError:
                    raise
                except Exception as exc:
                    raise PluginError(
                        info.name, info.version, f"ledger_register_variants raised {exc!r}"
                    ) from exc
            self._variants = found
        return self._variants

    def variant(self, variant_id: str) -> LoadedVariant:
        from ledger.errors import NotFoundError

        try:
            return self.variants()[variant_id]
        except KeyError:
            known = ", ".join(sorted(self.variants())) or "none installed"
            raise NotFoundError(f"unknown variant {variant_id!r} ({known})") from None


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
        missing = sorted((allow or set()) - {point.name for point in points})
        if missing:
            # A typo here would silently load nothing: say so instead.
            installed = ", ".join(sorted(p.name for p in points)) or "none"
            raise ConfigError(
                f"{ALLOW_ENV} names {', '.join(missing)}, which is not installed "
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
