"""Profiles as files (issue 10, item 1): the shipped ones keep the rules hashes
stores pin and travel in the wheel; an operator's own, in the directory
$LEDGER_XIDACH_PROFILES names, load without code; a bad one stops start-up
with one line naming its file, through the core's plugin error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib.resources import files
from pathlib import Path
from typing import Any

import ledger_xidach.plugin
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ledger_xidach.game import XiDach
from ledger_xidach.profile_files import (
    PROFILES,
    PROFILES_ENV,
    XIDACH,
    XIDACH_HOUSE,
    parse_profile,
)
from ledger_xidach.rules import OPTIONS, XiDachRules

from ledger.cli.main import main
from ledger.plugins import ConfigError, GameRegistry, PluginError, hookimpl, rules_hash
from ledger.plugins.manager import get_plugin_manager

PLUGIN_DIR = Path(__file__).resolve().parent.parent
# The rules hashes rounds already recorded pin: moving the profiles into files
# must not change one byte of the rules data.
PINNED = {
    "xidach": "ea2edc6437a257a296ff28563210b2197c7410d747b5f02284ecc3948e230e61",
    "xidach-house": "f38a17befd21c19932ac65d7f15a41488941fe4e0afc53f17b20b76ae477ce29",
}
VIP: dict[str, Any] = {
    "id": "xidach-vip",
    "options": {
        "ace_rule": "one-or-ten",
        "xi_dach_tens": False,
        "min_score": 15,
        "seats": 7,
        "win_pays": [1, 1],
        "xi_ban_pays": [3, 1],
        "xi_dach_pays": [2, 1],
        "dealer_bust_pays_all_at": 27,
    },
}


def with_options(**changes: Any) -> dict[str, Any]:
    return {**VIP, "options": {**VIP["options"], **changes}}


def write(directory: Path, name: str, document: Any) -> Path:
    path = directory / name
    path.write_bytes(document if isinstance(document, bytes) else json.dumps(document).encode())
    return path


@pytest.fixture
def profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An operator's profile directory, named by the environment."""
    directory = tmp_path / "xidach"
    directory.mkdir()
    monkeypatch.setenv(PROFILES_ENV, str(directory))
    return directory


def loaded() -> dict[str, Any]:
    """The games as the core loads them: the plugin alone, under its distribution name."""
    return get_plugin_manager(
        load_entry_points=False, extra=[("casino-ledger-xidach", ledger_xidach.plugin, "1.0.0")]
    ).games()


# -- the shipped profiles ------------------------------------------------------


def test_shipped_profiles_keep_the_rules_hashes_stores_pin() -> None:
    assert {game_id: rules_hash(XiDach(game_id, r).rules) for game_id, r in PROFILES.items()} == (
        PINNED
    )
    # The same rules the Python objects declared before they became files.
    before = {
        "xidach": XiDachRules(),
        "xidach-house": XiDachRules(
            ace_rule="any", min_score=14, xi_ban_pays=(2, 1), xi_dach_pays=(3, 2)
        ),
    }
    assert before == PROFILES and tuple(PROFILES.values()) == (XIDACH, XIDACH_HOUSE)
    assert {game_id: game.rules_hash for game_id, game in loaded().items()} == PINNED


def test_each_shipped_file_gives_every_option_and_only_options() -> None:
    shipped = sorted(e for e in (files("ledger_xidach") / "profiles").iterdir())
    documents = [json.loads(entry.read_text()) for entry in shipped]
    assert sorted(d["id"] for d in documents) == sorted(PINNED)
    for document in documents:
        assert set(document) == {"id", "options"}
        assert list(document["options"]) == list(OPTIONS)


def test_a_wheel_carries_the_profiles_and_loads_them_installed(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(
        PLUGIN_DIR,
        source,
        ignore=shutil.ignore_patterns("tests", "build", "*.egg-info", "__pycache__"),
    )
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--quiet"]
    dist = tmp_path / "dist"
    build = [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(source)]
    subprocess.run(build, check=True)
    (wheel,) = dist.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {f"ledger_xidach/profiles/{g}.json" for g in PINNED} <= set(names)
    site = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True)
    probe = (
        "import json, ledger_xidach.plugin as p; "
        "print(json.dumps([p.__file__, {g.id: g.rules for g in p.games()}]))"
    )
    env = {k: v for k, v in os.environ.items() if k != PROFILES_ENV}
    env["PYTHONPATH"] = str(site)
    ran = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    where, rules = json.loads(ran.stdout)
    assert Path(where).is_relative_to(site)  # the installed copy, not this source tree
    assert {game_id: rules_hash(r) for game_id, r in rules.items()} == PINNED


# -- an operator's profiles ------------------------------------------------------


def test_no_setting_no_operator_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PROFILES_ENV, raising=False)
    assert [g.id for g in ledger_xidach.plugin.games()] == ["xidach", "xidach-house"]


def test_an_operator_profile_loads_without_code(profiles: Path) -> None:
    write(profiles, "vip.json", VIP)
    (profiles / "README.txt").write_text("profiles are the *.json files")
    write(profiles, ".vip.json", b"an editor's lock file")  # dot files are never profiles
    games = loaded()
    assert list(games) == ["xidach", "xidach-house", "xidach-vip"]
    vip = games["xidach-vip"]
    # The options as written, and what the game itself fixes (a 52-card deck...).
    assert vip.rules == {**XIDACH.profile(), **VIP["options"]}
    assert vip.rules_hash not in PINNED.values()
    assert list(vip.bets) == [f"seat:{n}" for n in range(1, 8)]


def test_an_empty_directory_adds_nothing(profiles: Path) -> None:
    assert list(loaded()) == ["xidach", "xidach-house"]


