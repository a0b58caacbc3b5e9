"""Automatic names for unnamed ops, which must come out the same on every rank of a process set.

Ranks match an op by its name, so an unnamed op is numbered: the n-th unnamed op of a kind on a set
is ``KIND.noname.SET.n`` on every member that calls ops in the same order. The count starts at every
engine start, which every rank makes at once; counts left apart by a failed step (a rank that raised
before an op its peers ran) therefore end with the engine that failed, and cannot drift into the next.
"""
import itertools
from collections import defaultdict
from typing import DefaultDict, Iterator, Tuple

_counters: DefaultDict[Tuple[str, int], Iterator[int]] = defaultdict(itertools.count)


def auto_name(kind: str, set_id: int) -> str:
    """The next automatic name for an op of ``kind`` on process set ``set_id``."""
    return f"{kind}.noname.{set_id}.{next(_counters[kind, set_id])}"


def restart() -> None:
    """Start every count again from 0 (called where the engine starts)."""
    _counters.clear()
