"""Ends a %%hvd job's processes and removes its folder when the kernel that started it dies.

``python reaper.py KERNEL_PID FOLDER`` runs in its own session, as a plain script so that it starts
in milliseconds (it needs only psutil, not the engine). The kernel starts it before anything else of
the job, so a kernel killed at any moment, start-up included, leaves nothing behind. The job's
processes are found by the tag in their environment (``JUPYTER_HVD_JOB=FOLDER``, which every process
started for the job inherits), so orphans are found too, such as the controller's heart monitor once
the controller is gone. It exits once FOLDER is gone: the kernel removes it when it stops the job.
"""
import os
import shutil
import signal
import sys
import time

import psutil

TAG = "JUPYTER_HVD_JOB"
POLL_S = 0.25
TERM_GRACE_S = 2.0  # mpiexec, given SIGTERM, ends the ranks on other hosts too; then SIGKILL


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


def tagged(folder: str) -> list[psutil.Process]:
    """The live processes of the job whose folder is ``folder`` (those of this user, which we may read)."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(TAG) == folder and alive(process):
                found.append(process)
        except psutil.Error:
            continue
    return found


def end(processes: list[psutil.Process], grace: float = TERM_GRACE_S) -> list[psutil.Process]:
    """SIGTERM, then after ``grace`` seconds SIGKILL, these processes; return those that survived both."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for p in processes:
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass
        _, processes = psutil.wait_procs(processes, timeout=wait)
        if not processes:
            break
    return [p for p in processes if alive(p)]


def clean_up(folder: str) -> None:
    """End every process of the job, including any started while ending the others, and remove its folder."""
    for _ in range(10):
        left = tagged(folder)
        if not left:
            break
        end(left)
    shutil.rmtree(folder, ignore_errors=True)


def watch(kernel_pid: int, folder: str) -> None:
    """Wait until the kernel dies (then clean up the job) or the job's folder is gone."""
    try:
        kernel = psutil.Process(kernel_pid)
    except psutil.NoSuchProcess:  # it died before we started watching
        kernel = None
    while os.path.isdir(folder):
        if kernel is None or not alive(kernel):
            clean_up(folder)
            return
        time.sleep(POLL_S)


if __name__ == "__main__":
    watch(int(sys.argv[1]), sys.argv[2])
