"""The engine's timeline: a Chrome trace file on demand, and cheap draining of recent events."""
import os
from typing import NamedTuple

from . import _C


class Event(NamedTuple):
    """One engine phase on one rank (times in microseconds of the host's monotonic clock)."""

    seq: int
    rank: int
    phase: str
    name: str
    op: str
    start_us: int
    dur_us: int
    bytes: int


def start_timeline(file_path: str, mark_cycles: bool = False) -> None:
    """Write every rank's events to ``file_path`` (rank 0 writes; call on all ranks). ``mark_cycles``
    adds a CYCLE mark for each engine cycle that ran collectives, on every rank, until stop_timeline()."""
    _C.start_timeline(os.path.abspath(file_path), bool(mark_cycles))


def stop_timeline() -> None:
    """Close the timeline file; it stays valid JSON throughout."""
    _C.stop_timeline()


def drain_events(since: int = 0, max_events: int = 100000) -> tuple[list, int]:
    """This rank's events with seq >= ``since`` and how many were overwritten before being read."""
    events, dropped = _C.drain_events(since, max_events)
    return [Event(*e) for e in events], dropped
