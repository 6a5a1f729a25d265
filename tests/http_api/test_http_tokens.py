"""API tokens: created, listed and revoked on the command line, kept only as
hashes, refused once revoked or expired, and never in a log or an error."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.http.tokens import ApiRole, TokenStore
from ledger.node import Node
from tests.http_support import make_api


def ledger_cli(keys: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ledger.cli.main", "--keys", str(keys), *args],
        capture_output=True,
        text=True,
        env={**os.environ},
        timeout=60,
    )


def test_tokens_on_the_command_line_are_stored_as_hashes_and_revoked(
    node: Node, tmp_path: Path
) -> None:
    api = make_api(node, tmp_path)
    keys = node.keys.path
    created = ledger_cli(keys, "tokens", "create", "--role", "cashier")
    assert created.returncode == 0, created.stderr
    token = created.stdout.strip()
    token_id = token.split(".")[0]
    stored = (keys / "tokens.json").read_text()
    assert token not in stored and token.split(".")[1] not in stored  # only its hash
    assert (keys / "tokens.json").stat().st_mode & 0o077 == 0
    listed = ledger_cli(keys, "tokens", "list")
    assert token_id in listed.stdout and "cashier" in listed.stdout
    assert token.split(".")[1] not in listed.stdout
    headers = {"Authorization": f"Bearer {token}", "Idempotency-Key": "a"}
    body = {"owner": "o", "currency": "EUR"}
    assert api.client.post("/v1/accounts", json=body, headers=headers).status_code == 201
    revoked = ledger_cli(keys, "tokens", "revoke", token_id)
    assert revoked.returncode == 0, revoked.stderr
    refused = api.client.post(
        "/v1/accounts", json=body, headers={**headers, "Idempotency-Key": "b"}
    )
    assert refused.status_code == 401  # the running app sees the revocation at once


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--role", "table-device"], "needs --table"),
        (["--role", "cashier", "--table", "00000000-0000-0000-0000-000000000001"], "only it"),
        (["--role", "table-device", "--table", "nope"], "not a table id"),
        (["--role", "auditor", "--expires", "2020-01-01T00:00+00:00"], "in the past"),
        (["--role", "auditor", "--expires", "2030-01-01T00:00"], "no time zone"),
        (["--role", "root"], "invalid choice"),
    ],
)
def test_bad_token_requests_are_one_line_exit_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = ledger_cli(tmp_path / "keys", "tokens", "create", *args)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "keys" / "tokens.json").exists()


def test_tokens_never_appear_in_logs_or_errors(
    node: Node, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api = make_api(node, tmp_path)
    caplog.set_level(logging.DEBUG)
    secrets = list(api.tokens.values())
    revoked, entry = api.service.tokens.create(ApiRole.CASHIER)
    api.service.tokens.revoke(entry.token_id)
    responses = [
        api.client.post(  # a revoked token
            "/v1/accounts",
            json={"owner": "o", "currency": "EUR"},
            headers={"Authorization": f"Bearer {revoked}", "Idempotency-Key": "k"},
        ),
        api.post("/v1/accounts", {"owner": "o", "currency": "EUR"}, "auditor"),  # 403
        api.post("/v1/accounts", {"owner": "o", "currency": "XXQ"}, "cashier"),  # 400
        api.post("/v1/accounts", {"owner": 5, "currency": "EUR"}, "cashier"),  # 422
        api.get("/v1/accounts/not-a-uuid", "auditor"),  # 404
    ]
    assert [r.status_code for r in responses] == [401, 403, 400, 422, 404]
    shown = caplog.text + "".join(r.text for r in responses)
    for secret in [*secrets, revoked]:
        assert secret not in shown and secret.split(".")[1] not in shown


def test_an_unreadable_tokens_file_refuses_every_call(node: Node, tmp_path: Path) -> None:
    api = make_api(node, tmp_path)
    store = TokenStore(node.keys.path)
    store.path.write_text("{not json")
    response = api.get("/v1/games", "auditor")
    assert response.status_code == 500 and "is not a tokens file" in response.json()["detail"]
