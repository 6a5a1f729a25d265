"""Xì dách (Vietnamese twenty-one) on the games contract, settlement API 2.

The rules are docs/rules.md §2. Modules: `rules` (the options, validated),
`profile_files` (profiles as JSON files: shipped, and an operator's), `hands`
(cards, scores, classes, comparisons), `table` (one round as a state
machine), `game` (the `Game` the core calls), `strategy` (simple player and
dealer play for the simulation), `plugin` (the pluggy hook).
"""
