"""Where the notebook is, carried to the ranks with each cell: its working directory and its import path.

A notebook that runs ``sys.path.insert(0, "../src")`` or ``%cd data`` expects the next cell to import and
open files from there, and a ``%%hvd`` cell is a cell of that notebook. Each cell's ranks add the import
path entries the notebook has and they lack (in the notebook's order), and move to the notebook's working
directory when the notebook moved since their last cell. A rank's own ``os.chdir`` or ``sys.path`` edit
stays as long as the notebook does not move or add the same entry.
"""
from __future__ import annotations

import os
import sys
import warnings
from typing import NamedTuple


class NotebookPlace(NamedTuple):
    cwd: str | None  # None when the notebook's directory was removed
    path: tuple[str, ...]  # the notebook's sys.path, relative entries made absolute against cwd


def notebook_place() -> NotebookPlace:
    """The kernel's working directory and import path, now."""
    entries = [entry for entry in sys.path if isinstance(entry, str) and entry]
    try:
        cwd = os.getcwd()
    except OSError:  # the directory was removed under the notebook: its relative entries lead nowhere
        return NotebookPlace(None, tuple(entry for entry in entries if os.path.isabs(entry)))
    return NotebookPlace(cwd, tuple(entry if os.path.isabs(entry) else os.path.normpath(os.path.join(cwd, entry))
                                    for entry in entries))


_last_cwd: str | None = None  # the notebook's directory at this rank's last cell


def follow_notebook(place: NotebookPlace) -> None:
    """On a rank: take the notebook's new import path entries and, if the notebook moved, its directory."""
    global _last_cwd
    add_missing_entries(sys.path, place.path)
    if place.cwd is None:
        return
    moved = _last_cwd is not None and place.cwd != _last_cwd
    _last_cwd = place.cwd
    if not moved or _current_directory() == place.cwd:
        return
    try:
        os.chdir(place.cwd)
    except OSError as exc:  # another host may lack the directory
        warnings.warn(f"the notebook moved to {place.cwd}, which this rank cannot enter ({exc.strerror}); "
                      f"it stays where it is", RuntimeWarning, stacklevel=1)


def _current_directory() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # removed under the rank
        return None


def add_missing_entries(path: list[str], wanted: tuple[str, ...]) -> None:
    """Insert the entries of wanted that path lacks, each just before the next wanted entry path has (or at
    the end), so that the entries keep the notebook's order among themselves and against shared ones."""
    have = set(path)
    pending: list[str] = []
    for entry in dict.fromkeys(wanted):
        if entry not in have:
            pending.append(entry)
            continue
        if pending:
            at = path.index(entry)
            path[at:at] = pending
            pending = []
    path.extend(pending)
