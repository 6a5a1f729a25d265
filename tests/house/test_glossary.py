"""The glossary held to the code (issue 39, item 3): docs/design.md's
*Glossary* gives one word for each thing and, after *not:*, the older word
the code no longer uses. No identifier or string of `ledger/` spells an older
word (a whole word, or a part of a snake_case or kebab-case name), but in the
two modules that own the older names (`ledger/domain/stored_names.py`, what
was stored or signed under them; `ledger/casino/aliases.py`, the aliases
users may have used) and on a line that says it keeps an alias (`# alias`),
and there only spelt as `ALIASES` spells it. Comments are not read."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

from ledger.casino.aliases import ALIASES

ROOT = Path(__file__).resolve().parents[2]
LEDGER = ROOT / "ledger"
DESIGN = ROOT / "docs" / "design.md"
OWNERS = {LEDGER / "domain" / "stored_names.py", LEDGER / "casino" / "aliases.py"}
MARK = "# alias"
TERMS = (
    "game",
    "rules profile",
    "rules hash",
    "table",
    "round",
    "seed",
    "draw",
    "action",
    "move",
    "step",
    "settlement",
    "fault",
    "void",
    "correction",
)
_WORD_CHARS = re.compile(r"[\w-]")
_STRINGS = {tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}


def glossary() -> str:
    text = DESIGN.read_text(encoding="utf-8")
    return " ".join(text.split("\n## Glossary\n", 1)[1].split("\n## ", 1)[0].split())


def older_words() -> list[str]:
    return [
        word.strip()
        for listed in re.findall(r"\(not: ([^)]+)\)", glossary())
        for word in listed.split(",")
    ]


def pattern(words: list[str]) -> re.Pattern[str]:
    """Each word, its plural too, as a whole word or a part of a name joined by
    `_` or `-` (a space in it matches either)."""
    spelt = "|".join(r"[ _-]".join(map(re.escape, w.split())) for w in words)
    return re.compile(rf"(?<![A-Za-z])(?:{spelt})s?(?![A-Za-z])", re.IGNORECASE)


def owned_spellings() -> set[str]:
    """Every name an alias is spelt with, as `ALIASES` spells it (its code, split
    into names: `ledger variants` gives `ledger` and `variants`)."""
    return {
        name
        for alias in ALIASES
        for code in re.findall(r"`([^`]+)`", alias.name)
        for name in re.findall(r"[A-Za-z_][\w-]*", code)
    }


def _spelling(text: str, start: int, end: int) -> str:
    """The whole name around text[start:end]."""
    while start > 0 and _WORD_CHARS.match(text[start - 1]):
        start -= 1
    while end < len(text) and _WORD_CHARS.match(text[end]):
        end += 1
    return text[start:end].strip("-")


def offences(source: str, older: re.Pattern[str], owned: set[str]) -> Iterator[tuple[int, str]]:
    """(line, spelling) of each older word in an identifier or a string of
    `source`, but an owned spelling on a line marked as keeping an alias."""
    lines = source.splitlines()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.NAME and token.type not in _STRINGS:
            continue
        marked = any(MARK in lines[row - 1] for row in (token.start[0], token.end[0]))
        for found in older.finditer(token.string):
            spelt = _spelling(token.string, found.start(), found.end())
            if not (marked and spelt in owned):
                yield token.start[0], spelt


def test_the_glossary_names_each_thing_and_its_older_words() -> None:
    text = glossary()
    for term in TERMS:
        assert f"**{term}**" in text, term
    assert {"variant", "dice seed", "throws", "faulty throw"} <= set(older_words())


def test_no_older_word_in_the_code_but_where_it_is_owned() -> None:
    older, owned = pattern(older_words()), owned_spellings()
    found = [
        f"{path.relative_to(ROOT)}:{line}: {spelt}"
        for path in sorted(LEDGER.rglob("*.py"))
        if path not in OWNERS
        for line, spelt in offences(path.read_text(encoding="utf-8"), older, owned)
    ]
    assert found == [], "older words in ledger/:\n" + "\n".join(found)


def test_the_owners_spell_the_older_words() -> None:
    """The exemptions are not empty words: each owner spells older names, and
    every line marked as keeping an alias does keep one."""
    older, owned = pattern(older_words()), owned_spellings()
    for path in OWNERS:
        assert older.search(path.read_text(encoding="utf-8")), path
    assert {"variant", "variant_version", "dice_seed", "throws", "variants"} <= owned
    marked = 0
    for path in sorted(LEDGER.rglob("*.py")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.rstrip().endswith(MARK) and path not in OWNERS:
                marked += 1
                names = set(re.findall(r"[A-Za-z_][\w-]*", line.split(MARK)[0]))
                assert names & owned, f"{path.relative_to(ROOT)}:{number} keeps no alias"
    assert marked > 10


def test_the_check_finds_an_older_word() -> None:
    """It can fail: an older word in a name, in a string (a phrase too), or an
    alias's spelling on an unmarked line or not as `ALIASES` spells it."""
    older, owned = pattern(older_words()), owned_spellings()

    def spelt(source: str) -> list[str]:
        return [s for _, s in offences(source, older, owned)]

    assert spelt("game = context.variant_of(r)\n") == ["variant_of"]
    assert spelt('why = f"after {n} faulty throws"\n') == ["faulty throws"]
    assert spelt("seed = state['dice_seed']\n") == ["dice_seed"]
    assert spelt("count = round.throws\n") == ["throws"]
    assert spelt('parser.add_argument("--dice-seed")\n') == ["dice-seed"]
    assert spelt("def variant(self) -> str:\n    ...\n") == ["variant"]
    assert spelt("table_variant = 1  # alias\n") == ["table_variant"]
    # Allowed: an owned spelling on a marked line; a comment; a longer word.
    assert spelt("def variant(self) -> str:  # alias\n    ...\n") == []
    assert spelt("x = 1  # the variant of old\n") == []
    assert spelt('money = "invariants"\n') == []
