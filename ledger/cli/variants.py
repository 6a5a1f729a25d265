"""`ledger variants` and `ledger paytable VARIANT`."""

from __future__ import annotations

import argparse
from typing import Any

from ledger.domain.percent import percent
from ledger.plugins.manager import get_plugin_manager
from ledger.plugins.paytable import paytable


def cmd_variants(args: argparse.Namespace) -> int:
    variants = get_plugin_manager().variants()
    if not variants:
        print("no variants installed (install a plugin package, e.g. plugins/taixiu)")
    for variant in sorted(variants.values(), key=lambda v: v.id):
        print(
            f"{variant.id:<14} {variant.plugin} {variant.version}  "
            f"rules {variant.rules_hash}  {len(variant.bets)} bets  "
            f"settlement API {variant.settlement_api}"
            + (f"  [{', '.join(sorted(variant.capabilities))}]" if variant.capabilities else "")
        )
    return 0


def cmd_paytable(args: argparse.Namespace) -> int:
    variant = get_plugin_manager().variant(args.variant)
    lines = paytable(variant)  # a game without an exact paytable is refused first
    print(f"{variant.id} ({variant.plugin} {variant.version}, rules {variant.rules_hash[:16]})")
    print(f"{'bet':<20} {'pays':<18} {'return':>16} {'':>10}")
    for line in lines:
        exact = line.theoretical_return
        print(
            f"{line.bet:<20} {line.pays:<18} {f'{exact.numerator}/{exact.denominator}':>16} "
            f"{percent(exact):>10}"
        )
    return 0


def add_variant_commands(commands: Any) -> None:
    commands.add_parser("variants", help="list installed game variants").set_defaults(
        handler=cmd_variants
    )
    table = commands.add_parser("paytable", help="a variant's payouts and exact returns")
    table.add_argument("variant")
    table.set_defaults(handler=cmd_paytable)
