"""The columnar batch a rank sends to the kernel, and coarsening that keeps a batch within its bound."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._C import Phase

PHASES = tuple(p.name for p in Phase)  # the engine's timeline phases, in the order of their codes
HEALTH = frozenset({Phase.STALL.name, Phase.ABORT.name})  # never merged away: every stall and abort reaches the kernel
COLUMNS = ("phase", "name", "op", "start_us", "dur_us", "bytes", "count")
KEY_PREFIX = "hvd_monitor_"  # a batch travels as one ipyparallel data_message key: KEY_PREFIX + batch number


def empty_columns() -> dict[str, list[Any]]:
    """Event columns with no rows."""
    return {c: [] for c in COLUMNS}


def to_columns(events: Sequence[Any], bound: int) -> tuple[dict[str, list[Any]], int]:
    """Engine events as columns of at most ``bound`` rows, and how many events were merged away to fit.

    Stalls and aborts are kept as they are; the other events are merged, per phase, into equal time
    buckets spanning the batch, each row counting the events it stands for.
    """
    health = [e for e in events if e.phase in HEALTH]
    rest = [e for e in events if e.phase not in HEALTH]
    budget = max(1, bound - len(health))
    rows = [_row(e) for e in health]
    if len(rest) <= budget:
        rows += [_row(e) for e in rest]
        merged = 0
    else:
        spans = _merge(rest, budget)
        merged = len(rest) - len(spans)
        rows += spans
    rows.sort(key=lambda r: r[3])
    columns = {c: list(values) for c, values in zip(COLUMNS, zip(*rows))} if rows else empty_columns()
    return columns, merged


def _row(e: Any) -> tuple[str, str, str, int, int, int, int]:
    _, _, phase, name, op, start_us, dur_us, nbytes = e
    return phase, name, op, start_us, dur_us, nbytes, 1


def _merge(events: list[Any], budget: int) -> list[tuple[str, str, str, int, int, int, int]]:
    """Merge events into at most ``budget`` rows: one row per phase and time bucket."""
    phases = {e[2] for e in events}
    per_phase = max(1, budget // len(phases))
    first = min(e[5] for e in events)
    last = max(e[5] + e[6] for e in events)
    width = max(1, -(-(last - first + 1) // per_phase))
    buckets: dict[tuple[str, int], list[Any]] = {}
    for _, _, phase, name, op, start, dur, nbytes in events:
        key = (phase, (start - first) // width)
        b = buckets.get(key)
        if b is None:
            buckets[key] = [phase, name, op, start, start + dur, nbytes, 1]
        else:
            if start + dur > b[4]:
                b[4] = start + dur
            b[5] += nbytes
            b[6] += 1
    return [(p, n, o, s, end - s, nbytes, count) for p, n, o, s, end, nbytes, count in buckets.values()]
