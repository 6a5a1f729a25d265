"""A feed consumer as a process of its own (tests/http_api/test_http_feed.py kills it):
it follows `GET /v1/events/stream` from the last position in its file and
appends each event, one line each, flushed, before reading the next.

    python tests/feed_consumer.py BASE_URL TOKEN FILE
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx


def last_position(path: Path) -> int | None:
    """The last whole line's position (a line cut by a kill is dropped)."""
    if not path.exists():
        return None
    text = path.read_text()
    whole = text[: text.rfind("\n") + 1]
    if whole != text:
        path.write_text(whole)  # the cut line was never processed
    lines = whole.splitlines()
    return int(json.loads(lines[-1])["position"]) if lines else None


def main() -> None:
    base, token, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    after = last_position(out)
    params = {"follow": "true"} | ({} if after is None else {"after": str(after)})
    headers = {"Authorization": f"Bearer {token}"}
    with (
        out.open("a") as sink,
        httpx.stream(
            "GET", f"{base}/v1/events/stream", params=params, headers=headers, timeout=None
        ) as response,
    ):
        response.raise_for_status()
        for line in response.iter_lines():
            if line:
                sink.write(line + "\n")
                sink.flush()


if __name__ == "__main__":
    main()
