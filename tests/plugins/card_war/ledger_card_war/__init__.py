"""Card war: each seat's one card against the dealer's (a fourth game for the tests)."""
