"""The live monitor under a %%hvd cell: an anywidget whose view is built from labextension/src/monitor.

State flows one way, kernel to browser. The scalars (rates, efficiency, health) are synced traits, so
a notebook saved with its widget state shows them again; timeline rows are sent as custom messages
as they arrive, and once the cell is over the kernel's whole retained timeline becomes a trait too.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from .monitor import Monitor

VIEW = Path(__file__).parent / "static" / "monitor.js"
REFRESH_S = 0.5  # at most this often while a cell runs: 2 updates a second, one per batch of each rank


def view_built() -> bool:
    """Whether the view bundle exists (it is built by `make setup`, i.e. `npm run build` in labextension/)."""
    return VIEW.is_file()


class MonitorWidget(anywidget.AnyWidget):
    """Per-rank throughput bars, scaling efficiency, an engine timeline and engine health for one cell."""

    _esm = VIEW
    summary = traitlets.Dict().tag(sync=True)
    health = traitlets.List().tag(sync=True)
    timeline = traitlets.Dict().tag(sync=True)

    def __init__(self, monitor: Monitor, **kwargs: Any):
        super().__init__(**kwargs)
        self.monitor = monitor
        self._sent = -1  # the monitor version the browser has seen
        self._last_refresh = 0.0
        if monitor.finished:
            self.close_cell()
        else:
            self.refresh(force=True)

    def refresh(self, force: bool = False) -> None:
        """Send what changed since the last refresh (throttled to REFRESH_S unless ``force``)."""
        now = time.monotonic()
        if not force and (now - self._last_refresh < REFRESH_S or self.monitor.version == self._sent):
            return
        self._last_refresh = now
        delta = self.monitor.delta(self._sent)
        self._sent = delta["version"]
        timeline = delta.pop("timeline")
        new_health = delta.pop("health")
        if any(r["start_us"] for r in timeline["ranks"]):
            self.send({"type": "events", "timeline": timeline})
        if new_health:
            self.health = [*self.health, *new_health]
        self.summary = delta

    def close_cell(self) -> None:
        """The cell is over: final numbers, and the retained timeline as a trait for saved notebooks."""
        self.refresh(force=True)
        self.timeline = self.monitor.state()["timeline"]

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The widget view, with the text summary as the plain-text fallback (nbconvert, consoles)."""
        data, metadata = super()._repr_mimebundle_(**kwargs)  # anywidget's: (data, metadata)
        return {**data, "text/plain": self.monitor.text_summary()}, metadata
