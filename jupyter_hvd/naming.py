"""The names ops go to the engine under: the caller's, Horovod's prefixed ones, and automatic names for
unnamed ops, which must come out the same on every rank of a process set.

Ranks match an op by its name, so an unnamed op is numbered: the n-th unnamed op of a kind on a set
is ``KIND.noname.SET.n`` on every member that calls ops in the same order. A call that fails its own
checks takes its number too (and tells the others, ops.refuse), so one rank's bad argument leaves no
count apart. The count starts at every engine start, which every rank makes at once; counts left apart
by a failed step (a rank that raised before an op its peers ran) therefore end with the engine that
failed, and cannot drift into the next.
The counters are the native module's (csrc/auto_names.cc), which numbers the unnamed ops it is given
itself; the functions here reach the same ones.
"""
from typing import List, Optional

from . import _C


def auto_name(kind: str, set_id: int) -> str:
    """The next automatic name for an op of ``kind`` on process set ``set_id``."""
    return _C.auto_name(kind, set_id)


def restart(set_id: Optional[int] = None) -> None:
    """Start the counts of process set ``set_id`` (default: every count) again from 0: where the engine
    starts, and where a join ends (its ranks ran different numbers of ops, none of which is in flight)."""
    _C.restart_auto_names(set_id)


def engine_name(kind: str, name: Optional[str], set_id: int) -> str:
    """The caller's name, or the next automatic one when it is None; ValueError for a name that is not a
    non-empty string."""
    if name is None:
        return auto_name(kind, set_id)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{kind}: name must be a non-empty string, got {name!r}")
    return name


def group_names(kind: str, name: Optional[str], n: int, set_id: int) -> List[str]:
    """The engine names of the ``n`` tensors of a group called ``name``: ``name.i``. An unnamed group takes the
    next automatic name of ``kind`` once, for all its tensors (``KIND.noname.SET.k.i``), so that ranks whose
    groups differ in length stay numbered alike. An empty group has one name, its first tensor's, under which
    it meets the others' calls (ops.enqueue)."""
    given = engine_name(kind, name, set_id)
    return [f"{given}.{i}" for i in range(max(n, 1))]


def prefixed_name(kind: str, name: Optional[str]) -> Optional[str]:
    """Horovod's naming in its framework APIs: the op kind prefixes a caller's name (``allreduce.w``);
    None (or '') stays unnamed, for the core to number. ValueError for a name that is not a string, as the
    core's (Horovod's encodes it: an AttributeError), so that no object's repr, which may differ between
    the ranks, names an op."""
    if name is None or name == "":
        return None
    if not isinstance(name, str):
        raise ValueError(f"{kind}: name must be a string, got {name!r}")
    return f"{kind}.{name}"


def op_names(kind: str, name: Optional[str], n: int, set_id: int, group: bool) -> List[str]:
    """The engine names of ``n`` ops a framework API calls together under ``name``: ``kind.name``, or
    ``kind.name.i`` in a ``group``; unnamed ones are numbered as the core numbers its own."""
    given = prefixed_name(kind, name)
    return group_names(kind, given, n, set_id) if group else [engine_name(kind, given, set_id)]
