"""What the kernel knows about one rank: its progress points, counters and a bounded timeline."""
from __future__ import annotations

from collections import deque
from typing import Any

from .batch import COLUMNS, HEALTH, empty_columns


class RankTrack:
    """One rank's batches merged: throughput over a sliding window, event accounting, recent events."""

    def __init__(self, rank: int, window_us: int, timeline_us: int, max_events: int):
        self.rank = rank
        self.window_us = window_us
        self.timeline_us = timeline_us
        self.points: deque[tuple[int, int]] = deque()  # (rank clock µs, cumulative samples)
        self.started_us = 0  # rank clock µs when the cell started on the rank
        self.first_step = (0, 0)  # (rank clock µs, samples) at the end of the cell's first step; 0 µs: unknown
        self.last_step_us = 0
        self.events: deque[tuple[Any, ...]] = deque(maxlen=max_events)  # (version, *COLUMNS)
        self.samples = self.steps = 0
        self.seen = self.coarsened = self.ring_dropped = self.buffer_dropped = 0
        self.batches = self.lost_batches = 0
        self.stalls = self.errors = 0
        self.behind = False
        self.monitor_cpu_s = 0.0  # CPU time the rank's publisher used (up to its previous batch)
        self.clock_offset_us: int | None = None  # kernel clock minus this rank's clock, at its smallest

    def feed(self, batch: dict[str, Any], version: int, received_us: int) -> list[tuple[Any, ...]]:
        """Merge one batch; return its stall and abort rows."""
        self.lost_batches += max(0, batch["batch"] - self.batches)
        self.batches = batch["batch"] + 1
        offset = received_us - batch["now_us"]
        self.clock_offset_us = offset if self.clock_offset_us is None else min(self.clock_offset_us, offset)
        self.samples, self.steps = batch["samples"], batch["steps"]
        self._add_point(batch["now_us"], batch["samples"])
        self.started_us = batch["started_us"]
        self.first_step = (batch["first_step_us"], batch["first_step_samples"])
        self.last_step_us = batch["last_step_us"]
        self.coarsened += batch["coarsened"]
        self.ring_dropped += batch["ring_dropped"]
        self.behind = batch["behind"]
        self.stalls, self.errors = batch["stalls"], batch["errors"]
        self.monitor_cpu_s = batch["cpu_s"]
        columns = batch["events"]
        rows = list(zip(*(columns[c] for c in COLUMNS)))
        self.seen += sum(columns["count"])
        self._add_events(rows, version)
        return [r for r in rows if r[0] in HEALTH]

    def rate(self) -> float:
        """Samples per second over the last window (0 when the rank has not stepped in it)."""
        if len(self.points) < 2:
            return 0.0
        (t0, s0), (t1, s1) = self.points[0], self.points[-1]
        return (s1 - s0) * 1e6 / (t1 - t0) if t1 > t0 else 0.0

    def mean_rate(self) -> float | None:
        """Samples per second from the end of the cell's first step to the end of its last, or over the
        cell's only step (from the cell's start); None before any step."""
        (first_us, first_samples), last_us = self.first_step, self.last_step_us
        if self.steps >= 2 and first_us and last_us > first_us:
            return (self.samples - first_samples) * 1e6 / (last_us - first_us)
        if self.steps >= 1 and last_us > self.started_us:
            return self.samples * 1e6 / (last_us - self.started_us)
        return None

    def timeline(self, since_version: int = -1) -> dict[str, list[Any]]:
        """Buffered events that arrived after ``since_version``, as columns."""
        rows = [r[1:] for r in self.events if r[0] > since_version]
        return {c: list(values) for c, values in zip(COLUMNS, zip(*rows))} if rows else empty_columns()

    def _add_point(self, now_us: int, samples: int) -> None:
        self.points.append((now_us, samples))
        while len(self.points) > 2 and self.points[1][0] <= now_us - self.window_us:
            self.points.popleft()

    def _add_events(self, rows: list[tuple[Any, ...]], version: int) -> None:
        if not rows:
            return
        newest = max(r[3] + r[4] for r in rows)
        while self.events and self.events[0][4] + self.events[0][5] < newest - self.timeline_us:
            self.events.popleft()  # older than the timeline's span: expired, not dropped
        room = self.events.maxlen - len(self.events)
        self.buffer_dropped += max(0, len(rows) - room)
        self.events.extend((version, *r) for r in rows)
