"""The HTTP API: the casino's Python API over HTTP, behind API tokens.

Thin on purpose: every rule lives in `ledger.casino.Casino` and the query
functions the CLI uses; this package only parses requests (strictly), checks
who may call what, and maps the ledger's errors to HTTP statuses.
"""
