"""Running hvdrun jobs on the namespace hosts from head, and looking at what they leave and listen on."""
from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time

import psutil
from cluster_info import REPO, ClusterInfo
from hvdrun_cli import hvdrun_argv
from listening import tree
from multirank import failure_text

JOB_TIMEOUT_S = 240

# A rank script that warms up, says "ready", and holds rank 0 (and so every rank, at the last allreduce) until a
# line arrives on its stdin: the job stays up while a test looks at it, then ends cleanly.
WAITING_RANK = (
    "import sys, numpy as np, jupyter_hvd as hvd\n"
    "hvd.init()\n"
    "hvd.allreduce(np.ones(1 << 16, np.float32), name='warm')\n"
    "print('ready', hvd.rank(), flush=True)\n"
    "if hvd.rank() == 0:\n"
    "    sys.stdin.readline()\n"
    "hvd.allreduce(np.ones(1), name='done')\n"
)


def end_waiting_job(proc: subprocess.Popen, output: "JobOutput") -> None:
    """Let a job of WAITING_RANK ranks finish (rank 0 reads its line) and check that it ended cleanly."""
    proc.stdin.write("end\n")
    proc.stdin.flush()
    assert proc.wait(timeout=60) == 0, output.text()


def kill_if_running(proc: subprocess.Popen) -> None:
    """Kill a launcher a failed test left running."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def run_job(cluster: ClusterInfo, *args: str, config: str = "config", timeout: float = JOB_TIMEOUT_S,
            **env: str) -> subprocess.CompletedProcess:
    """Run hvdrun ARGS on head to completion (output and errors together in stdout)."""
    try:
        return subprocess.run(hvdrun_argv(*args), env=cluster.env(config, **env), cwd=REPO, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"hvdrun {' '.join(args)} hung for {timeout} s:\n{exc.stdout}") from None


def rank_tests(cluster: ClusterInfo, hosts: str, *modules: str, flags: tuple[str, ...] = (),
               select: tuple[str, ...] = (), **env: str) -> str:
    """Run pytest modules of tests/ranks (and pytest options ``select``) on every rank of a job placed by
    ``hosts`` ("h1:2,h2:2" for -H, or a hostfile path with the layout in env JHVD_EXPECT_HOSTS); every rank
    must pass them."""
    expect = env.pop("JHVD_EXPECT_HOSTS", hosts)
    place = ["-H", hosts] if ":" in hosts else ["--hostfile", hosts]
    np_ = sum(int(item.split(":")[1]) for item in expect.split(","))
    result = run_job(cluster, "-np", str(np_), *place, *flags, "-x", "JHVD_EXPECT_HOSTS", sys.executable, "-m",
                     "pytest", "-q", "-x", "--color=no", "-p", "no:cacheprovider", *select,
                     *(f"tests/ranks/{m}" for m in modules), JHVD_EXPECT_HOSTS=expect, **env)
    assert result.returncode == 0, failure_text(result.stdout)
    assert result.stdout.count(" passed") >= np_, failure_text(result.stdout, 4000)
    return result.stdout


def job_processes(cluster: ClusterInfo, launcher: psutil.Process) -> list[psutil.Process]:
    """The processes of a running job on every host: the launcher's tree on head, the daemons' trees elsewhere."""
    found = tree(launcher)
    for host in cluster.hosts:
        for process in host.processes():
            try:
                if process.name() == "prted":
                    found += tree(process)
            except psutil.Error:
                continue
    return found


class JobOutput:
    """A running job's combined output, read by a thread, so that a test can wait for lines with a deadline."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line)
        self._queue.put(None)

    def wait_for(self, prefix: str, count: int, timeout: float) -> list[str]:
        """The first ``count`` lines that start with ``prefix``; AssertionError with the output at the deadline
        or if the output ends first."""
        deadline = time.monotonic() + timeout
        while len(found := [line for line in self.lines if line.startswith(prefix)]) < count:
            try:
                line = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {count} '{prefix}' lines within {timeout:g} s:\n{self.text()}") from None
            if line is None:
                raise AssertionError(f"the job ended before {count} '{prefix}' lines:\n{self.text()}")
            self.lines.append(line)
        return found[:count]

    def text(self) -> str:
        """Everything read so far, and what is left once the job has ended."""
        while not self._queue.empty():
            line = self._queue.get_nowait()
            if line is not None:
                self.lines.append(line)
        return "".join(self.lines)[-6000:]
