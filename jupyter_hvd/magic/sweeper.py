"""The jobs' folders (``$TMPDIR/jupyter-hvd-<kernel pid>.*``) and what a job of a kernel that is gone left.

A job's reaper ends its processes and removes its folder when its kernel dies; should the reaper itself
die, or the machine stop under it, the next job on this host sweeps what is left: the processes of
every job whose kernel has ended, found by their tag, then those jobs' folders.
"""
from __future__ import annotations

import os
import tempfile

import psutil

from ..runner.session_folder import owner_gone, sweep_stale
from .reaper import TAG, alive, end

PREFIX = "jupyter-hvd-"


def new_job_folder() -> str:
    """A new folder for a job started by this process, named for it so that a later sweep knows its owner."""
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}.")


def sweep() -> list[str]:
    """End the processes of jobs whose kernel has ended and remove those jobs' folders; the folders removed."""
    orphans = []
    for process in psutil.process_iter():
        try:
            folder = process.environ().get(TAG)
        except psutil.Error:
            continue
        if folder and owner_gone(os.path.basename(folder), PREFIX) and alive(process):
            orphans.append(process)
    end(orphans)
    return sweep_stale(prefix=PREFIX)
