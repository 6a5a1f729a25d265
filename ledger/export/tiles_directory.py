"""A tiles directory reached through file descriptors.

Every file of a tiles directory may be an attacker's (docs/tlog.md): a link
planted at `tile/0/770` pointing at the keys, a directory `tile/0` swapped for
a link to another, a fifo that would hold a reader forever. So below the
directory nothing is reached through a symbolic link (each path component is
opened relative to its parent's descriptor with O_NOFOLLOW, which also rules
out a race between a check and the open), only regular files are read, each
read is bounded by the largest file of its kind, and what the writer removes
or replaces is the link itself, never what it points at.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import Final, Literal

_DIRECTORY: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a fifo must not wait for a writer (it is refused once opened).
_READ: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_CHUNK: Final = 1 << 20
# No tile path is deeper than tile/<L>/x…/x…/<NNN>.p/<W> for an index below
# 2**64: a deeper directory is named, not walked (nor can it exhaust the stack).
MAX_DEPTH: Final = 16

Kind = Literal["file", "symlink", "other", "deep"]


class RefusedFile(Exception):
    """A path that is not a regular file of the directory reached without a link."""

    def __init__(self, relative: str, reason: str, *, missing: bool = False) -> None:
        super().__init__(f"{relative} {reason}")
        self.relative = relative
        self.reason = reason
        self.missing = missing


def _parts(relative: str) -> list[str]:
    parts = relative.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise RefusedFile(relative, "is not a path inside the directory")
    return parts


def _kind_of(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link (nothing is read through one)"
    if stat.S_ISDIR(mode):
        return "a directory, not a file"
    if stat.S_ISREG(mode):
        return "a file, not a directory"
    return "not a regular file (a fifo, a socket or a device)"


class TilesDirectory:
    """A directory opened once; every path below it is relative to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> TilesDirectory:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @contextmanager
    def locked(self) -> Iterator[None]:
        """One writer at a time, on the directory itself: a lock creates no file."""
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    # Reading.

    def _refusal(self, relative: str, parts: list[str], depth: int, exc: OSError) -> RefusedFile:
        """Why opening `parts[depth]` failed, naming the component at fault."""
        if exc.errno == errno.ENOENT:
            return RefusedFile(relative, "is missing", missing=True)
        named = "/".join(parts[: depth + 1])
        try:
            mode = os.lstat(named, dir_fd=self.fd).st_mode
        except OSError:
            return RefusedFile(relative, f"cannot be read ({(exc.strerror or '').lower()})")
        if depth == len(parts) - 1:
            return RefusedFile(relative, f"cannot be read (it is {_kind_of(mode)})")
        return RefusedFile(relative, f"cannot be read ({named} is {_kind_of(mode)})")

    @contextmanager
    def _parent(self, relative: str, parts: list[str]) -> Iterator[int]:
        """The descriptor of the directory holding `parts[-1]`, each component a
        real directory."""
        opened: list[int] = []
        try:
            parent = self.fd
            for depth, name in enumerate(parts[:-1]):
                try:
                    parent = os.open(name, _DIRECTORY, dir_fd=parent)
                except OSError as exc:
                    raise self._refusal(relative, parts, depth, exc) from None
                opened.append(parent)
            yield parent
        finally:
            for fd in opened:
                os.close(fd)

    def read(self, relative: str, limit: int) -> bytes:
        """The bytes of the regular file `relative` (at most `limit` bytes);
        anything else is a `RefusedFile`."""
        parts = _parts(relative)
        with self._parent(relative, parts) as parent:
            try:
                fd = os.open(parts[-1], _READ, dir_fd=parent)
            except OSError as exc:
                raise self._refusal(relative, parts, len(parts) - 1, exc) from None
            try:
                mode = os.fstat(fd).st_mode
                if not stat.S_ISREG(mode):
                    raise RefusedFile(relative, f"cannot be read (it is {_kind_of(mode)})")
                return _read_at_most(fd, relative, limit)
            except OSError as exc:
                raise RefusedFile(
                    relative, f"cannot be read ({(exc.strerror or '').lower()})"
                ) from None
            finally:
                os.close(fd)

    def names(self, relative: str) -> list[str]:
        """The names in the directory `relative` ([] when there is none)."""
        parts = _parts(relative)
        try:
            with self._parent(relative, parts) as parent:
                try:
                    fd = os.open(parts[-1], _DIRECTORY, dir_fd=parent)
                except OSError as exc:
                    raise self._refusal(relative, parts, len(parts) - 1, exc) from None
                try:
                    return sorted(os.listdir(fd))
                finally:
                    os.close(fd)
        except RefusedFile as exc:
            if exc.missing:
                return []
            raise

    def walk(self, skip: frozenset[str] = frozenset()) -> Iterator[tuple[str, Kind]]:
        """Every path below the directory that is not a directory, in order:
        a regular file, a symbolic link (not followed), anything else, or a
        directory too deep to hold a tile (not entered). Top-level names in
        `skip` are passed over."""
        yield from self._walk(self.fd, "", 0, skip)

    def _walk(
        self, fd: int, prefix: str, depth: int, skip: frozenset[str]
    ) -> Iterator[tuple[str, Kind]]:
        with os.scandir(fd) as scan:
            entries = sorted((entry.name, entry) for entry in scan)
        for name, entry in entries:
            if not prefix and name in skip:
                continue
            relative = prefix + name
            if entry.is_symlink():
                yield relative, "symlink"
            elif entry.is_dir(follow_symlinks=False):
                if depth + 1 >= MAX_DEPTH:
                    yield relative, "deep"
                    continue
                try:
                    child = os.open(name, _DIRECTORY, dir_fd=fd)
                except OSError:  # swapped for a link or removed since the listing
                    yield relative, "other"
                    continue
                try:
                    yield from self._walk(child, relative + "/", depth + 1, skip)
                finally:
                    os.close(child)
            elif entry.is_file(follow_symlinks=False):
                yield relative, "file"
            else:
                yield relative, "other"

    # Writing: the writer's own files, made without following a link.

    def _make_parents(self, relative: str, parts: list[str]) -> int:
        """The descriptor of `parts[-1]`'s directory, made where missing."""
        parent = os.dup(self.fd)
        try:
            for depth, name in enumerate(parts[:-1]):
                with suppress(FileExistsError):
                    os.mkdir(name, dir_fd=parent)
                try:
                    child = os.open(name, _DIRECTORY, dir_fd=parent)
                except OSError as exc:
                    raise self._refusal(relative, parts, depth, exc) from None
                os.close(parent)
                parent = child
        except BaseException:
            os.close(parent)
            raise
        return parent

    def write_new(self, relative: str, data: bytes) -> None:
        """Create the file `relative` (it must not exist) and its directories, on disk."""
        parts = _parts(relative)
        parent = self._make_parents(relative, parts)
        try:
            fd = os.open(parts[-1], _CREATE, 0o644, dir_fd=parent)
            try:
                _write_all(fd, data)
                os.fsync(fd)  # on disk before a checkpoint can name it
            finally:
                os.close(fd)
        finally:
            os.close(parent)

    def replace(self, name: str, data: bytes) -> None:
        """Replace the top-level file `name` at once (a crash leaves the old or the new)."""
        temporary = f".{name}.new"
        self.remove(temporary)
        fd = os.open(temporary, _CREATE, 0o644, dir_fd=self.fd)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        os.fsync(self.fd)

    def move_all(self, source: str, paths: list[str]) -> None:
        """Move each of `paths` from below the directory `source` to the same
        path below this one, its directories made first, then on disk."""
        parents: dict[str, tuple[int, int]] = {}  # directory -> (source fd, target fd)
        try:
            for relative in paths:  # every directory ready before a file moves
                folder, _, name = relative.rpartition("/")
                if folder not in parents:
                    from_parts = _parts(f"{source}/{relative}")
                    src = self._make_parents(f"{source}/{relative}", from_parts)
                    parents[folder] = (src, self._make_parents(relative, _parts(relative)))
                try:
                    mode = os.lstat(name, dir_fd=parents[folder][1]).st_mode
                except FileNotFoundError:
                    continue
                if stat.S_ISDIR(mode):  # a link or a file in the way is replaced, not this
                    raise RefusedFile(relative, "cannot be written (a directory is in its place)")
            for relative in paths:
                name = relative.rpartition("/")[2]
                src, dst = parents[relative.rpartition("/")[0]]
                os.replace(name, name, src_dir_fd=src, dst_dir_fd=dst)
            for _, dst in parents.values():  # the renames on disk, each directory once
                os.fsync(dst)
        finally:
            for src, dst in parents.values():
                os.close(src)
                os.close(dst)

    def remove(self, name: str) -> None:
        """Remove the top-level `name`: a link or a file itself, a directory and
        everything in it without following a link out of it; nothing if absent."""
        try:
            mode = os.lstat(name, dir_fd=self.fd).st_mode
        except FileNotFoundError:
            return
        if stat.S_ISDIR(mode):
            shutil.rmtree(name, dir_fd=self.fd)  # the descriptor-based, link-safe walk
        else:
            os.unlink(name, dir_fd=self.fd)


def _read_at_most(fd: int, relative: str, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = os.read(fd, min(_CHUNK, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise RefusedFile(relative, f"is larger than any such file ({limit:,} bytes)")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
