"""The event feed: the log from a position on, a page at a time or as a stream
of JSON Lines (`ledger.http.feed` reads it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Query
from fastapi.responses import StreamingResponse

from ledger.http import feed, models, views
from ledger.http.dependencies import READERS, ServiceDep
from ledger.http.routing import Router

FOLLOW_POLL = 0.2  # seconds between looks at the log's end for a following stream

router = Router()


@router.endpoint("GET", "/events", READERS, models.FeedPage)
def events(
    service: ServiceDep,
    after: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    limit: Annotated[int, Query(ge=1, le=feed.MAX_LIMIT)] = 100,
) -> models.FeedPage:
    """Events after log position `after` (from the start without it), in the export
    bundle's record format, each with its Merkle leaf index; `next_after` is the
    position to ask from next."""
    return views.feed_page(feed.events_after(service.app, after, limit), after)


@router.endpoint(
    "GET",
    "/events/stream",
    READERS,
    success={
        200: {
            "description": "JSON Lines: one FeedRecord a line",
            "content": {
                "application/x-ndjson": {"schema": {"$ref": "#/components/schemas/FeedRecord"}}
            },
        }
    },
    response_class=StreamingResponse,
)
async def events_stream(
    service: ServiceDep,
    after: Annotated[int | None, Query(ge=0, le=2**62)] = None,
    limit: Annotated[int, Query(ge=1, le=10**9)] = 10**9,
    follow: bool = False,
) -> StreamingResponse:
    """The same records as JSON Lines, one event a line, up to `limit`; with
    `follow`, waiting for new events until the client goes away."""
    app = service.app
    feed.check_position(app, after)  # a bad position is a 400, not a cut stream

    async def lines() -> AsyncIterator[bytes]:
        position, sent = after, 0
        while sent < limit:
            got = 0
            for line in feed.stream_lines(app, position, limit - sent):
                got += 1
                yield line
                # (positions jump over archived places: the next read starts after this one)
                position = int(line[len(b'{"position":') : line.index(b",")])
            if got:
                sent += got
            elif not follow:
                return
            else:
                await asyncio.sleep(FOLLOW_POLL)

    return StreamingResponse(lines(), media_type="application/x-ndjson")
