"""Process sets: subsets of ranks with their own collectives (Horovod's dynamic process sets)."""
import numbers
import sys
from typing import Any, Iterable, Optional, Sequence, Union

import numpy as np

from . import _C


def is_communicator(obj: Any) -> bool:
    """Whether ``obj`` is an mpi4py communicator (MPI.COMM_NULL too)."""
    mpi = sys.modules.get("mpi4py.MPI")  # whoever holds a communicator has imported it
    return mpi is not None and isinstance(obj, mpi.Comm)


class ProcessSet:
    """A set of global ranks, or of the members of an mpi4py communicator (Horovod's two kinds); usable in ops
    once registered with add_process_set() or init() (a communicator's set: with init() only, as in Horovod)."""

    mpi_comm = None  # the communicator the set was made from

    def __init__(self, ranks_or_comm: Union[Iterable[int], Any]):
        self._id: Optional[int] = None
        self._bound_to: Optional[ProcessSet] = None  # the registered set of the same ranks that init() bound it to
        if is_communicator(ranks_or_comm):
            self.mpi_comm = ranks_or_comm
            self.ranks: Optional[list[int]] = None  # known once init() registers it, as in Horovod
            return
        try:
            given = list(ranks_or_comm)
        except TypeError:
            given = None
        if given is None or not all(isinstance(r, numbers.Integral) for r in given):
            raise ValueError(f"ProcessSet should be initialized with a list of process ranks (integers) or an mpi4py "
                             f"communicator, got {ranks_or_comm!r}")  # Horovod's ValueError
        self.ranks = sorted(int(r) for r in given)

    @property
    def process_set_id(self) -> Optional[int]:
        """The registered id (None when not registered); a set bound by init() has its registered twin's."""
        return self._bound_to.process_set_id if self._bound_to is not None else self._id

    @process_set_id.setter
    def process_set_id(self, value: Optional[int]) -> None:
        self._bound_to, self._id = None, value

    def _require(self) -> int:
        if self.process_set_id is None:
            how = "hvd.init(process_sets=[...])" if self.mpi_comm is not None else "hvd.add_process_set()"
            raise ValueError(f"process set {self.ranks} is not registered; call {how} first")
        return self.process_set_id

    def size(self) -> Optional[int]:
        """The number of ranks in the set (None for a communicator's set not yet registered, as in Horovod)."""
        return None if self.ranks is None else len(self.ranks)

    def rank(self) -> int:
        """This process's rank within the set. Of a registered set this process is not in, a ValueError (as
        Horovod's); of one not yet registered, -1 (Horovod's gives None before registration)."""
        me = _C.topology()[0]
        if me in (self.ranks or ()):
            return self.ranks.index(me)
        if self.process_set_id is not None:
            raise ValueError("Process is not part of provided process set.")
        return -1

    def included(self) -> Optional[bool]:
        """True when this process is a member (None for a communicator's set not yet registered, as in Horovod)."""
        return None if self.ranks is None else _C.topology()[0] in self.ranks

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


def require_ranks(process_set: ProcessSet, user: str) -> ProcessSet:
    """``process_set`` for an optimizer or trainer, which needs its ranks when made (its average's divisor, whether
    this rank takes part). A communicator's set that init() has not registered has none: Horovod's optimizers then
    average nothing (torch's, silently) or fail on None; here it is a ValueError naming the fix."""
    if not isinstance(process_set, ProcessSet):
        raise TypeError(f"{user}: process_set must be a ProcessSet, got {type(process_set).__name__}")
    if process_set.ranks is None:
        raise ValueError(f"{user}: {process_set} was made from an MPI communicator that hvd.init(comm, "
                         f"process_sets=[...]) has not registered, so its ranks are unknown and no gradient "
                         f"would be averaged; pass it to hvd.init() first")
    return process_set


def add_process_set(process_set: Union[ProcessSet, Iterable[int]]) -> ProcessSet:
    """Register a set on every rank (all ranks must call this with the same ranks)."""
    from .ops import allgather

    ps = process_set if isinstance(process_set, ProcessSet) else ProcessSet(process_set)
    if ps.process_set_id is not None:
        raise ValueError(f"{ps} is already registered")
    if ps.ranks is None:  # Horovod's NotImplementedError
        raise NotImplementedError("a process set made from an MPI communicator is registered by "
                                  "hvd.init(process_sets=[...]) only; add a set by its ranks")
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


def _members(comm: Any) -> Optional[list[int]]:
    """The engine ranks of ``comm``'s processes, gathered over ``comm`` (None for MPI.COMM_NULL: not a member)."""
    if comm == sys.modules["mpi4py.MPI"].COMM_NULL:
        return None
    return sorted(comm.allgather(_C.topology()[0]))


def register_at_init(sets: Sequence[Union[ProcessSet, Iterable[int]]]) -> None:
    """init(process_sets=...): register each set on every rank. On a running engine (a %%hvd cell's, started
    before the cell; or a second init()) a set whose ranks are registered already is bound to that
    registration, as Horovod's init() binds them, so a cell that makes its sets and calls init() runs again.

    A set made from a communicator may differ between the ranks (``COMM_WORLD.Split``: the even ranks hold
    one, the odd ranks another): every set any rank holds there is registered, and each rank's object is that
    rank's own. A rank given MPI.COMM_NULL (``COMM_WORLD.Create``: not a member) binds to the one set the
    members hold."""
    from .objects import allgather_object

    wanted = [s if isinstance(s, ProcessSet) else ProcessSet(s) for s in sets]
    if not wanted:
        return  # no collective: a plain init() may be called on some ranks only
    kinds = ["communicator" if s.mpi_comm is not None else s.ranks for s in wanted]
    for i, s in enumerate(wanted):
        if s.mpi_comm is None and s.ranks in kinds[:i]:
            raise ValueError(f"init: process_sets entry number {i} is a duplicate: {s}")
    held = allgather_object(kinds, name="process_set.init")
    if any(theirs != held[0] for theirs in held):  # before any communicator's collective, which would wait
        told = "; ".join(f"rank {r}: {theirs}" for r, theirs in enumerate(held))
        raise ValueError(f"init() was given different process_sets on the ranks ({told})")
    given = [_members(s.mpi_comm) if s.mpi_comm is not None else s.ranks for s in wanted]
    held = allgather_object(given, name="process_set.init.members") if "communicator" in kinds else [given]
    for i, s in enumerate(wanted):
        held_here = list(dict.fromkeys(tuple(theirs[i]) for theirs in held if theirs[i] is not None))
        if given[i] is None and len(held_here) == 1:
            given[i] = list(held_here[0])
        for ranks in map(list, held_here):  # in the ranks' order: every rank registers them alike
            mine = s if ranks == given[i] else ProcessSet(ranks)
            if mine is s:
                s.ranks = ranks
            same = next((r for r in _registered.values() if r.ranks == ranks), None)
            if same is None:
                add_process_set(mine)
            elif same is not mine:
                mine._bound_to = same


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
