"""The HTML report in a real browser: Debian's headless Chromium opens the file
(driven over the DevTools pipe, `tests/headless_chromium.py`), every chart
decodes to a picture, nothing is logged to the console, and a screenshot is
taken. A control page proves the same checks catch a broken image and a
console error."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from ledger.cli.main import main
from tests.headless_chromium import Page, chromium, open_page
from tests.reproducible import reproducible_session

EDGE = Path(__file__).resolve().parents[2] / "docs" / "xidach_edge.json"


@pytest.fixture(autouse=True)
def browser() -> None:
    if chromium() is None:
        message = (
            "Debian's chromium is not installed (`python3 tools/bootstrap.py test` installs it)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)  # never a skip in CI
        pytest.skip(message)


def _pixels(page: Page, tmp_path: Path) -> object:
    shot = tmp_path / "screenshot.png"
    shot.write_bytes(page.screenshot)
    import matplotlib.image  # here: not in every test process that collects the suite

    return matplotlib.image.imread(shot)


def test_the_report_renders_its_charts_with_no_console_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LEDGER_PASSPHRASE", "browser-test")
    monkeypatch.setenv("LEDGER_STORE", f"sqlite:///{tmp_path / 'ledger.db'}")
    monkeypatch.delenv("LEDGER_KEYS", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    with reproducible_session(12) as seeds:
        assert main(["simulate", "--rounds", "12", "--players", "4", "--tables", "3", *seeds]) == 0
    assert main(["report", "report.html", "--edge", str(EDGE)]) == 0
    page = open_page(tmp_path / "report.html")
    assert page.errors == [] and page.console == []
    # The returns chart and one house-result chart for the session's one currency.
    assert [image["alt"] for image in page.images] == [
        "observed return against theoretical",
        "house result over time in VND",
    ]
    for image in page.images:
        assert image["complete"] and image["naturalWidth"] >= 600 and image["naturalHeight"] >= 200
    pixels = _pixels(page, tmp_path)
    height, width = pixels.shape[:2]  # type: ignore[attr-defined]
    assert height > 1500 and width >= 1000  # the whole page, tables and both charts
    assert pixels.std() > 0.05  # type: ignore[attr-defined]  # not a blank page


def test_the_checks_catch_a_broken_chart_and_a_console_error(tmp_path: Path) -> None:
    control = tmp_path / "control.html"
    control.write_text(
        '<!DOCTYPE html><html><body><img alt="broken" src="data:image/png;base64,AAAA">'
        '<script>console.error("boom")</script></body></html>'
    )
    page = open_page(control)
    assert page.errors == [("error", "boom")]
    assert [(i["alt"], i["naturalWidth"]) for i in page.images] == [("broken", 0)]
