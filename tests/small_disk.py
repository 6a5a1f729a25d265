"""A filesystem that runs out of space, for the full-disk tests: a small tmpfs
mounted (as root) in a temporary directory, filled to a chosen headroom by a
file that is removed to free the space again. Unmounted however the test ends.
Under CI=true a machine where it cannot be mounted fails the test; elsewhere
it skips it."""

from __future__ import annotations

import errno
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _refuse(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def small_filesystem(size_kib: int, owner: str | None = None) -> Iterator[Path]:
    """A tmpfs of `size_kib` KiB, its root owned by `owner` (a user name) if given."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        _refuse("mounting a small tmpfs needs root and mount(8)")
    root = Path(tempfile.mkdtemp(prefix="ledger-small-disk-"))
    options = f"size={size_kib}k,mode=0755"
    if owner:
        options += f",uid={_uid(owner)},gid={_gid(owner)}"
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(root)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        root.rmdir()
        _refuse(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield root
    finally:
        subprocess.run(["umount", "-l", str(root)], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def _uid(user: str) -> int:
    return pwd.getpwnam(user).pw_uid


def _gid(user: str) -> int:
    return pwd.getpwnam(user).pw_gid


def free_kib(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize // 1024


def fill(root: Path, leave_kib: int) -> Path:
    """A file in `root` taking all but about `leave_kib` KiB of its free space
    (less when a writer beside it takes space meanwhile: it stops there)."""
    filler = root / "filler"
    take = max(0, free_kib(root) - leave_kib)
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        block = b"\0" * 1024
        for _ in range(take):
            os.write(descriptor, block)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    finally:
        os.close(descriptor)
    return filler
