"""Run one %%hvd cell on every rank and come back no matter what: errors, deaths, timeouts, interrupts."""
from __future__ import annotations

import signal
import time
from typing import Any

from ipyparallel.error import EngineError

from .cluster import RankCluster, wait_a_little
from .failures import RankError, describe_failure, exit_report
from .monitor_display import MonitorDisplay
from .notebook_place import notebook_place
from .output import RankOutput
from .rank_cell import run_cell
from .rank_messages import OUTPUT_WAIT_S, io_held
from .remote_repr import arrived

FAILURE_GRACE_S = 5.0  # peers of a failed rank get this long to finish (they should see the abort)
TIMEOUT_GRACE_S = 2.0  # the rank-side deadline fires first; the kernel steps in after this grace
INTERRUPT_GRACE_S = 5.0  # ranks get this long to stop after SIGINT before the job is stopped


class CellRun:
    """One cell on all ranks: submits it, relays output, and escalates until every rank is done."""

    def __init__(self, cluster: RankCluster, code: str, cell_id: int, reinit: bool, timeout: float | None,
                 only_rank: int | None = None, value_ranks: list[int] | None = None,
                 monitor: MonitorDisplay | None = None, all_displays: bool = False):
        self.cluster = cluster
        self.monitor = monitor
        self.timeout = timeout
        self.output = RankOutput(len(cluster.ranks), only_rank, all_displays)
        with io_held(cluster.io_loop):  # a cell that ends at once still has its output in order
            self.results = cluster.submit(run_cell, code, cell_id, reinit, timeout, value_ranks, monitor is not None,
                                          notebook_place())
            self.output.listen(self.results, cluster.between_cells)
        self.started = time.monotonic()
        self.failed_order: list[int] = []  # ranks in the order their failure was seen
        self.first_failure_at: float | None = None
        self.interrupted_at: float | None = None  # when the kernel sent SIGINT to the ranks
        self.why_interrupted = ""
        self.signalled: list[int] = []
        self._output_finished = False

    def wait(self) -> list[Any]:
        """Return each rank's value of the cell's last expression (None where not asked for), or raise RankError."""
        with _Interrupts() as interrupts:
            handled = 0
            while not all(r.ready() for r in self.results):
                try:
                    self._step()
                except KeyboardInterrupt:  # where no counting handler could be installed
                    interrupts.count += 1
                while handled < interrupts.count:
                    handled += 1
                    if self.interrupted_at is not None:  # a second interrupt: stop waiting for the ranks
                        self._give_up("interrupted twice")
                    self.interrupt("the kernel was interrupted")
        self.finish_output()
        errors = {rank: r.exception() for rank, r in enumerate(self.results) if r.exception() is not None}
        if any(isinstance(e, EngineError) for e in errors.values()):
            self.cluster.raise_if_dead()
        if errors:
            order = self.failed_order + [rank for rank in errors if rank not in self.failed_order]
            if (exited := exit_report(errors, order)) is not None:
                self.cluster.stop()
                raise exited
            note = self.why_interrupted and f"{self.why_interrupted}: sent SIGINT to ranks {_ranks(self.signalled)}"
            raise describe_failure(errors, order, note)
        if self.why_interrupted:  # the ranks finished anyway
            raise RankError(f"{self.why_interrupted}; the ranks had finished the cell")
        return [arrived(r.get()) for r in self.results]

    def show_arrived(self, output: bool = True) -> None:
        """Show what the ranks sent since the last call: their output (unless ``output`` is False) and their
        monitor batches."""
        if output:
            self.output.poll(self.results)
        if self.monitor is not None:
            self.monitor.collect(self.results)

    def _step(self) -> None:
        self.show_arrived()
        if self.cluster.what_died():
            self.output.flush()
            self.cluster.raise_if_dead()
        now = time.monotonic()
        for rank, result in enumerate(self.results):
            if rank not in self.failed_order and result.ready() and not result.successful():
                self.failed_order.append(rank)
                self.first_failure_at = self.first_failure_at or now
        if self.interrupted_at is None:
            if self.timeout is not None and now > self.started + self.timeout + TIMEOUT_GRACE_S:
                self.interrupt(f"the cell exceeded --timeout {self.timeout:g}s")
            elif self.first_failure_at is not None and now > self.first_failure_at + FAILURE_GRACE_S:
                self.interrupt(f"ranks still running {FAILURE_GRACE_S:g}s after rank {self.failed_order[0]} failed")
        elif now > self.interrupted_at + INTERRUPT_GRACE_S:
            self._give_up(f"{self.why_interrupted}, and ranks ignored SIGINT for {INTERRUPT_GRACE_S:g}s")
        wait_a_little(self.results)

    def interrupt(self, why: str) -> None:
        """Send SIGINT to the ranks still running the cell (escalated in ``wait``: a failure, stop after
        INTERRUPT_GRACE_S); those that have finished it are idle, and are not said to be signalled."""
        running = [rank for rank, r in enumerate(self.results) if not r.ready()]
        self.signalled = self.cluster.signal_ranks(signal.SIGINT, running)
        self.interrupted_at = time.monotonic()
        self.why_interrupted = why

    def _give_up(self, why: str) -> None:
        running = [rank for rank, r in enumerate(self.results) if not r.ready()]
        self.finish_output()
        self.cluster.stop()
        raise RankError(
            f"{why}: ranks {_ranks(running)} did not finish, so the job was stopped; "
            "the next %%hvd cell starts new ranks.",
            tuple(running),
        )

    def finish_output(self) -> None:
        """Show the output that trails the ranks' results, and what is left of unfinished lines; once."""
        if self._output_finished:
            return
        self._output_finished = True
        deadline = time.monotonic() + OUTPUT_WAIT_S
        for result in self.results:
            if result.ready():
                result.wait_for_output(max(0.0, deadline - time.monotonic()))
        self.output.poll(self.results)
        self.output.flush()
        if self.monitor is not None:
            self.monitor.collect(self.results)


class _Interrupts:
    """Counts SIGINTs (the kernel's interrupt) while a cell runs, in a handler that only counts.

    The default handler raises KeyboardInterrupt wherever the main thread is, and one raised inside a
    finalizer that happens to run then is printed and dropped: the interrupt would be lost. A count is
    not. Outside the main thread no handler can be set, and KeyboardInterrupt is counted instead.
    """

    def __init__(self) -> None:
        self.count = 0
        self._previous: Any = None

    def __enter__(self) -> _Interrupts:
        try:
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
        except ValueError:  # not the main thread
            self._previous = None
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)

    def _on_sigint(self, _signum: int, _frame: object) -> None:
        self.count += 1


def _ranks(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks)) or "none"
