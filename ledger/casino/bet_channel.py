"""Bets handed to the node's writer process over a local socket.

`ledger serve` parses HTTP in its worker processes and places bets in one
writer process of its own (`ledger.http.writer_process`): a bet's domain
work and sealing then have a core's GIL to themselves, and the parsing, the
authentication and the JSON of thousands of requests a second run on the
other core. This module is both ends of the wire between them:

- a message is one line of JSON, ``[n, round_id, [[request_id, account_id,
  bet, stake, attested_by], ...]]`` (a single bet is a batch of one;
  `attested_by` the session that asked, or null), answered by
  ``[n, [[bet_id, null] | [null, [error_name, message, code, param]], ...]]`` once the
  commit holding the bets is durable;
- `BetChannel` (a worker's end) sends them and answers each bet's future;
- `serve_connection` (the writer's end) places them with its own
  `Casino.submit_bets_here` and writes each answer back.

The same wire, each line tagged (`ledger.casino.peer_link`), carries a
round's bets from one node's writer to the writer of the node that
sequences the round (`ledger.casino.round_routes`).

Nothing about a bet changes on the way: the writer runs the same command
with the same request id, in its batches, and answers only after the commit.
When the writer cannot be reached, or the line to it breaks, a worker places
the bets itself (`local`): a bet sent before the break and perhaps committed
by the writer is recognised by its request id, so it is placed once and
answered with its first result (what the request id is for).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import json
import logging
import socket
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from eventsourcing.persistence import OperationalError

from ledger import errors
from ledger.casino.bet_batches import BetRequest
from ledger.casino.peer_link import PLAIN, Framing
from ledger.errors import LedgerError

log = logging.getLogger("ledger.bets")

# Bets waiting to leave in one line for a round: their JSON, the bets, their futures.
Waiting = tuple[list[str], list[BetRequest], list["Future[str]"]]
# A worker's own way to place a batch of bets on a round (its Casino's runner).
PlaceHere = Callable[[str, Sequence[BetRequest]], list["Future[str]"]]
STORE_FAILED = "store"  # an answer's error name for a failure that is not the ledger's
SOCKET_BUFFER = 4 << 20  # a burst of batches never blocks a worker's event loop on a send
GROUPED_BELOW = 16  # bets submitted together from which they leave in a line of their own
LINE_BETS = 128  # grouped bets in one line, at most (a commit takes up to 256 commands)


def encode_error(error: BaseException) -> list[str | None]:
    """An error as the wire carries it: the ledger's by its class name, text,
    code and param; any other (the store failed) as `STORE_FAILED`."""
    if isinstance(error, LedgerError):
        return [type(error).__name__, str(error), error.code, error.param]
    return [STORE_FAILED, str(error)]


def decode_error(
    name: str, message: str, code: str | None = None, param: str | None = None
) -> BaseException:
    """The error `encode_error` sent, raised again in the worker as the route
    expects it: the same ledger error class, text, code and param, or a store
    failure. (A peer of an older release sends no code: the class's default.)"""
    if name == STORE_FAILED:
        return OperationalError(message)
    found = getattr(errors, name, None)
    error = LedgerError(message)
    if isinstance(found, type) and issubclass(found, LedgerError):
        # A class with other arguments is never a bet's refusal: a LedgerError then.
        with contextlib.suppress(TypeError):
            error = found(message)
    if code is not None:
        error.code = code
    if param is not None:
        error.param = param
    return error


class BetChannel:
    """A line to a writer (thread-safe): a worker's to its node's writer process,
    or a writer's to the writer of another node."""

    def __init__(
        self, connection: socket.socket, local: PlaceHere, framing: Framing = PLAIN
    ) -> None:
        self._local = local
        self._framing = framing
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[str, Sequence[BetRequest], list[Future[str]]]] = {}
        self._numbers = itertools.count()
        # Bets waiting for the end of the caller's event loop turn, by round:
        # (their JSON, the bets, their futures).
        self._outbox: dict[str, Waiting] = {}
        self._flush_scheduled = False
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
        self._socket: socket.socket | None = connection
        self._reader = threading.Thread(
            target=self._read, args=(connection,), name="ledger-bets-reader", daemon=True
        )
        self._reader.start()

    @classmethod
    def to_writer_process(cls, path: str, local: PlaceHere) -> BetChannel:
        """The line to the node's writer process listening on the Unix socket `path`."""
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(path)
        except OSError:
            connection.close()
            raise
        return cls(connection, local)

    @property
    def connected(self) -> bool:
        return self._socket is not None

    def submit(self, round_id: str, bets: Sequence[BetRequest]) -> list[Future[str]]:
        """Each bet's future, answered once the writer's commit holding it is durable.

        Called from a running event loop (an HTTP worker's), a few bets wait
        for the end of the loop's turn: the few submitted meanwhile for the
        round leave in the same line (up to `LINE_BETS`), so the writer reads,
        places and answers one message for them instead of one each. A batch
        (`GROUPED_BELOW` bets or more) leaves alone at once: a line is answered
        when its last bet commits, and a batch must not wait for another's.
        Called from a plain thread, bets leave at once."""
        answers: list[Future[str]] = [Future() for _ in bets]
        try:
            wire = [[b.request_id, b.account_id, b.bet, b.stake, b.attested_by] for b in bets]
            fragment = json.dumps(wire, allow_nan=False)[1:-1]
        except (TypeError, ValueError):  # not JSON (the Python API's caller): refused here
            return self._local(round_id, bets)
        loop = _running_loop() if len(bets) < GROUPED_BELOW else None
        with self._lock:
            if self._socket is None:
                return self._local(round_id, bets)
            if loop is None:
                self._send({round_id: ([fragment], list(bets), answers)})
                return answers
            waiting = self._outbox.setdefault(round_id, ([], [], []))
            waiting[0].append(fragment)
            waiting[1].extend(bets)
            waiting[2].extend(answers)
            if len(waiting[1]) >= LINE_BETS:
                self._send({round_id: self._outbox.pop(round_id)})
            elif not self._flush_scheduled:
                self._flush_scheduled = True
                loop.call_soon(self._flush)
        return answers

    def _flush(self) -> None:
        with self._lock:
            self._flush_scheduled = False
            outbox, self._outbox = self._outbox, {}
            self._send(outbox)

    def _send(self, lines: dict[str, Waiting]) -> None:
        """Send a line a round (the lock held)."""
        if self._socket is None:  # the line broke meanwhile
            for round_id, (_, bets, futures) in lines.items():
                self._place_here_instead(round_id, bets, futures)
            return
        sealed = []
        for round_id, (fragments, bets, futures) in lines.items():
            number = next(self._numbers)  # (answers come back by number, in any order)
            self._pending[number] = (round_id, bets, futures)
            payload = f"[{number},{json.dumps(round_id)},[{','.join(fragments)}]]".encode()
            sealed.append(self._framing.seal(payload))
        try:
            self._socket.sendall(b"".join(sealed))
        except OSError as exc:
            self._break(exc)

    def _place_here_instead(
        self, round_id: str, bets: Sequence[BetRequest], futures: list[Future[str]]
    ) -> None:
        for future, again in zip(futures, self._local(round_id, bets), strict=True):
            again.add_done_callback(_copy_to(future))

    def close(self) -> None:
        """Hang up: bets from now on (and any unanswered) are placed here."""
        with self._lock:
            if self._socket is not None:
                with contextlib.suppress(OSError):
                    self._socket.shutdown(socket.SHUT_RDWR)  # wakes the reader
                self._socket.close()
                self._socket = None

    def _read(self, line_to_writer: socket.socket) -> None:
        reason: BaseException | None = None
        try:
            for line in line_to_writer.makefile("rb"):
                number, answers = json.loads(self._framing.open(line))
                with self._lock:
                    _, _, futures = self._pending.pop(number)
                for future, (bet_id, error) in zip(futures, answers, strict=True):
                    if error is None:
                        future.set_result(bet_id)
                    else:
                        future.set_exception(decode_error(*error))
        except (OSError, ValueError, KeyError) as exc:
            reason = exc
        with self._lock:
            self._break(reason)

    def _break(self, reason: BaseException | None) -> None:
        """The line is gone (the lock held): what was sent and not answered is
        placed here, by request id, and so is everything after."""
        if self._socket is not None:
            why = reason or "it hung up"
            log.warning("the writer cannot be reached (%s): bets are placed here", why)
            self._socket.close()
            self._socket = None
        pending, self._pending = self._pending, {}
        for round_id, bets, futures in pending.values():
            self._place_here_instead(round_id, bets, futures)
        outbox, self._outbox = self._outbox, {}
        for round_id, (_, bets, futures) in outbox.items():
            self._place_here_instead(round_id, bets, futures)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _copy_to(target: Future[str]) -> Callable[[Future[str]], None]:
    def copy(done: Future[str]) -> None:
        error = done.exception()
        if error is None:
            target.set_result(done.result())
        else:
            target.set_exception(error)

    return copy


