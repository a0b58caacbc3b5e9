"""A %%hvd cell run with --noblock: on the ranks while the notebook does other things, its monitor fed as the
ranks report, and its end (output, failure, value) shown where it is waited for (``%hvd wait``, or the next
request to the ranks)."""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from .execution import CellRun
from .monitor_display import MonitorDisplay

FEED_S = 0.5  # the ranks send their monitor batches twice a second
STOP_WAIT_S = 5.0


@dataclass
class Submitted:
    """A cell on the ranks whose end is not shown yet, and what showing it needs."""

    run: CellRun
    number: int  # the kernel's count of %%hvd cells
    output_name: str | None  # -o NAME
    shown: int  # the rank whose value the cell shows
    quiet: bool  # the cell ends with ';'
    feeder: MonitorFeeder | None = None

    @property
    def view(self) -> MonitorDisplay | None:
        return self.run.monitor

    def stop_feeding(self) -> None:
        if self.feeder is not None:
            self.feeder.stop()
            self.feeder = None

    def running(self) -> bool:
        return not all(result.ready() for result in self.run.results)

    def describe(self) -> str:
        state = f"running for {time.monotonic() - self.run.started:.0f}s" if self.running() else "ended"
        return f"%%hvd cell {self.number} in the background ({state})"


class MonitorFeeder:
    """Feeds a background cell's monitor while nothing waits for the cell (a batch is dated by its arrival, so
    it must be taken as it comes), refreshing its widget, until the cell ends or ``stop()``."""

    def __init__(self, view: MonitorDisplay, results: list) -> None:
        self._view, self._results = view, results
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._feed, name="jupyter_hvd monitor feeder", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(STOP_WAIT_S)  # a feed takes milliseconds; a wedged front end's comm must not hang us

    def _feed(self) -> None:
        while not self._stopping.wait(FEED_S):
            ended = all(result.ready() for result in self._results)
            try:
                self._view.collect(self._results)
            except Exception:  # a widget whose front end went away: the wait shows the monitor's summary
                return
            if ended:  # its elapsed time ends now, not when someone waits, and the widget says so
                self._view.monitor.finish()
                if self._view.widget is not None:
                    self._view.widget.close_cell()
                return
