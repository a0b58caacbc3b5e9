"""A %%hvd cell run with --noblock: on the ranks while the notebook does other things, its output shown under it
and its monitor fed as the ranks send them, and its end (value, failure) shown where it is waited for
(``%hvd wait``, or the next request to the ranks)."""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .cluster import HOST_SETTLE_S
from .execution import CellRun
from .monitor_display import MonitorDisplay

FEED_S = 0.1  # how often the ranks' output and monitor batches are taken
STOP_WAIT_S = HOST_SETTLE_S + 5.0  # a feed takes milliseconds, telling which hosts were lost up to HOST_SETTLE_S


@dataclass
class Submitted:
    """A cell on the ranks whose end is not shown yet, and what showing it needs."""

    run: CellRun
    number: int  # the kernel's count of %%hvd cells
    output_name: str | None  # -o NAME
    shown: int  # the rank whose value the cell shows
    quiet: bool  # the cell ends with ';'
    feeder: Feeder | None = None
    died: str = ""  # what of the job died while the cell ran, as the feeder saw it

    @property
    def view(self) -> MonitorDisplay | None:
        return self.run.monitor

    def stop_feeding(self) -> None:
        if self.feeder is not None:
            self.feeder.stop()
            self.feeder = None

    def running(self) -> bool:
        return not all(result.ready() for result in self.run.results)

    def ended(self) -> str:
        """What became of the cell, once every rank is done with it or part of the job died."""
        took = f"{time.monotonic() - self.run.started:.1f}s"
        if self.died:
            return (f"[hvd] cell {self.number} cannot finish: {self.died} ({took} into the cell). %hvd wait, or the "
                    "next request to the ranks, stops the job and says what became of it")
        failed = [rank for rank, result in enumerate(self.run.results) if not result.successful()]
        if not failed:
            return f"[hvd] cell {self.number} finished on every rank in {took}: %hvd wait shows its value"
        if self.run.why_interrupted:
            return (f"[hvd] cell {self.number} stopped after {took}: {self.run.why_interrupted}, which sent SIGINT "
                    "to its ranks: %hvd wait, or the next request to the ranks, shows where each stopped")
        what = getattr(self.run.results[failed[0]].exception(), "ename", "an error")
        return (f"[hvd] cell {self.number} failed after {took} on rank{'s' * (len(failed) > 1)} "
                f"{', '.join(map(str, failed))} ({what}): %hvd wait, or the next request to the ranks, shows why")

    def describe(self) -> str:
        state = (f"stopped: {self.died}" if self.died else
                 f"running for {time.monotonic() - self.run.started:.0f}s" if self.running() else "ended")
        return f"%%hvd cell {self.number} in the background ({state})"


def cell_outputs(shell: Any) -> list[Any]:
    """Where this kernel's output goes (stdout, stderr, displays), when each can send a thread's output under a
    cell of the thread's choice (ipykernel's ``set_thread_parent``); empty where not (a terminal, an older
    ipykernel)."""
    if getattr(shell, "kernel", None) is None:
        return []
    outputs = [sys.stdout, sys.stderr, getattr(shell, "display_pub", None)]
    return outputs if all(hasattr(out, "set_thread_parent") for out in outputs) else []


class Feeder:
    """Shows a background cell as it runs while nothing waits for it, from a thread of its own: the ranks' output
    under the cell (where ``cell_outputs`` can send it there; else it waits for the cell's end to be shown), and
    its monitor, fed and refreshed (a batch is dated by its arrival, so it must be taken as it comes); until the
    cell ends (then its last output, a line saying how it ended, and its monitor's final numbers) or
    ``stop()``."""

    def __init__(self, cell: Submitted, outputs: list[Any], parent: dict[str, Any] | None) -> None:
        self._cell, self._run, self._outputs, self._parent = cell, cell.run, outputs, parent
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._feed, name="jupyter_hvd background cell", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(STOP_WAIT_S)  # a wedged front end's comm must not hang us

    def _feed(self) -> None:
        run, view = self._run, self._run.monitor
        for out in self._outputs:  # this thread's output goes under the cell, whatever cell runs now
            out.set_thread_parent(self._parent)
        if self._outputs:
            run.output.pin(*self._outputs)
        while not self._stopping.wait(FEED_S):
            ended = all(result.ready() for result in run.results)
            died = "" if ended else run.cluster.what_died()  # the wait stops the job and says what became of it
            try:
                run.show_arrived(output=bool(self._outputs))  # else the output waits for the wait
                if died:
                    self._cell.died = (loss := run.cluster.loss()) and loss.cause or died  # which hosts were lost
                    if self._outputs:
                        print(self._cell.ended(), file=self._outputs[0], flush=True)
                elif ended:
                    if self._outputs:
                        run.finish_output()
                        print(self._cell.ended(), file=self._outputs[0], flush=True)
                    if view is not None:  # its elapsed time ends now, not when someone waits, and the widget says so
                        view.monitor.finish()
                        if view.widget is not None:
                            view.widget.close_cell()
            except Exception:  # a front end that went away: the wait shows the rest
                return
            if ended or died:
                return


class IdleInterrupt:
    """The kernel's interrupt while no cell runs (an idle notebook's stop button) interrupts the background cell,
    as it would the cell in the foreground; while a cell runs, it interrupts that cell only, as before.

    ipykernel ignores SIGINT between requests: it installs, after each, the handler it found before it
    (``Kernel.saved_sigint_handler``), which ``hold`` replaces with ``on_interrupt`` until ``release``.
    """

    def __init__(self, shell: Any, on_interrupt: Callable[[], None]) -> None:
        kernel = getattr(shell, "kernel", None)
        self._kernel = kernel if hasattr(kernel, "saved_sigint_handler") else None
        self._on_interrupt = on_interrupt
        self._idle: Any = None  # the kernel's own handler between requests, while held

    def hold(self) -> None:
        """From the next request's end on (call it while a request runs)."""
        if self._kernel is not None and self._idle is None:
            self._idle = self._kernel.saved_sigint_handler
            self._kernel.saved_sigint_handler = self._handle

    def release(self) -> None:
        """From the next request's end on, the kernel's own handler again."""
        if self._idle is not None:
            if self._kernel.saved_sigint_handler == self._handle:
                self._kernel.saved_sigint_handler = self._idle
            self._idle = None

    def _handle(self, _signum: int, _frame: Any) -> None:
        self._on_interrupt()
