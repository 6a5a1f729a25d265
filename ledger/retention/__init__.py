"""Retention as policy (`ledger retention`): how long a jurisdiction keeps game
records and personal data, what is due, and the erasures it makes (docs/retention.md)."""
