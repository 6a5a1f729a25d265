"""The command line's errors a program can read (issue 41, item 4): a command
given `--json` writes its error as the HTTP API's error body, one JSON line on
stderr with the catalogue's `code` (and `param`), nothing on stdout and the
same exit code; without `--json`, the one plain line it always was."""

from __future__ import annotations

import argparse
import json
import uuid

import pytest

from ledger.cli.main import report_error
from ledger.error_codes import CODES
from ledger.node import Node
from tests.conftest import ledger_cli


def test_a_json_command_s_error_is_the_error_body_with_its_code(
    node: Node, capsys: pytest.CaptureFixture[str]
) -> None:
    nothing = str(uuid.uuid4())
    with ledger_cli(node.app.store_url, node.keys.path) as ledger:
        for argv in (("recall", nothing, "--json"), ("balances", nothing, "--json")):
            capsys.readouterr()
            assert ledger(*argv) == 2, argv
            out, err = capsys.readouterr()
            assert out == "", argv
            assert err.endswith("\n") and err.count("\n") == 1, err
            body = json.loads(err)
            assert set(body) == {"detail", "error", "code"}, body
            assert body["code"] == "not_found" and body["code"] in CODES, body
            assert body["error"] == "NotFoundError" and nothing in body["detail"], body
        # The same mistake without --json: the one plain line, naming the same thing.
        capsys.readouterr()
        assert ledger("recall", nothing) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("ledger: error: ") and err.count("\n") == 1
        assert nothing in err


def test_a_json_command_s_error_names_the_field_at_fault(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`param` is there when a field is at fault, as in the HTTP API's body."""
    args = argparse.Namespace(json=True)
    detail = "stake 9 is outside the table's limits"
    report_error(args, detail, "InvalidCommandError", "stake_below_minimum", "stake")
    body = json.loads(capsys.readouterr().err)
    assert body == {
        "detail": detail,
        "error": "InvalidCommandError",
        "code": "stake_below_minimum",
        "param": "stake",
    }
