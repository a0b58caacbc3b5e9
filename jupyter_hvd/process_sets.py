"""Process sets: subsets of ranks with their own collectives (Horovod's dynamic process sets)."""
import numbers
from typing import Iterable, Optional, Sequence, Union

import numpy as np

from . import _C


class ProcessSet:
    """A set of global ranks; usable in ops once registered with add_process_set() or init()."""

    mpi_comm = None  # Horovod's attribute: sets from a communicator are not supported, so never one here

    def __init__(self, ranks: Iterable[int]):
        try:
            given = list(ranks)
        except TypeError:
            given = None
        if given is None or not all(isinstance(r, numbers.Integral) for r in given):
            # Horovod's ValueError; it also takes an mpi4py communicator, which this engine does not
            raise ValueError(f"ProcessSet should be initialized with a list of process ranks (integers; not an mpi4py "
                             f"communicator: pass its ranks), got {ranks!r}")
        self.ranks = sorted(int(r) for r in given)
        self._id: Optional[int] = None
        self._bound_to: Optional[ProcessSet] = None  # the registered set of the same ranks that init() bound it to

    @property
    def process_set_id(self) -> Optional[int]:
        """The registered id (None when not registered); a set bound by init() has its registered twin's."""
        return self._bound_to.process_set_id if self._bound_to is not None else self._id

    @process_set_id.setter
    def process_set_id(self, value: Optional[int]) -> None:
        self._bound_to, self._id = None, value

    def _require(self) -> int:
        if self.process_set_id is None:
            raise ValueError(f"process set {self.ranks} is not registered; call hvd.add_process_set() first")
        return self.process_set_id

    def size(self) -> int:
        """The number of ranks in the set."""
        return len(self.ranks)

    def rank(self) -> int:
        """This process's rank within the set. Of a registered set this process is not in, a ValueError (as
        Horovod's); of one not yet registered, -1 (Horovod's gives None before registration)."""
        me = _C.topology()[0]
        if me in self.ranks:
            return self.ranks.index(me)
        if self.process_set_id is not None:
            raise ValueError("Process is not part of provided process set.")
        return -1

    def included(self) -> bool:
        """True when this process is a member."""
        return _C.topology()[0] in self.ranks

    def __repr__(self) -> str:
        return f"ProcessSet(process_set_id={self.process_set_id}, ranks={self.ranks}, mpi_comm={self.mpi_comm})"


global_process_set = ProcessSet([])
_registered: dict[int, ProcessSet] = {}
def on_init() -> None:
    """Bind the global set to the new engine."""
    global_process_set.ranks = list(range(_C.topology()[1]))
    global_process_set.process_set_id = 0
    _registered.clear()
    _registered[0] = global_process_set


def on_shutdown() -> None:
    """Forget registrations: their ids belong to the engine that just stopped."""
    for s in _registered.values():
        s.process_set_id = None
    _registered.clear()


def registered_sets() -> list:
    """The sets registered now, besides the global one, in the order they were registered."""
    return [s for registered, s in sorted(_registered.items()) if registered != 0]


def set_id(process_set: ProcessSet) -> int:
    """The registered id of ``process_set``, checking that this rank is a member."""
    if process_set is global_process_set and process_set._id is not None:
        return process_set._id  # every op's usual set: bound while the engine runs, every rank in it (never a twin)
    me = _C.topology()[0]  # raises first when the engine is not initialized
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"process_set must be a ProcessSet (hvd.global_process_set, or one from "
                        f"hvd.add_process_set), got {type(process_set).__name__}")
    registered = process_set._require()
    if me not in process_set.ranks:
        raise ValueError(f"rank {me} is not a member of {process_set}")
    return registered


def add_process_set(process_set: Union[ProcessSet, Iterable[int]]) -> ProcessSet:
    """Register a set on every rank (all ranks must call this with the same ranks)."""
    from .ops import allgather

    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    if ps.process_set_id is not None:
        raise ValueError(f"{ps} is already registered")
    size = _C.topology()[1]
    mine = np.zeros(size + 1, dtype=np.int64)  # a fixed-size encoding all ranks can compare
    mine[0] = len(ps.ranks)
    mine[1:1 + len(ps.ranks)] = ps.ranks[:size]
    seen = allgather(mine.reshape(1, -1), name=f"process_set.add.{len(_registered)}").reshape(size, -1)
    if not (seen == seen[0]).all():
        bad = [r for r in range(size) if not (seen[r] == seen[0]).all()]
        raise ValueError(f"add_process_set called with different ranks on ranks {bad}")
    for existing in _registered.values():
        if existing.ranks == ps.ranks:
            raise ValueError(f"a process set with ranks {ps.ranks} already exists: {existing}")
    ps.process_set_id = _C.add_process_set(ps.ranks)
    _registered[ps.process_set_id] = ps
    return ps


def register_at_init(sets: Sequence[Union[ProcessSet, Iterable[int]]]) -> None:
    """init(process_sets=...): register each set on every rank. On a running engine (a %%hvd cell's, started
    before the cell; or a second init()) a set whose ranks are registered already is bound to that
    registration, as Horovod's init() binds them, so a cell that makes its sets and calls init() runs again."""
    from .objects import allgather_object

    wanted = [s if isinstance(s, ProcessSet) else ProcessSet(s) for s in sets]
    if not wanted:
        return  # no collective: a plain init() may be called on some ranks only
    for i, s in enumerate(wanted):
        if any(s.ranks == earlier.ranks for earlier in wanted[:i]):
            raise ValueError(f"init: process_sets entry number {i} is a duplicate: {s}")
    held = allgather_object([s.ranks for s in wanted], name="process_set.init")
    if any(ranks != held[0] for ranks in held):
        told = "; ".join(f"rank {r}: {ranks}" for r, ranks in enumerate(held))
        raise ValueError(f"init() was given different process_sets on the ranks ({told})")
    for s in wanted:
        same = next((r for r in _registered.values() if r.ranks == s.ranks), None)
        if same is None:
            add_process_set(s)
        elif same is not s:
            s._bound_to = same


def remove_process_set(process_set: ProcessSet) -> bool:
    """Unregister a set on every rank (and every set init() bound to it); False if it was not registered."""
    registered = process_set.process_set_id
    if registered is None or registered not in _registered or registered == 0:
        return False
    from .ops import barrier

    barrier(process_set=global_process_set)
    _C.remove_process_set(registered)
    _registered.pop(registered).process_set_id = None
    process_set.process_set_id = None
    return True
