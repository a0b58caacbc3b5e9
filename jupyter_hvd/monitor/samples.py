"""The training loop's progress counter: ``monitor_step`` is called once per step and must stay cheap."""
from __future__ import annotations

import time

# (samples, steps, monotonic µs of the last step), replaced as a whole so a reader never sees a torn update.
_progress: tuple[int, int, int] = (0, 0, 0)


def monitor_step(samples: int) -> None:
    """Count ``samples`` processed by one training step on this rank (call once per step)."""
    global _progress
    total, steps, _ = _progress
    _progress = (total + samples, steps + 1, time.monotonic_ns() // 1000)


def progress() -> tuple[int, int, int]:
    """Samples and steps counted so far on this rank, and when the last step ended (monotonic µs)."""
    return _progress
