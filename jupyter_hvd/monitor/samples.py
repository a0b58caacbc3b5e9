"""The training loop's progress counters: called once per step, so they must stay cheap.

Two counters: the loop's own ``monitor_step`` calls, and the steps DistributedTrainer counts for
itself. A cell is measured by the loop's calls when it made any, else by the trainer's, so a loop
that calls ``hvd.monitor.step`` beside a DistributedTrainer is not counted twice.
"""
from __future__ import annotations

import time

# (samples, steps, monotonic µs of the last step); each counter is replaced as a whole, so a reader
# never sees a torn update.
Progress = tuple[int, int, int]
_explicit: Progress = (0, 0, 0)
_trainer: Progress = (0, 0, 0)


def _advanced(counter: Progress, samples: int) -> Progress:
    return counter[0] + samples, counter[1] + 1, time.monotonic_ns() // 1000


def monitor_step(samples: int) -> None:
    """Count ``samples`` processed by one training step on this rank (call once per step)."""
    global _explicit
    _explicit = _advanced(_explicit, samples)


def trainer_step(samples: int) -> None:
    """DistributedTrainer's own count of one step's ``samples``; the loop's monitor_step calls take precedence."""
    global _trainer
    _trainer = _advanced(_trainer, samples)


def snapshot() -> tuple[Progress, Progress]:
    """Both counters now: the origin that ``counted_since`` measures from."""
    return _explicit, _trainer


def counted_since(origin: tuple[Progress, Progress]) -> Progress:
    """Samples and steps counted on this rank since ``origin``, and when the last of those steps ended.

    The loop's own calls when it made any since then, else DistributedTrainer's; (0, 0, 0) when neither counted.
    """
    for now, then in zip(snapshot(), origin):
        if now[1] > then[1]:
            return now[0] - then[0], now[1] - then[1], now[2]
    return 0, 0, 0
