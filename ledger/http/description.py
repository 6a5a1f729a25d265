"""How the server runs, in one text: the OpenAPI document's `info.description`
(`ledger.http.app`), which docs/http.md's "How a request runs" repeats word for
word (tests/http_api/test_http_description.py holds the two together)."""

from __future__ import annotations

DESCRIPTION = """\
Every write needs an `Idempotency-Key` header, which becomes the Python API's
request id, bound to the token that sent it: a retry by that token gets the
first result (and the same status) back and records nothing; the same key
from another token, or with another command or other arguments, is refused
(409), because the ledger keeps a SHA-256 of each request's canonical
command, arguments and token with its result (a bet, in its own event).

`ledger serve` runs one or more HTTP workers (`--workers N`, processes), each
with its own event loop, and one writer process that places every bet. A
request first passes the layers in front of the routes on the event loop:
the token, the media type, the body's size. A single bet with a valid key and
body is answered there too: checked, handed to the writer process, which
places it in its next commit batch, and awaited on the event loop, without a
thread, until that batch is committed. Every other route is a plain function
the worker runs on one of its threads. A batch of bets waits there for the
writer process's answer; any other write is a command of the worker's own
command runner, whose one writer thread applies concurrent commands in order
and saves them in shared commits (group commit), each atomic, retried from
fresh state when another writer committed first, and answered once its
commit is durable. The workers take turns on the node's writer lock, each
catching up with what the others committed. Reads run on the worker's
threads too; the event stream is sent from the event loop."""
