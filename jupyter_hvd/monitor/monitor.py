"""Kernel side of the monitor: merges every rank's batches into one JSON-able state a widget can mirror."""
from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Sequence
from typing import Any

from .batch import COLUMNS, HEALTH, KEY_PREFIX, PHASES
from .rank_track import RankTrack

WINDOW_S = 2.0
TIMELINE_S = 30.0
MAX_TIMELINE_EVENTS = 5000  # per rank
MAX_HEALTH = 200
STRAGGLER_FRACTION = 0.8


def cell_key(source: str) -> str:
    """Identify a cell by its text, for finding its single-rank baseline."""
    return hashlib.sha1(source.strip().encode()).hexdigest()[:16]


def stragglers(rates: Sequence[float | None], fraction: float = STRAGGLER_FRACTION) -> list[int]:
    """Ranks whose rate is below ``fraction`` of the median rate (none when there is no positive median)."""
    known = [r for r in rates if r is not None]
    if len(known) < 2:
        return []
    median = statistics.median(known)
    return [rank for rank, r in enumerate(rates) if r is not None and median > 0 and r < fraction * median]


class Monitor:
    """Per-rank throughput, scaling efficiency, engine timeline and health of one %%hvd cell."""

    def __init__(self, ranks: int, key: str = "", window_s: float = WINDOW_S, timeline_s: float = TIMELINE_S,
                 max_events: int = MAX_TIMELINE_EVENTS):
        self.key = key
        self.window_s = window_s
        self.timeline_s = timeline_s
        self.version = 0
        self.baseline: float | None = None
        self.baseline_source = ""
        self.health: list[dict[str, Any]] = []
        self.health_omitted = 0
        self._health_versions: list[int] = []
        self._started = time.monotonic()
        self._finished: float | None = None
        self.error = ""  # why the cell failed, when it did
        self.failed_rank: int | None = None
        self.ranks = [RankTrack(r, int(window_s * 1e6), int(timeline_s * 1e6), max_events) for r in range(ranks)]

    def set_baseline(self, samples_per_s: float, source: str = "set_baseline") -> None:
        """Use ``samples_per_s`` on one rank as the reference for scaling efficiency; ``source`` says where from."""
        if samples_per_s <= 0:
            raise ValueError(f"a baseline must be positive, got {samples_per_s:g}")
        self.baseline, self.baseline_source = float(samples_per_s), source
        self.version += 1

    def feed(self, batch: dict[str, Any]) -> None:
        """Merge one batch from a rank's publisher."""
        self.version += 1
        track = self.ranks[batch["rank"]]
        for row in track.feed(batch, self.version, time.monotonic_ns() // 1000):
            if len(self.health) >= MAX_HEALTH:
                self.health_omitted += 1
                continue
            phase, name, _, start_us, *_ = row
            self.health.append({"rank": track.rank, "kind": phase.lower(), "at_us": start_us, "message": name})
            self._health_versions.append(self.version)

    def collect(self, results: Sequence[Any]) -> int:
        """Feed the batches waiting in the cell's per-rank AsyncResults (taking them out); return how many."""
        fed = 0
        for result in results:
            data = result.metadata.get("data") or {}
            keys = sorted((k for k in list(data) if k.startswith(KEY_PREFIX)), key=lambda k: int(k[len(KEY_PREFIX):]))
            for k in keys:
                self.feed(data.pop(k))
                fed += 1
        return fed

    def finish(self, error: str = "", failed_rank: int | None = None) -> None:
        """Mark the cell as over (failed when ``error`` says why): the elapsed time stops, rates become means."""
        self._finished = self._finished or time.monotonic()
        if error and not self.error:
            self.error, self.failed_rank = error, failed_rank
            self.version += 1

    @property
    def run_state(self) -> str:
        """running, finished or failed."""
        return "failed" if self.error else "finished" if self.finished else "running"

    @property
    def finished(self) -> bool:
        """Whether the cell is over."""
        return self._finished is not None

    def rates(self) -> list[float]:
        """Per-rank samples/s over the sliding window."""
        return [t.rate() for t in self.ranks]

    def mean_rates(self) -> list[float | None]:
        """Per-rank samples/s between each rank's first and last step."""
        return [t.mean_rate() for t in self.ranks]

    def measured_rate(self) -> float | None:
        """The cell's total mean samples/s, or None when any rank has too few steps to tell."""
        rates = self.mean_rates()
        return sum(rates) if rates and all(r is not None for r in rates) else None

    def efficiency(self, total: float | None) -> float | None:
        """total / (ranks x single-rank baseline), when there is a baseline."""
        if total is None or not self.baseline:
            return None
        return total / (len(self.ranks) * self.baseline)

    def trained(self) -> bool:
        """Whether any rank reported samples or the engine reported stalls or aborts."""
        return any(t.samples for t in self.ranks) or bool(self.health) or any(t.stalls for t in self.ranks)

    def state(self) -> dict[str, Any]:
        """Everything, as plain JSON-able data: a widget model's initial value."""
        return self.delta(-1)

    def delta(self, since_version: int) -> dict[str, Any]:
        """Current scalars, plus the timeline rows and health entries added after ``since_version``."""
        live = self.rates()
        means = self.mean_rates()
        shown = [m if self.finished else r for r, m in zip(live, means)]
        total = sum(live)
        mean_total = self.measured_rate()
        slow = set(stragglers(shown))
        ranks = [
            {
                "rank": t.rank, "samples": t.samples, "steps": t.steps, "samples_per_s": live[t.rank],
                "mean_samples_per_s": means[t.rank], "straggler": t.rank in slow, "events": t.seen,
                "coarsened": t.coarsened, "ring_dropped": t.ring_dropped, "buffer_dropped": t.buffer_dropped,
                "lost_batches": t.lost_batches, "behind": t.behind, "stalls": t.stalls, "errors": t.errors,
                "clock_offset_us": t.clock_offset_us, "monitor_cpu_s": t.monitor_cpu_s,
            }
            for t in self.ranks
        ]
        first_health = next((i for i, v in enumerate(self._health_versions) if v > since_version), len(self.health))
        return {
            "version": self.version,
            "since_version": since_version,
            "cell": self.key,
            "finished": self.finished,
            "state": self.run_state,
            "failed_rank": self.failed_rank,
            "error": self.error,
            "elapsed_s": (self._finished or time.monotonic()) - self._started,
            "window_s": self.window_s,
            "timeline_s": self.timeline_s,
            "ranks": ranks,
            "total_samples_per_s": total,
            "mean_total_samples_per_s": mean_total,
            "efficiency": self.efficiency(mean_total if self.finished else total),
            "baseline": None if self.baseline is None else {"samples_per_s": self.baseline,
                                                             "source": self.baseline_source},
            "stragglers": sorted(slow),
            "health": self.health[first_health:],
            "health_omitted": self.health_omitted,
            "timeline": {"phases": list(PHASES), "health_phases": sorted(HEALTH), "columns": list(COLUMNS),
                         "ranks": [t.timeline(since_version) for t in self.ranks]},
        }

    def text_summary(self) -> str:
        """The static report printed after a cell where no widget front end is available."""
        state = self.state()
        status = {"running": " (running)", "finished": "", "failed": f" (failed: {self.error})"}[self.run_state]
        lines = [f"[hvd monitor] {len(self.ranks)} ranks, {state['elapsed_s']:.1f}s{status}",
                 f"{'rank':>4} {'samples/s':>10} {'samples':>9} {'steps':>7} {'events':>8} {'merged':>7} {'lost':>6}"]
        for r in state["ranks"]:
            rate = r["mean_samples_per_s"] if self.finished else r["samples_per_s"]
            lost = r["ring_dropped"] + r["buffer_dropped"]
            mark = "  straggler" if r["straggler"] else ""
            lines.append(f"{r['rank']:>4} {_rate(rate):>10} {r['samples']:>9} {r['steps']:>7} {r['events']:>8} "
                         f"{r['coarsened']:>7} {lost:>6}{mark}")
        total = state["mean_total_samples_per_s"] if self.finished else state["total_samples_per_s"]
        lines.append(f"total {_rate(total)} samples/s; {self._efficiency_line(state['efficiency'])}")
        lost_batches = sum(r["lost_batches"] for r in state["ranks"])
        behind = [r["rank"] for r in state["ranks"] if r["behind"]]
        notes = [f"{lost_batches} batches lost"] if lost_batches else []
        notes += [f"ranks {', '.join(map(str, behind))} emit events faster than they are read"] if behind else []
        stalls = sum(r["stalls"] for r in state["ranks"])
        aborts = sum(1 for h in self.health if h["kind"] == "abort")
        lines.append(f"engine: stalls {stalls}, aborts {aborts}" + "".join(f"; {n}" for n in notes))
        cost = max((r["monitor_cpu_s"] for r in state["ranks"]), default=0.0) / max(state["elapsed_s"], 1e-9)
        lines.append(f"monitor: {cost:.2%} of a core on the busiest rank")
        for h in self.health[:5]:
            lines.append(f"  rank {h['rank']} {h['kind']}: {h['message']}")
        more = len(self.health) - 5 + self.health_omitted
        if more > 0:
            lines.append(f"  ... {more} more")
        return "\n".join(lines)

    def _efficiency_line(self, efficiency: float | None) -> str:
        if self.baseline is None:
            return "scaling efficiency: no baseline (run this cell with -np 1, or pass --baseline SAMPLES_PER_S)"
        if efficiency is None:
            return f"scaling efficiency: not measured (baseline {self.baseline:.1f} samples/s, {self.baseline_source})"
        return (f"scaling efficiency {efficiency:.0%} of {len(self.ranks)} x {self.baseline:.1f} samples/s "
                f"({self.baseline_source})")


def _rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.1f}"
