"""docs/privacy.md's examples run, in one empty directory, as a user types them."""

from __future__ import annotations

from pathlib import Path

from tests.doc_pages import blocks, run_block, user_env

PAGE = Path(__file__).resolve().parents[2] / "docs" / "privacy.md"


def test_every_runnable_block_of_the_privacy_page_runs(tmp_path: Path) -> None:
    env = user_env("privacy passphrase")
    outputs = [out for lang, body in blocks(PAGE) if (out := run_block(lang, body, tmp_path, env))]
    assert len(outputs) == 1
    first, second, owner, erasures, significant = outputs[0].splitlines()
    assert first.startswith("erased data subject account-") and "its key destroyed" in first
    assert second.startswith("erased data subject dealer-") and "its key destroyed" in second
    assert owner.split() == ["owner", "[erased]"]
    assert "2 erasures of personal data: operator signatures" in erasures
    assert significant == "2"
