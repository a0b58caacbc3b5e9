"""Rank side of the monitor: a thread that sends this rank's progress and engine events to the kernel.

Transport: ipyparallel's data_message (``ZMQDataPublisher.publish_data``), the same IOPub path that
carries a rank's stdout to the notebook. It needs no extra socket, so it works wherever the ranks
work (other hosts, behind the controller's forwarder), and the client files each message under the
running cell's AsyncResult (``metadata['data']``) in order. Each batch goes out under its own key
(``hvd_monitor_<n>``) so the client's dict update never overwrites an unread batch; the kernel pops
the keys it has read. A ZMQ PUB socket of our own would need the kernel's address to be reachable
from every rank and drops silently at its high-water mark. A batch is only sent while a cell runs,
since the client discards IOPub messages whose parent request it does not know.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .batch import KEY_PREFIX, to_columns
from .samples import counted_since, snapshot

# Two batches a second: each costs the rank, the controller relaying it and the kernel about as much
# whatever its size, so fewer, larger batches keep the monitor's share of the CPU low (see
# benchmarks/monitor_overhead.py).
INTERVAL_S = 0.5
# Engine events read per batch: each event read costs the rank's CPU (and GIL), so the cap bounds the monitor's
# share of a core (benchmarks/monitor_overhead.py measures it). A rank that emits more falls behind, and its
# ring's overwrites are counted.
MAX_DRAIN = 2048
MAX_EVENTS = 1024  # rows per batch; more events are merged (counted in the batch's "coarsened")
SKIP_CHUNK = 65536  # events read at once when skipping or at the end of a cell (the ring's default size)


class Publisher:
    """Every ``interval`` seconds, sends one batch: progress counters, new engine events, engine health."""

    def __init__(self, rank: int, send: Callable[[dict[str, Any]], None], drain: Callable[..., Any],
                 metrics: Callable[[], dict[str, Any]], since: int = 0, interval: float = INTERVAL_S,
                 max_drain: int = MAX_DRAIN, max_events: int = MAX_EVENTS):
        self.rank = rank
        self.since = since
        self.interval = interval
        self.max_drain = max_drain
        self.max_events = max_events
        self._send = send
        self._drain = drain
        self._metrics = metrics
        self._batch = 0
        self._cpu_s = 0.0  # CPU time this publisher has used so far, sent in each batch: the monitor's own cost
        self._origin = snapshot()
        self._started_us = time.monotonic_ns() // 1000
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the thread and the final flush from stop() never publish at once
        self._thread = threading.Thread(target=self._run, name="jupyter-hvd-monitor", daemon=True)

    def start(self) -> Publisher:
        """Skip events from before this cell and start publishing."""
        while self._events(SKIP_CHUNK)[0]:
            pass
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and send what is left, every unread event included, so the kernel has the whole cell."""
        self._stop.set()
        self._thread.join(timeout=2 * self.interval + 1)
        self.publish(SKIP_CHUNK)

    def publish(self, max_drain: int | None = None) -> None:
        """Build and send one batch."""
        with self._lock:
            began = time.thread_time()
            self._send({f"{KEY_PREFIX}{self._batch}": self.batch(max_drain)})
            self._cpu_s += time.thread_time() - began

    def batch(self, max_drain: int | None = None) -> dict[str, Any]:
        """The next batch: cumulative samples and steps since start, new engine events (bounded), health."""
        limit = max_drain or self.max_drain
        events, ring_dropped = self._events(limit)
        columns, coarsened = to_columns(events, self.max_events)
        counted = counted_since(self._origin)
        try:
            metrics = self._metrics()
        except ValueError:  # the engine is not initialised
            metrics = {}
        batch = {
            "rank": self.rank,
            "batch": self._batch,
            "now_us": time.monotonic_ns() // 1000,
            "started_us": self._started_us,
            "samples": counted.samples,
            "steps": counted.steps,
            "first_step_us": counted.first_us,
            "first_step_samples": counted.first_samples,
            "last_step_us": counted.last_us,
            "events": columns,
            "ring_dropped": ring_dropped,
            "coarsened": coarsened,
            "behind": len(events) == limit,
            "stalls": metrics.get("stalls", 0),
            "errors": metrics.get("errors", 0),
            "cpu_s": self._cpu_s,
        }
        self._batch += 1
        return batch

    def _events(self, limit: int) -> tuple[list[Any], int]:
        """Up to ``limit`` engine events after the last ones read, and how many the ring overwrote unread."""
        try:
            events, dropped = self._drain(self.since, limit)
            if not events and self.since and not self._drain(self.since - 1, 1)[0]:
                self.since = 0  # the engine was restarted, and its sequence with it
                events, dropped = self._drain(0, limit)
        except ValueError:  # the engine is not initialised; a new one starts its sequence at 0
            self.since = 0
            return [], 0
        self.since = events[-1].seq + 1 if events else self.since + dropped
        return events, dropped

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.publish()


class _RankState:
    """The publisher of the running cell and the event sequence reached, kept between cells."""

    publisher: Publisher | None = None
    since = 0


def start_publisher(rank: int) -> None:
    """Start publishing this rank's progress and engine events to the kernel for the running cell."""
    import jupyter_hvd
    from IPython import get_ipython

    stop_publisher()
    data_pub = get_ipython().data_pub
    _RankState.publisher = Publisher(rank, data_pub.publish_data, jupyter_hvd.drain_events, jupyter_hvd.metrics,
                                     since=_RankState.since).start()


def stop_publisher() -> None:
    """Stop the running cell's publisher after sending its last batch."""
    publisher, _RankState.publisher = _RankState.publisher, None
    if publisher is not None:
        publisher.stop()
        _RankState.since = publisher.since
