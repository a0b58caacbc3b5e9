"""Run a child process in the foreground: signals reach it, a lingering one is killed, exit codes kept."""

from __future__ import annotations

import ctypes
import signal
import subprocess
import time
from collections.abc import Callable

FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
KILL_AFTER_S = 10.0
POLL_S = 0.1
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(signum: int) -> Callable[[], None]:
    """A preexec_fn for a child that gets ``signum`` when this process dies, even by SIGKILL, so nothing it
    started outlives it. The C library is loaded here, before the fork: the child only makes the call, and
    takes no lock that another thread of this process (a kernel's) may have held at the fork."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(PR_SET_PDEATHSIG, signum)


class SignalForwarder:
    """Pass SIGINT, SIGTERM and SIGHUP on to a child; kill it if it lingers after one."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.deadline: float | None = None
        self.received: int | None = None  # the first signal passed on
        self._previous: dict[int, object] = {}

    def __enter__(self) -> SignalForwarder:
        for signum in FORWARDED_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._forward)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _forward(self, signum: int, _frame: object) -> None:
        """Relay signum to the child and start the grace period before a hard kill."""
        self.proc.send_signal(signum)
        self.received = self.received or signum
        if self.deadline is None:
            self.deadline = time.monotonic() + KILL_AFTER_S

    def wait(self) -> int:
        """Wait for the child, killing it once the grace period after a forwarded signal ends."""
        while True:
            try:
                return self.proc.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    self.proc.kill()


def wait_relaying(proc: subprocess.Popen) -> int:
    """Wait for proc, relaying signals; its exit code, or 128+signum if a signal killed it."""
    with SignalForwarder(proc) as forwarder:
        code = forwarder.wait()
    return code if code >= 0 else 128 - code
