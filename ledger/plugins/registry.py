"""Variants as the core sees them: each wrapped so that a plugin's exception
or invalid result becomes one `PluginError` naming the plugin and version."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rfc8785 import CanonicalizationError

from ledger.crypto.canonical import canonical
from ledger.errors import InvalidCommandError, LedgerError, PluginError
from ledger.plugins.spec import VariantDefinition


def rules_hash(rules: Mapping[str, Any]) -> str:
    """SHA-256 of the rules profile's canonical bytes: what a round pins."""
    return hashlib.sha256(canonical(dict(rules))).hexdigest()


@dataclass(frozen=True)
class LoadedVariant:
    """A plugin's variant with its provenance, guarded at every call."""

    definition: VariantDefinition
    plugin: str
    version: str  # the plugin distribution's version
    rules_hash: str

    @property
    def id(self) -> str:
        return self.definition.id

    @property
    def rules(self) -> Mapping[str, Any]:
        return self.definition.rules

    @property
    def legal_commands(self) -> Mapping[str, Any]:
        return self.definition.legal_commands

    def _fail(self, message: str) -> PluginError:
        return PluginError(self.plugin, self.version, message)

    def _call(self, what: str, call: Any, *args: Any) -> Any:
        try:
            return call(*args)
        except InvalidCommandError:
            raise  # the plugin refusing bad input is not the plugin failing
        except LedgerError:
            raise
        except Exception as exc:
            raise self._fail(f"{what} raised {type(exc).__name__}: {exc}") from exc

    def validate_bet(self, bet: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(bet, Mapping):
            raise InvalidCommandError(f"a bet is an object, not {bet!r}")
        result = self._call("validate_bet", self.definition.validate_bet, bet)
        if not isinstance(result, dict):
            raise self._fail(f"validate_bet returned {type(result).__name__}, not a dict")
        self._json_safe("validate_bet", result)
        return result

    def validate_outcome(self, outcome: Mapping[str, Any]) -> dict[str, Any]:
        if not isinstance(outcome, Mapping):
            raise InvalidCommandError(f"an outcome is an object, not {outcome!r}")
        result = self._call("validate_outcome", self.definition.validate_outcome, outcome)
        if not isinstance(result, dict):
            raise self._fail(f"validate_outcome returned {type(result).__name__}, not a dict")
        self._json_safe("validate_outcome", result)
        return result

    def settle(
        self, outcome: Mapping[str, Any], bets: Mapping[str, Mapping[str, Any]]
    ) -> dict[str, int]:
        result = self._call("settle", self.definition.settle, outcome, bets)
        if not isinstance(result, dict) or set(result) != set(bets):
            raise self._fail("settle must return a return for every bet, and only those")
        for bet_id, returned in result.items():
            if isinstance(returned, bool) or not isinstance(returned, int) or returned < 0:
                raise self._fail(f"settle returned {returned!r} for bet {bet_id}: not an int >= 0")
        return result

    def _json_safe(self, what: str, value: Any) -> None:
        try:
            canonical({"value": value})
        except (CanonicalizationError, TypeError, ValueError) as exc:
            raise self._fail(f"{what} returned data that is not plain JSON: {exc}") from exc


@dataclass
class VariantRegistry:
    """Handed to ``ledger_register_variants``; collects each plugin's variants."""

    plugin: str = "?"
    version: str = "?"
    variants: dict[str, LoadedVariant] = field(default_factory=dict)

    def add(self, definition: VariantDefinition) -> None:
        try:
            variant_id = definition.id
            profile = rules_hash(definition.rules)
            catalogue = list(definition.bets)
        except Exception as exc:
            raise PluginError(self.plugin, self.version, f"invalid variant: {exc}") from exc
        if not isinstance(variant_id, str) or not variant_id:
            raise PluginError(self.plugin, self.version, "a variant needs a non-empty string id")
        if not catalogue:
            raise PluginError(self.plugin, self.version, f"variant {variant_id} has no bets")
        if variant_id in self.variants:
            other = self.variants[variant_id]
            raise PluginError(
                self.plugin,
                self.version,
                f"variant {variant_id} is already provided by {other.plugin} {other.version}",
            )
        self.variants[variant_id] = LoadedVariant(definition, self.plugin, self.version, profile)
