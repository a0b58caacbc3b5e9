"""hvdrun's folder for mpiexec's session files: one per launch, named for the hvdrun that made it, so
the next launch removes what a killed one left (a SIGKILL skips every clean-up)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator

PREFIX = "jhvd."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def owner_gone(name: str, prefix: str = PREFIX) -> bool:
    """True when ``name`` is a folder name ``PREFIX<pid>.*`` whose pid has ended."""
    match = re.fullmatch(re.escape(prefix) + r"(\d+)\..+", name)
    return match is not None and not _alive(int(match.group(1)))


def sweep_stale(root: str | None = None, prefix: str = PREFIX) -> list[str]:
    """Remove this user's folders ``prefix<pid>.*`` under ``root`` (default: $TMPDIR) whose process has
    ended; the paths removed."""
    removed = []
    root = root or tempfile.gettempdir()
    with os.scandir(root) as entries:
        for entry in entries:
            if not owner_gone(entry.name, prefix) or not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(entry.path)
    return removed


@contextlib.contextmanager
def session_folder() -> Iterator[str]:
    """A new session folder for this launch, removed afterwards; stale ones are swept first."""
    sweep_stale()
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}{os.getpid()}.") as folder:
        yield folder
