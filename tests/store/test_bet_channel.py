"""The wire between `ledger serve`'s workers and its writer process
(`ledger.casino.bet_channel`), in one process: every answer and every
refusal comes back as the writer gave it, and a line that breaks with bets
unanswered hands them (and every bet after) to the worker's own runner."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import OperationalError

from ledger.casino.bet_batches import BetRequest, refused
from ledger.casino.bet_channel import (
    GROUPED_BELOW,
    LINE_BETS,
    BetChannel,
    PlaceHere,
    decode_error,
    encode_error,
    serve_connection,
)
from ledger.errors import (
    ConflictError,
    InvalidCommandError,
    LedgerError,
    NotFoundError,
    RequestIdReusedError,
)


@pytest.mark.parametrize(
    "error",
    [
        InvalidCommandError(
            "stake of 5 is more than the available balance 1",
            code="insufficient_funds",
            param="stake",
        ),
        NotFoundError("no account 7"),
        RequestIdReusedError("request id 'r' was already used for a different place_bet"),
        ConflictError("place_bet: still conflicting after 50 attempts"),
    ],
)
def test_a_refusal_crosses_as_the_same_error(error: LedgerError) -> None:
    again = decode_error(*encode_error(error))
    assert type(again) is type(error) and str(again) == str(error)
    assert (again.code, again.param) == (error.code, error.param)


def test_a_refusal_from_an_older_peer_gets_its_class_default_code() -> None:
    """A peer of an earlier release sends the class name and text only."""
    again = decode_error("NotFoundError", "no account 7")
    assert isinstance(again, NotFoundError) and (again.code, again.param) == ("not_found", None)


def test_a_store_failure_crosses_as_a_store_failure() -> None:
    again = decode_error(*encode_error(RuntimeError("connection refused")))
    assert isinstance(again, OperationalError) and not isinstance(again, LedgerError)


class Writer:
    """A writer end on a Unix socket, placing bets with `place`."""

    def __init__(self, path: Path, place: Any) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen()
        self.connections: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, args=(place,), daemon=True)
        self.thread.start()

    def _accept(self, place: Any) -> None:
        connection, _ = self.listener.accept()
        self.connections.append(connection)
        serve_connection(connection, place)

    def hang_up(self) -> None:
        for connection in self.connections:
            connection.shutdown(socket.SHUT_RDWR)
        self.listener.close()


def placed_there(round_id: str, bets: Sequence[BetRequest]) -> list[Future[str]]:
    answers: list[Future[str]] = []
    for b in bets:
        if b.stake <= 0:
            answers.append(
                refused(InvalidCommandError(f"a stake is a positive amount, not {b.stake}"))
            )
            continue
        answer: Future[str] = Future()
        answer.set_result(
            f"there:{round_id}:{b.request_id}:{b.account_id}:{b.bet['bet']}:{b.stake}"
        )
        answers.append(answer)
    return answers


def placing(where: str) -> PlaceHere:
    """A runner that answers each bet at once with `where`, its round and request id."""

    def place(round_id: str, bets: Sequence[BetRequest]) -> list[Future[str]]:
        answers: list[Future[str]] = []
        for bet in bets:
            answer: Future[str] = Future()
            answer.set_result(f"{where}:{round_id}:{bet.request_id}")
            answers.append(answer)
        return answers

    return place


placed_here = placing("here")


@pytest.fixture
def socket_path(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "w.sock"


def test_bets_and_refusals_come_back_in_order(socket_path: Path) -> None:
    Writer(socket_path, placed_there)
    channel = BetChannel.to_writer_process(str(socket_path), placed_here)
    bets = [
        BetRequest("r1", "a1", {"bet": "big"}, 5),
        BetRequest("r2", "a2", {"bet": "small"}, 0),
        BetRequest("r3", "a3", {"bet": "odd"}, 7),
    ]
    first, second, third = channel.submit("R", bets)
    assert first.result(5) == "there:R:r1:a1:big:5"
    with pytest.raises(InvalidCommandError, match="not 0"):
        second.result(5)
    assert third.result(5) == "there:R:r3:a3:odd:7"
    (single,) = channel.submit("R", [BetRequest("r4", "a4", {"bet": "even"}, 1)])
    assert single.result(5) == "there:R:r4:a4:even:1"
    channel.close()


def test_a_bet_that_is_not_json_is_placed_here(socket_path: Path) -> None:
    """(The Python API's caller may hand any object: the worker's own runner
    refuses it in its words.)"""
    Writer(socket_path, placed_there)
    channel = BetChannel.to_writer_process(str(socket_path), placed_here)
    (answer,) = channel.submit("R", [BetRequest("r1", "a1", {"bet": object()}, 5)])
    assert answer.result(5) == "here:R:r1"
    (nan,) = channel.submit("R", [BetRequest("r2", "a1", {"bet": float("nan")}, 5)])
    assert nan.result(5) == "here:R:r2"


def test_a_broken_line_hands_unanswered_bets_to_the_worker(socket_path: Path) -> None:
    """The writer took the bets and went away before answering: they are placed
    here (by request id: what the writer committed is answered as the first
    time), and so is every bet after."""
    taken = threading.Event()
    release = threading.Event()

    def slow(round_id: str, bets: Sequence[BetRequest]) -> list[Future[str]]:
        taken.set()
        release.wait(5)
        return placed_there(round_id, bets)

    writer = Writer(socket_path, slow)
    channel = BetChannel.to_writer_process(str(socket_path), placed_here)
    (waiting,) = channel.submit("R", [BetRequest("r1", "a1", {"bet": "big"}, 5)])
    assert taken.wait(5)
    writer.hang_up()
    assert waiting.result(5) == "here:R:r1"
    release.set()
    (after,) = channel.submit("R", [BetRequest("r2", "a1", {"bet": "big"}, 5)])
    assert after.result(5) == "here:R:r2"
    assert not channel.connected


def test_a_refusal_before_the_runner_is_answered_as_one(socket_path: Path) -> None:
    def refuses(_: str, bets: Sequence[BetRequest]) -> list[Future[str]]:
        return [refused(InvalidCommandError("a request id is 1..200 characters")) for _ in bets]

    Writer(socket_path, refuses)
    channel = BetChannel.to_writer_process(str(socket_path), placed_here)
    (answer,) = channel.submit("R", [BetRequest("", "a1", {"bet": "big"}, 5)])
    with pytest.raises(InvalidCommandError, match=r"1\.\.200"):
        answer.result(5)


def test_bets_submitted_in_one_turn_of_an_event_loop_leave_in_one_line(
    socket_path: Path,
) -> None:
    """(An HTTP worker's requests parsed in one turn of its loop: the writer
    reads and answers one message a round for them, not one a bet.)"""
    messages: list[tuple[str, list[str]]] = []

    def recorded(round_id: str, bets: Sequence[BetRequest]) -> list[Future[str]]:
        messages.append((round_id, [b.request_id for b in bets]))
        return placed_there(round_id, bets)

    Writer(socket_path, recorded)
    channel = BetChannel.to_writer_process(str(socket_path), placed_here)

    async def one_turn() -> list[str]:
        futures = [
            future
            for n in range(5)
            for future in channel.submit("R" if n % 2 == 0 else "S", [
                BetRequest(f"r{n}", "a", {"bet": "big"}, 5)
            ])
        ]  # fmt: skip
        return [await asyncio.wrap_future(f) for f in futures]

    answers = asyncio.run(one_turn())
    assert answers == [f"there:{'R' if n % 2 == 0 else 'S'}:r{n}:a:big:5" for n in range(5)]
    assert sorted(messages) == [("R", ["r0", "r2", "r4"]), ("S", ["r1", "r3"])]
    (alone,) = channel.submit("R", [BetRequest("r9", "a", {"bet": "big"}, 5)])  # no loop
    assert alone.result(5) == "there:R:r9:a:big:5"
    assert messages[-1] == ("R", ["r9"])
    channel.close()


def test_a_batch_leaves_alone_and_a_grouped_line_is_bounded(socket_path: Path) -> None:
    """A line is answered when its last bet commits: a batch must not wait for
    another's, so it is never grouped; nor does a grouped line grow past
    `LINE_BETS`."""
    messages: list[list[str]] = []

    def recorded(round_id: str, bets: Sequence[BetRequest]) -> list[Future[str]]:
        messages.append([b.request_id for b in bets])
        return placed_there(round_id, bets)

    Writer(socket_path, recorded)
    channel = BetChannel.to_writer_process(str(socket_path), placed_here)

    def bets(prefix: str, count: int) -> list[BetRequest]:
        return [BetRequest(f"{prefix}{n}", "a", {"bet": "big"}, 5) for n in range(count)]

    async def one_turn() -> int:
        futures = channel.submit("R", bets("one-", 1))
        futures += channel.submit("R", bets("batch-", GROUPED_BELOW))
        for n in range(LINE_BETS + 1):
            futures += channel.submit("R", bets(f"single{n}-", 1))
        return len([await asyncio.wrap_future(f) for f in futures])

    assert asyncio.run(one_turn()) == 1 + GROUPED_BELOW + LINE_BETS + 1
    assert [len(m) for m in messages] == [GROUPED_BELOW, LINE_BETS, 2]
    assert messages[0][0] == "batch-0" and messages[1][0] == "one-0"
    channel.close()
