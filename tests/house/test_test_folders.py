"""The tests live in folders by what they test (issue 39, item 5): none is
left at the top, and no folder shadows a standard-library module (a script
run from tests/, as several tests run `reproducible.py`, imports from there
before the standard library: a folder called `http` broke `http.client`)."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_file_is_in_a_folder_of_what_it_tests() -> None:
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []
    folders = [d for d in TESTS.iterdir() if d.is_dir() and any(d.glob("test_*.py"))]
    assert len(folders) >= 10
    assert all((d / "__init__.py").is_file() for d in folders)


def test_no_folder_shadows_a_standard_library_module() -> None:
    names = {d.name for d in TESTS.iterdir() if d.is_dir()}
    assert names & set(sys.stdlib_module_names) == set()
