"""Schemathesis against the whole OpenAPI document: requests generated for
every operation (valid and invalid, a bounded number each so it fits CI),
sent with a token of a role the operation allows so they reach validation
and the Python API. No response is a 5xx, every response is one the document
declares for the operation (status, content type, headers, body schema), and
a refused request records nothing (both stores)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ledger.node import Node
from tests.http_support import Api, make_api

EXAMPLES = 10  # per operation and store: the file stays well under a minute
# Every response as the document says: no 5xx, a declared status, its declared
# content type, headers and body schema.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@pytest.fixture
def api(node: Node, tmp_path: Path) -> Api:
    made = make_api(node, tmp_path)
    made.wallet(1_000)  # something to find, so lookups can succeed too
    made.round(made.table())
    return made


# The committed document (tests/http_api/test_http_api.py holds it to the served one).
schema = schemathesis.openapi.from_path(
    Path(__file__).resolve().parents[2] / "docs" / "openapi.json"
)


def send(api: Api, case: Any, headers: dict[str, str]) -> Any:
    """The generated request, through the in-process client (as schemathesis would send it)."""
    sent = case.as_transport_kwargs(base_url="http://testserver", headers=headers)
    body: dict[str, Any] = {}
    if "json" in sent:
        body["json"] = sent["json"]
    elif sent.get("data") is not None:
        data = sent["data"]
        body["content"] = data if isinstance(data, bytes | str) else str(data)
    return api.client.request(
        sent["method"], sent["url"], headers=sent["headers"], params=sent["params"], **body
    )


@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,  # the same examples on every run: a CI failure reproduces
)
def test_answers_as_documented_and_refusals_record_nothing(case: Any, api: Api) -> None:
    roles = [r for r in case.operation.definition.raw["x-roles"] if r != "table-device"]
    # (no roles: the public health, asked with no token as a monitor asks it)
    headers = {"Authorization": f"Bearer {api.tokens[roles[0]]}"} if roles else {}
    if case.query and "follow" in case.query:
        case.query["follow"] = False  # a following stream never ends (test_http_feed.py kills one)
    before = api.events()
    response = send(api, case, headers)
    assert response.status_code < 500, (case.method, case.path, response.text)
    case.validate_response(response, checks=CHECKS, headers=headers)
    if response.status_code >= 400:
        assert api.events() == before, (case.method, case.path, response.status_code)
        assert response.json()["detail"], "every refusal says why"
