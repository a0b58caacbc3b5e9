"""Kills a job's processes when the kernel that started them dies without cleaning up.

``python reaper.py KERNEL_PID FOLDER PID...`` runs in its own session, as a plain script so that it
starts in milliseconds (it needs only psutil, not the engine). A kernel that exits normally stops
its ranks itself (atexit); one that is killed cannot, and this watcher then kills the listed
processes (the controller and mpiexec) with all their descendants, so no rank is orphaned, and
removes the job's FOLDER (its ipyparallel profile and mpiexec's session files). It exits as soon
as the listed processes are gone.
"""
import shutil
import sys
import time

import psutil

POLL_S = 1.0


def alive(process: psutil.Process) -> bool:
    """True while the process runs (a zombie counts as gone)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def descendants(process: psutil.Process) -> list[psutil.Process]:
    """All the process's children, recursively; none once it is gone."""
    try:
        return process.children(recursive=True)
    except psutil.Error:
        return []


def watch(kernel_pid: int, folder: str, pids: list[int]) -> None:
    """Wait until the kernel dies (then kill the trees under ``pids`` and remove ``folder``) or until
    ``pids`` are all gone."""
    watched = [psutil.Process(p) for p in pids if psutil.pid_exists(p)]
    try:
        kernel = psutil.Process(kernel_pid)
    except psutil.NoSuchProcess:  # it died before we started watching
        kernel = None
    while any(alive(p) for p in watched):
        if kernel is None or not alive(kernel):
            doomed = [q for p in watched for q in (p, *descendants(p))]
            for q in doomed:
                try:
                    q.kill()
                except psutil.Error:
                    pass
            psutil.wait_procs(doomed, timeout=5)
            shutil.rmtree(folder, ignore_errors=True)
            return
        time.sleep(POLL_S)


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.argv[2], [int(p) for p in sys.argv[3:]])