# The writer's end.


def serve_connection(connection: socket.socket, place: PlaceHere, framing: Framing = PLAIN) -> None:
    """Place the bets one sender sends until it hangs up; answer each message
    once all its bets are answered (the thread that answers the last one, the
    writer's, sends it)."""
    sending = threading.Lock()

    def send(number: int, futures: list[Future[str]]) -> None:
        answers: list[list[Any]] = []
        for future in futures:
            error = future.exception()
            answers.append([None, encode_error(error)] if error else [future.result(), None])
        payload = json.dumps([number, answers]).encode()
        # A sender gone places what it did not hear about itself.
        with sending, contextlib.suppress(OSError):
            connection.sendall(framing.seal(payload))

    with connection, connection.makefile("rb") as lines:
        try:
            for line in lines:
                number, round_id, wire = json.loads(framing.open(line))
                bets = [_bet_of(fields) for fields in wire]
                futures = place(round_id, bets)
                _when_all(futures, functools.partial(send, number, futures))
        except (OSError, ValueError) as exc:  # a broken or forged line: hang up
            log.warning("a line of bets was dropped: %s", exc)


def _bet_of(fields: list[Any]) -> BetRequest:
    """A bet off the wire: its four fields and who asked (absent from a line
    an earlier release sent)."""
    if not isinstance(fields, list) or len(fields) not in (4, 5):
        raise ValueError(
            f"a bet is [request_id, account_id, bet, stake, attested_by], not {fields!r}"
        )
    return BetRequest(*fields)


def _when_all(futures: list[Future[str]], then: Callable[[], None]) -> None:
    if not futures:
        then()
        return
    left = [len(futures)]
    counting = threading.Lock()

    def one_done(_: Future[str]) -> None:
        with counting:
            left[0] -= 1
            last = left[0] == 0
        if last:
            then()

    for future in futures:
        future.add_done_callback(one_done)
