"""Each round's own variant, exactly as it opened (id, plugin version, rules
hash): what re-settling and re-deriving its fault policy need. A round whose
variant cannot be had stops `verify --level settlement` with a
`CannotCheckError` (exit 2): a check that was not made is never an OK."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ledger.errors import CannotCheckError
from ledger.plugins.manager import BLOCK_ENV
from ledger.variants.api import Variant


def installed_variants() -> Mapping[str, Variant]:
    """The variants installed here (entry points, allow and block lists applied)."""
    from ledger.plugins.manager import get_plugin_manager

    return get_plugin_manager().variants()


class RoundVariants:
    def __init__(self, variants: Mapping[str, Variant]) -> None:
        self.variants = variants
        self._cache: dict[tuple[str, str, str], Variant] = {}

    def of(self, round_id: str, opened: Mapping[str, Any]) -> Variant:
        """The variant `round_id` opened with (its Round.Opened state), or raise."""
        key = (str(opened["variant"]), str(opened["variant_version"]), str(opened["rules_hash"]))
        found = self._cache.get(key)
        if found is not None:
            return found
        name, version, rules = key
        variant = self.variants.get(name)
        if variant is None or (variant.version, variant.rules_hash) != (version, rules):
            installed = (
                f"{variant.version} (rules {variant.rules_hash[:12]})"
                if variant is not None
                else "none"
            )
            blocked = os.environ.get(BLOCK_ENV, "").strip()
            because = f"; plugins blocked by {BLOCK_ENV}: {blocked}" if blocked else ""
            raise CannotCheckError(
                f"cannot re-settle round {round_id}: it opened with {name} {version} "
                f"(rules {rules[:12]}); installed: {installed}{because}. Install that "
                "version of the plugin to verify at level settlement"
            )
        self._cache[key] = variant
        return variant
