"""The training loop's progress counters: called once per step, so they must stay cheap.

Two counters: the loop's own ``monitor_step`` calls, and the steps DistributedTrainer counts for
itself. A cell is measured by the loop's calls when it made any, else by the trainer's, so a loop
that calls ``hvd.monitor.step`` beside a DistributedTrainer is not counted twice.

Each counter also remembers its first step after the latest ``snapshot()``: a cell's mean rate is
measured from the end of its first step to the end of its last, so even a cell shorter than one
publishing interval has one.
"""
from __future__ import annotations

import time
from typing import NamedTuple

# (samples, steps, µs of the last step, mark, µs of the first step since that mark, samples up to it);
# each counter is replaced as a whole, so a reader never sees a torn update.
Progress = tuple[int, int, int, int, int, int]
_mark = 0  # bumped by snapshot(): a counter whose mark differs has not stepped since
_explicit: Progress = (0, 0, 0, 0, 0, 0)
_trainer: Progress = (0, 0, 0, 0, 0, 0)


class Counted(NamedTuple):
    """What one rank counted since a snapshot: totals, and the ends of its first and last step."""

    samples: int
    steps: int
    last_us: int  # monotonic µs at the end of the last step (0: no step)
    first_us: int  # monotonic µs at the end of the first step (0: no step, or a later snapshot was taken)
    first_samples: int  # samples counted by the first step


def _advanced(counter: Progress, samples: int) -> Progress:
    total, now = counter[0] + samples, time.monotonic_ns() // 1000
    if counter[3] != _mark:
        return total, counter[1] + 1, now, _mark, now, total
    return total, counter[1] + 1, now, _mark, counter[4], counter[5]


def monitor_step(samples: int) -> None:
    """Count ``samples`` processed by one training step on this rank (call once per step)."""
    global _explicit
    _explicit = _advanced(_explicit, samples)


def trainer_step(samples: int) -> None:
    """DistributedTrainer's own count of one step's ``samples``; the loop's monitor_step calls take precedence."""
    global _trainer
    _trainer = _advanced(_trainer, samples)


def snapshot() -> tuple[int, Progress, Progress]:
    """Start a new mark and return both counters now: the origin that ``counted_since`` measures from."""
    global _mark
    _mark += 1
    return _mark, _explicit, _trainer


def counted_since(origin: tuple[int, Progress, Progress]) -> Counted:
    """What this rank counted since ``origin``: the loop's own calls when it made any, else
    DistributedTrainer's; all zero when neither counted."""
    mark = origin[0]
    for now, then in zip((_explicit, _trainer), origin[1:]):
        if now[1] > then[1]:
            first_us, first_total = (now[4], now[5]) if now[3] == mark else (0, then[0])
            return Counted(now[0] - then[0], now[1] - then[1], now[2], first_us, first_total - then[0])
    return Counted(0, 0, 0, 0, 0)
