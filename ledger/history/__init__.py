"""A player's history proven complete: every round an account played in a span,
from the account's head the checkpoint's account heads map proves (docs/history.md)."""
