"""A source node served in-process (the HTTP app through FastAPI's test
client, so the mirror reads the real routes), a mirror store beside it on the
same backend, and a tampering source for the attacks the HTTP API itself
would never make (a feed that skips or repeats, a forged envelope)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ledger.audit.verify import Level
from ledger.crypto.keys import Keyring
from ledger.mirror.copy import Mirror
from ledger.mirror.source import Source, SourceAnswered
from ledger.node import Node
from ledger.store.application import LedgerApplication
from tests.casino_support import casino_on
from tests.conftest import PG_URL, drop_pg_schema, new_pg_schema
from tests.http_support import Api, make_api


class ClientSource(Source):
    """The source's HTTP API through the test client; `tamper` may rewrite any
    answer (path, parsed JSON) -> JSON before the mirror sees it."""

    def __init__(self, api: Api, tamper: Callable[[str, Any], Any] | None = None) -> None:
        super().__init__("http://source.test", api.tokens["auditor"])
        self.api = api
        self.tamper = tamper

    def _get(self, path: str, **params: object) -> Any:
        query = {k: v for k, v in params.items() if v is not None}
        response = self.api.get(f"/v1{path}", **query)
        if response.status_code == 404:
            raise SourceAnswered(f"the source answered 404 to GET /v1{path}: not found", 404)
        assert response.status_code == 200, response.text
        answer = response.json()
        return self.tamper(path, answer) if self.tamper else answer


def mirror_url(source_url: str, tmp_path: Path) -> Iterator[str]:
    """A fresh mirror store on the source's backend."""
    if source_url.startswith("sqlite"):
        yield f"sqlite:///{tmp_path / 'mirror.db'}"
        return
    schema = new_pg_schema()
    try:
        yield f"{PG_URL}?schema={schema}"
    finally:
        drop_pg_schema(schema)


def is_postgres(url: str) -> bool:
    return urlsplit(url).scheme.startswith("postgres")


def write_events(node: Node, accounts: int = 3, deposits: int = 2) -> None:
    """Some events on the source, then a checkpoint over them."""
    casino = casino_on(node)
    for _ in range(accounts):
        account = casino.open_account(request_id=str(uuid.uuid4()), owner="p", currency="EUR")
        for _ in range(deposits):
            casino.deposit(request_id=str(uuid.uuid4()), account_id=account, amount=500)
    node.checkpointer().catch_up()


@contextmanager
def opened_mirror(
    url: str,
    keyring: Keyring,
    source: Source,
    directory: Path,
    **options: Any,
) -> Iterator[Mirror]:
    app = LedgerApplication(url, keyring=keyring, create=True)
    try:
        yield Mirror(
            app, keyring, source, directory, level=options.pop("level", Level.SIGNATURES), **options
        )
    finally:
        app.close()


def source_api(node: Node, tmp_path: Path) -> Api:
    return make_api(node, tmp_path)
