"""Which of a %%hvd job's other hosts were lost when its ranks died, what mpiexec said when it ended the job,
and how the notebook says so."""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from ..runner.host_loss import describe, lost_hosts


# ipyparallel's own log lines among what the ranks print ("2026-12-07 10:52:19.530 [IPEngine.3.3] WARNING | ...")
_IPYPARALLEL_LOG = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \[IP(Engine|Controller)")
LAST_WORDS = 12  # lines


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


def last_words(output: str) -> str:
    """The last lines of what the job's controller and mpiexec printed (mpiexec's come last), without ipyparallel's
    log lines: on several hosts, Open MPI's own account of a job it ended (a rank on another host that crashed or
    exited), which the notebook cannot see otherwise."""
    lines = [line.rstrip() for line in output.replace("\0", "").splitlines()]
    return "\n".join([line for line in lines if line.strip() and not _IPYPARALLEL_LOG.match(line)][-LAST_WORDS:])
