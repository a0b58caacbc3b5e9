"""Rank side: what makes a %%hvd cell behave on a rank as it does in a notebook kernel.

ipyparallel runs our cell wrapper as a function call, not as an IPython cell, so IPython's
execute events do not fire by themselves: matplotlib's inline backend shows a cell's figures from
``post_execute``, and other libraries hook these events too. Only the standard library is imported
here (IPython's own classes are imported where they are used).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import sys
import termios
import threading
import time
from collections.abc import Iterator
from typing import Any

INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
RESEND_S = 0.01  # a dropped interrupt is sent again this long after, once the main thread has left where it fell


def use_inline_matplotlib() -> None:
    """Draw figures with the inline backend, as a notebook kernel does, unless MPLBACKEND says otherwise:
    ``plt.show()`` and the end of a cell then display them under the cell."""
    os.environ.setdefault("MPLBACKEND", INLINE_BACKEND)


@contextlib.contextmanager
def execute_events(shell: Any, raw_cell: str) -> Iterator[None]:
    """Fire IPython's execute events around a cell as ``run_cell`` fires them: ``pre_execute`` and
    ``pre_run_cell`` before it (``%autoreload`` reloads edited modules there), ``post_execute`` and
    ``post_run_cell`` after it, also after an error (matplotlib's inline backend shows the cell's figures
    there); then show what the cell paged (``show_pages``) and let the kernel read what the cell wrote to
    fds 1 and 2 (``forward_captured_output``)."""
    from IPython.core.interactiveshell import ExecutionInfo, ExecutionResult

    info = ExecutionInfo(raw_cell, store_history=False, silent=False, shell_futures=True, cell_id=None)
    result = ExecutionResult(info)
    shell.events.trigger("pre_execute")
    shell.events.trigger("pre_run_cell", info)
    try:
        yield
    except BaseException as exc:
        result.error_in_exec = exc
        raise
    finally:
        shell.events.trigger("post_execute")
        shell.events.trigger("post_run_cell", result)
        show_pages(shell)
        forward_captured_output()


def show_pages(shell: Any) -> None:
    """Display what the cell paged (``obj?``, ``%pinfo``, ``%psource``) as the cell's output. A kernel sends
    pages with its reply, to the notebook's pager; an engine's function calls have no reply to carry them,
    so they were dropped (under ``%%px`` too) and kept in memory."""
    from IPython.display import publish_display_data

    for payload in shell.payload_manager.read_payload():
        if payload.get("source") == "page":
            publish_display_data(payload["data"])
    shell.payload_manager.clear_payload()


def forward_captured_output(limit_s: float = 0.2) -> None:
    """Wait (up to ``limit_s``) until the kernel has read what was written to fds 1 and 2 so far, so a line
    the engine or a C library wrote as the cell ended shows under this cell, not the next. ipykernel reads
    those fds through a pipe on a thread of its own (``_fid``, its read end), which may not have run yet."""
    pipes = [fid for fid in (getattr(s, "_fid", None) for s in (sys.stdout, sys.stderr)) if isinstance(fid, int)]
    deadline = time.monotonic() + limit_s
    while pipes and time.monotonic() < deadline:
        try:
            pipes = [fid for fid in pipes if _unread(fid)]
        except OSError:  # closed meanwhile
            return
        # An empty pipe may mean that thread has read the last bytes but not yet written them to the stream,
        # which needs the GIL this thread holds: a pause gives it the GIL.
        time.sleep(0.0005)


def _unread(fd: int) -> int:
    """Bytes waiting in the pipe ``fd``."""
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


def mime_bundle(shell: Any, value: Any) -> dict[str, Any]:
    """The MIME bundle the rank's IPython makes of ``value`` (HTML, images, ...), for values that cannot
    travel to the notebook themselves; empty if formatting fails."""
    try:
        data, _ = shell.display_formatter.format(value)
    except Exception:  # noqa: BLE001 - a broken _repr_*_ falls back to the plain repr
        return {}
    return data


class _InCellsOnly:
    """A SIGCHLD handler that code in a cell installed, called only while a cell runs. torch's DataLoader
    installs one that raises when a worker process fails; raised between cells, in the engine's idle event
    loop, that error ended the rank (a worker failing after its cell was interrupted, say). The loader still
    finds its failed workers itself, the next time it is used."""

    in_cell = False

    def __init__(self, handler: Any):
        self.handler = handler

    def __call__(self, signum: int, frame: Any) -> None:
        if _InCellsOnly.in_cell:
            self.handler(signum, frame)


@contextlib.contextmanager
def child_signals_in_cells_only() -> Iterator[None]:
    """Run a cell with SIGCHLD handlers live; after it, a Python handler it installed is called only in cells."""
    _InCellsOnly.in_cell = True
    try:
        yield
    finally:
        _InCellsOnly.in_cell = False
        handler = signal.getsignal(signal.SIGCHLD)
        if callable(handler) and not isinstance(handler, _InCellsOnly):
            signal.signal(signal.SIGCHLD, _InCellsOnly(handler))


@contextlib.contextmanager
def interrupts_raised() -> Iterator[None]:
    """Run a cell with SIGINT (the kernel's interrupt) raising KeyboardInterrupt, as in a notebook's kernel, and
    send it again when Python could not raise it where it landed. Python raises it in whatever the main thread
    runs, also in a finalizer or an extension's dealloc (pyzmq's, as the rank's output is sent), where it is
    printed ("Exception ignored in") and dropped: the cell ran on, and the kernel stopped the job once the
    ranks had ignored SIGINT for its grace. A moment later, out of there, the main thread gets SIGINT again
    (a real signal, so a blocking call such as ``time.sleep`` ends too)."""
    previous_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    previous_hook = sys.unraisablehook
    main = threading.main_thread().ident
    running = True

    def send_again() -> None:
        if running:
            signal.pthread_kill(main, signal.SIGINT)

    def hook(unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            previous_hook(unraisable)
            return
        timer = threading.Timer(RESEND_S, send_again)
        timer.daemon = True
        timer.start()

    sys.unraisablehook = hook
    try:
        yield
    finally:
        running = False
        sys.unraisablehook = previous_hook
        signal.signal(signal.SIGINT, previous_handler)


class ExitCalled(Exception):
    """Raised at the end of a cell that called ``exit()`` or ``quit()`` on this rank: the notebook then stops
    the job, as those end a notebook's own kernel."""


_exit_called = False


def forget_engine_options() -> None:
    """Leave the engine's own command-line options out of ``sys.argv``: a script pasted into a cell that reads
    its command line (argparse's ``parse_args()``) gets its defaults, as under hvdrun with no flags, rather than
    an error about options it never heard of (``--mpi --IPEngine.enable_nanny=False ...``)."""
    del sys.argv[1:]


def catch_exit(shell: Any) -> None:
    """Make ``exit()`` and ``quit()`` in a cell note the call (see ``exit_called``) instead of doing
    what an engine's shell does: stop its event loop a moment later, leaving a process that may live on (MPI
    finalizes at exit, beside peers that do not) without running another cell, and the next cell hanging.
    ``exit(keep_kernel=True)`` keeps the ranks, as it keeps a kernel."""

    def ask_exit() -> None:
        global _exit_called
        _exit_called = _exit_called or not shell.keepkernel_on_exit

    shell.ask_exit = ask_exit


def exit_called() -> bool:
    """Whether ``exit()`` was called since the last time this was asked."""
    global _exit_called
    called, _exit_called = _exit_called, False
    return called


def current_shell() -> Any:
    """The rank's IPython shell (ipyparallel's engine kernel), whose namespace the cells run in."""
    from IPython import get_ipython

    return get_ipython()
