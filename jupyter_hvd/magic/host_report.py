"""Which of a %%hvd job's other hosts were lost when its ranks died, and how the notebook says so."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..runner.host_loss import describe, lost_hosts


class _Rank(Protocol):
    rank: int
    host: str


def lost_from(ranks: Sequence[_Rank], dead: Sequence[_Rank], launcher_output: str | None, here: str,
              silence_s: float) -> tuple[list[str], str]:
    """The hosts lost, and how it showed. With the launcher gone (``launcher_output``: what it printed), the
    hosts it says it lost; with it still running, the other hosts none of whose ranks answers heartbeats."""
    if launcher_output is not None:
        return lost_hosts(launcher_output), "Open MPI's launcher lost contact with it"
    hosts = dict.fromkeys(r.host for r in ranks)
    silent = [h for h in hosts if h != here and all(r in dead for r in ranks if r.host == h)]
    return silent, f"its ranks sent no heartbeat for {silence_s:g} s"


def lost_cause(ranks: Sequence[_Rank], lost: list[str], how: str) -> str:
    """The notebook's words for lost hosts: each host and its ranks, how the loss showed, the ranks left."""
    by_host: dict[str, list[int]] = {}
    for r in ranks:
        by_host.setdefault(r.host, []).append(r.rank)
    return describe(lost, by_host, how)