BAD_FILES: list[tuple[str, Any, str]] = [
    ("truncated", b'{"id": "xidach-vip", ', "not JSON: Expecting"),
    ("latin-1", '{"id": "xì"}'.encode("latin-1"), "not UTF-8 text"),
    ("nan", json.dumps(with_options(min_score=float("nan"))).encode(), "not JSON: NaN"),
    ("list", [VIP], 'a profile is {"id": "<game id>", "options": {...}}'),
    ("extra key", {**VIP, "colour": "red"}, "unknown key(s) colour"),
    ("no id", {"options": VIP["options"]}, "no id:"),
    ("no options", {"id": "xidach-vip"}, "no options:"),
    ("options not object", {"id": "xidach-vip", "options": [1]}, "options must be an object"),
    ("unknown option", with_options(colour="red"), "unknown xì dách option(s): colour"),
    (
        "missing option",
        {"id": "xidach-vip", "options": {k: v for k, v in VIP["options"].items() if k != "seats"}},
        "missing option(s): seats",
    ),
    ("min too high", with_options(min_score=22), "min_score must be an integer 2..21: 22"),
    ("ten seats", with_options(seats=10), "seats must be an integer 1..9: 10"),
    ("float", with_options(min_score=15.0), "min_score must be an integer 2..21: 15.0"),
    ("pays typo", with_options(xi_ban_pays=[300, 1]), "xi_ban_pays must be [numerator 0..100"),
    ("pays zero", with_options(xi_dach_pays=[3, 0]), "denominator 1..100]: [3, 0]"),
    ("ace", with_options(ace_rule="eleven"), "ace_rule must be one of"),
    ("tens", with_options(xi_dach_tens="yes"), "xi_dach_tens must be true or false"),
    ("fixed", with_options(max_cards=6), "five cards at most"),
    ("derived", with_options(ngu_linh_min=15), "ngu_linh_min is derived, not an option"),
    ("twice", b'{"id": "a", "id": "b", "options": {}}', "key 'id' given twice"),
    ("shipped id", {**VIP, "id": "xidach-house"}, "xidach-house is already shipped with the"),
    ("upper case", {**VIP, "id": "XiDach-VIP"}, "id must be lowercase letters and digits"),
    ("path", {**VIP, "id": "../vip"}, "id must be lowercase"),
    ("space", {**VIP, "id": "vip club"}, "id must be lowercase"),
    ("empty", {**VIP, "id": ""}, "id must be lowercase"),
    ("double hyphen", {**VIP, "id": "vip--club"}, "id must be lowercase"),
    ("too long", {**VIP, "id": "v" * 41}, "at most 40 characters"),
    ("number", {**VIP, "id": 7}, "id must be lowercase"),
]


@pytest.mark.parametrize(
    ("document", "message"), [b[1:] for b in BAD_FILES], ids=[b[0] for b in BAD_FILES]
)
def test_a_bad_file_is_one_line_naming_it_and_the_plugin(
    profiles: Path, document: Any, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write(profiles, "a-good-one.json", {**VIP, "id": "xidach-fine"})
    bad = write(profiles, "vip.json", document)
    assert main(["games"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # nothing listed: the whole plugin is refused
    prefix = f"ledger: error: plugin casino-ledger-xidach 1.0.0: xì dách profile {bad}: "
    assert err.startswith(prefix)
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_two_files_claiming_one_id_name_both(profiles: Path) -> None:
    first = write(profiles, "a.json", VIP)
    second = write(profiles, "b.json", with_options(seats=3))
    with pytest.raises(PluginError) as caught:
        loaded()
    assert str(caught.value) == (
        f"plugin casino-ledger-xidach 1.0.0: xì dách profile {second}: "
        f"game id xidach-vip is already defined in {first}"
    )


def test_an_id_another_plugin_provides_is_refused_naming_the_file(profiles: Path) -> None:
    class Other:
        @hookimpl
        def ledger_register_games(self, registry: GameRegistry) -> None:
            registry.add(XiDach("vip", XIDACH))

    path = write(profiles, "vip.json", {**VIP, "id": "vip"})
    plugins = get_plugin_manager(
        load_entry_points=False,
        extra=[("aaa-other", Other(), "2.0"), ("casino-ledger-xidach", ledger_xidach.plugin, "1")],
    )
    with pytest.raises(PluginError) as caught:
        plugins.games()
    assert str(caught.value) == (
        f"plugin casino-ledger-xidach 1: xì dách profile {path}: "
        "game id vip is already provided by aaa-other 2.0"
    )


@pytest.mark.parametrize("kind", ["missing", "a file"])
def test_a_setting_that_names_no_directory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    target = tmp_path / "profiles"
    if kind == "a file":
        target.write_text("{}")
    monkeypatch.setenv(PROFILES_ENV, str(target))
    with pytest.raises(PluginError, match=rf"{PROFILES_ENV}: cannot list {target}: "):
        loaded()


def test_an_unreadable_entry_is_refused_naming_it(profiles: Path) -> None:
    (profiles / "vip.json").mkdir()
    with pytest.raises(PluginError, match=r"xì dách profile .*vip\.json: cannot read it: "):
        loaded()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(option=st.sampled_from([*OPTIONS, "max_cards", "deck", "rounding"]), value=JSON)
def test_any_json_value_is_taken_or_refused_with_a_config_error(option: str, value: Any) -> None:
    document = json.dumps(with_options(**{option: value})).encode()
    try:
        game_id, rules = parse_profile(document, "fuzz.json")
    except ConfigError as exc:
        assert str(exc).startswith("xì dách profile fuzz.json: ") and "\n" not in str(exc)
    else:
        assert game_id == "xidach-vip"
        assert XiDach(game_id, rules).rules[option] == value  # taken as given
