"""A new game plugin package, rendered from the template this package ships
(`game_template/`, package data read through importlib.resources): a
one-draw dice game with its entry point, hooks, README and contract tests,
installable and passing its tests as rendered (`ledger new-game NAME`).

Each template file is `string.Template` text named with a `.tmpl` suffix,
under `package/` for the Python package (renamed to the module's name)."""

from __future__ import annotations

import importlib.util
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, distribution, entry_points
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path, PurePosixPath
from string import Template
from typing import Final

from ledger.errors import ConfigError
from ledger.inputs import output_directory
from ledger.plugins import ENTRY_POINT_GROUP
from ledger.plugins.registry import LoadedGame

TEMPLATE: Final = "game_template"
SUFFIX: Final = ".tmpl"
PACKAGE_DIR: Final = "package"
MAX_NAME: Final = 40
# A PEP 503 normalized name (lower case, single hyphens) whose hyphens, made
# underscores, give a Python identifier: one NAME is the game id, the entry
# point, the distribution's suffix and the module's.
NAME: Final = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
NAME_RULE: Final = (
    "a game name is a PEP 503 normalized project name that is also a Python "
    "identifier once its hyphens are underscores: lower-case letters and digits, "
    f"single hyphens between them, a letter first, at most {MAX_NAME} characters"
)


@dataclass(frozen=True)
class Names:
    """What one NAME gives the package (my-dice: casino-ledger-my-dice, ledger_my_dice)."""

    name: str  # the game id, the entry point's name, the directory's
    distribution: str
    module: str
    title: str


def names_for(name: str) -> Names:
    if len(name) > MAX_NAME or not NAME.fullmatch(name):
        raise ConfigError(f"not a game name: {name!r} ({NAME_RULE})")
    return Names(
        name=name,
        distribution=f"casino-ledger-{name}",
        module=f"ledger_{name.replace('-', '_')}",
        title=name.replace("-", " ").title(),
    )


def taken(names: Names, games: Mapping[str, LoadedGame]) -> str | None:
    """What here already has the package's names, if anything: a package
    rendered under them would clash with it once installed."""
    game = games.get(names.name)
    if game is not None:
        return f"game {names.name} is installed ({game.plugin} {game.version})"
    if entry_points(group=ENTRY_POINT_GROUP, name=names.name):
        return f"a plugin named {names.name} is installed"
    try:
        distribution(names.distribution)
        return f"distribution {names.distribution} is installed"
    except PackageNotFoundError:
        pass
    if importlib.util.find_spec(names.module) is not None:
        return f"a module {names.module} is importable here"
    return None


def template_files() -> dict[PurePosixPath, str]:
    """Each template file's text, by its path in the template."""
    found: dict[PurePosixPath, str] = {}

    def walk(node: Traversable, path: PurePosixPath) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, path / child.name)
            elif child.name.endswith(SUFFIX):
                found[path / child.name] = child.read_text(encoding="utf-8")

    walk(files("ledger.plugins").joinpath(TEMPLATE), PurePosixPath())
    return found


def rendered(names: Names) -> dict[PurePosixPath, str]:
    """The package's files, by path inside its directory."""
    values = {
        "name": names.name,
        "distribution": names.distribution,
        "module": names.module,
        "title": names.title,
    }
    out: dict[PurePosixPath, str] = {}
    for path, text in template_files().items():
        parts = [names.module if p == PACKAGE_DIR else p for p in path.parts]
        target = PurePosixPath(*parts)
        out[target.with_name(target.name.removesuffix(SUFFIX))] = Template(text).substitute(values)
    return out


def write_package(name: str, target: Path, games: Mapping[str, LoadedGame]) -> Names:
    """Render the package NAME into the new directory `target`: refused in one
    line, writing nothing, for a bad name, a target that already exists, or
    a name an installed game, plugin, distribution or module has (`games`:
    the installed games)."""
    names = names_for(name)
    doing = "write the new game's package to"
    if target.exists() or target.is_symlink():
        raise ConfigError(f"cannot {doing} {target}: it already exists")
    output_directory(target, doing)  # its parent is a writable directory
    clash = taken(names, games)
    if clash is not None:
        raise ConfigError(f"game name {name} is taken: {clash}; choose another")
    files_out = rendered(names)
    target.mkdir()
    try:
        for path, text in files_out.items():
            where = target.joinpath(*path.parts)
            where.parent.mkdir(parents=True, exist_ok=True)
            where.write_text(text, encoding="utf-8")
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)  # all of it or nothing
        raise
    return names
