"""`ledger.outbound`: a request to a peer is answered in full within its
deadline or fails, whatever the peer does (issue 37): a trickled body, and a
connection that completes only after the deadline passed."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from ledger import outbound
from tests.peers import SlowLoris

DEADLINE = 1.0
SLACK = 15.0  # seconds: generous, for a loaded machine; an upper bound only


def ask(url: str) -> BaseException | outbound.Answer:
    """The request's answer or failure, from a thread given the deadline and
    the slack: a request that outlives them fails the test instead of hanging it."""
    found: list[BaseException | outbound.Answer] = []

    def run() -> None:
        try:
            found.append(outbound.request("POST", url, deadline=DEADLINE, body=b"x"))
        except BaseException as exc:
            found.append(exc)

    asking = threading.Thread(target=run, daemon=True)
    asking.start()
    asking.join(DEADLINE + SLACK)
    assert not asking.is_alive(), "the request outlived its deadline"
    return found[0]


def test_a_body_cut_off_at_the_deadline_is_not_taken_for_the_answer() -> None:
    """Whole headers, then a body trickled: the part read before the cut is
    no answer (trickled headers: tests/mirror/test_witness_submission.py)."""
    with SlowLoris("body") as peer:
        got = ask(peer.url)
        assert peer.sent > 0
    assert isinstance(got, outbound.DeadlinePassed), got


def test_a_deadline_passed_while_connecting_ends_the_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The connection completes just after the deadline (a SYN-ACK the peer
    held back): there was no socket to cut when the timer fired, and the peer
    then trickles its headers."""
    connect = socket.create_connection

    def late(*args: object, **kwargs: object) -> socket.socket:
        time.sleep(DEADLINE + 0.3)
        return connect(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "create_connection", late)
    with SlowLoris("headers") as peer:
        got = ask(peer.url)
    assert isinstance(got, outbound.DeadlinePassed), got
