"""The contract every variant plugin must pass: subclass `VariantContract`,
set `plugin` (and `outcomes`), and run it with pytest in the plugin's tests.

Like eventsourcing's recorder contract tests: the core states what a variant
must do, once, and every plugin proves it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import pytest

from ledger.domain.round import BETTING, CLOSED, DECIDED
from ledger.errors import InvalidCommandError
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.registry import LoadedVariant, rules_hash

ROUND_STATES = {BETTING, CLOSED, DECIDED}
COMMANDS = {"place_bet", "withdraw_bet", "close_betting", "record_outcome", "record_fault"}


class VariantContract:
    """Subclass with `plugin` = the plugin object (module or instance) and
    `outcomes` = a few valid outcomes; `invalid_outcomes` = some invalid ones."""

    plugin: ClassVar[Any]
    plugin_name: ClassVar[str] = "plugin-under-test"
    outcomes: ClassVar[Sequence[Mapping[str, Any]]]
    invalid_outcomes: ClassVar[Sequence[Any]] = ()

    @pytest.fixture
    def variants(self) -> dict[str, LoadedVariant]:
        plugins = get_plugin_manager(
            load_entry_points=False, extra=[(self.plugin_name, self.plugin, "0+contract")]
        )
        found = plugins.variants()
        assert found, "the plugin registers no variant"
        return found

    def test_declares_id_rules_bets_and_commands(self, variants: dict[str, LoadedVariant]) -> None:
        for variant_id, variant in variants.items():
            assert variant.id == variant_id and variant_id.strip() == variant_id
            json.dumps(variant.rules, allow_nan=False)  # plain JSON data
            assert variant.rules_hash == rules_hash(copy.deepcopy(dict(variant.rules)))
            bets = list(variant.definition.bets)
            assert bets and len(bets) == len(set(bets))
            legal = variant.definition.legal_commands
            assert set(legal) <= ROUND_STATES
            assert all(set(commands) <= COMMANDS for commands in legal.values())
            assert "place_bet" in legal.get(BETTING, ())

    def test_every_catalogue_bet_validates(self, variants: dict[str, LoadedVariant]) -> None:
        for variant in variants.values():
            for bet_id in variant.definition.bets:
                canonical = variant.validate_bet({"bet": bet_id})
                assert variant.validate_bet(canonical) == canonical  # idempotent

    def test_unknown_bets_are_refused(self, variants: dict[str, LoadedVariant]) -> None:
        for variant in variants.values():
            for bad in ({"bet": "no-such-bet"}, {}, {"bet": 7}):
                with pytest.raises(InvalidCommandError):
                    variant.validate_bet(bad)

    def test_outcomes_validate_and_bad_ones_are_refused(
        self, variants: dict[str, LoadedVariant]
    ) -> None:
        for variant in variants.values():
            for outcome in self.outcomes:
                assert variant.validate_outcome(outcome)
            for bad in self.invalid_outcomes:
                with pytest.raises(InvalidCommandError):
                    variant.validate_outcome(bad)

    def test_settlement_is_pure_and_well_typed(self, variants: dict[str, LoadedVariant]) -> None:
        for variant in variants.values():
            bets = {
                f"b{i}": {
                    "account_id": "a",
                    "bet": variant.validate_bet({"bet": bet_id}),
                    "stake": 100 + i,
                }
                for i, bet_id in enumerate(variant.definition.bets)
            }
            for outcome in self.outcomes:
                checked = variant.validate_outcome(outcome)
                frozen = copy.deepcopy((checked, bets))
                first = variant.settle(checked, bets)
                assert (checked, bets) == frozen, "settle must not change its inputs"
                assert variant.settle(checked, bets) == first, "settle must be deterministic"
                assert set(first) == set(bets)
                assert all(isinstance(v, int) and v >= 0 for v in first.values())
