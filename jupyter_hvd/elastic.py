"""Horovod's elastic training API (``hvd.elastic.run`` and the state it keeps) on a job whose ranks are fixed.

In Horovod's elastic mode (``horovodrun --min-np``, on Gloo) hosts come and go while training runs: a lost worker
raises ``HorovodInternalError`` on the others, which restore their last ``commit()``, form the job again without
it and call the function again. A jupyter_hvd job is one MPI job (``hvdrun -np N``, or the ranks of ``%%hvd``):
no host joins or leaves it, so an elastic script runs as it does under plain ``horovodrun -np N``. The state is
synced from rank 0 before the function runs, ``commit()`` keeps a copy of it, and a ``HorovodInternalError``
restores that copy on each rank it reaches and is raised (with a note saying so) instead of starting the function
again: with the same ranks the same error would come again. Calling the function again (a notebook's next cell)
syncs rank 0's state and goes on from there.
"""
import functools
from typing import Any, Callable, Dict, Iterable

from .errors import HorovodInternalError

RESTORED_NOTE = ("jupyter_hvd: the elastic state was restored to its last commit() on this rank; call the "
                 "function again to go on from there (the ranks of a jupyter_hvd job are fixed, so it is not "
                 "started again by itself)")


class State:
    """What an elastic training function keeps across failures; ``bcast_object`` and ``get_rank`` are the
    frontend's ``broadcast_object`` and ``rank``."""

    def __init__(self, bcast_object: Callable[[Any], Any], get_rank: Callable[[], int]):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks: list = []

    def register_reset_callbacks(self, callbacks: Iterable[Callable[[], None]]) -> None:
        """Functions to call after the job's ranks change (to rescale a learning rate, say). The ranks of a
        jupyter_hvd job never change, so they run only where ``on_reset()`` is called."""
        self._reset_callbacks.extend(callbacks)

    def on_reset(self) -> None:
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def reset(self) -> None:
        """For subclasses: what to reset after the job's ranks change, before the state is synced."""

    def commit(self) -> None:
        """Keep a copy of the state in memory, to go back to after a failure, and check for new hosts."""
        self.save()
        self.check_host_updates()

    def check_host_updates(self) -> None:
        """Horovod raises ``HostsUpdatedInterrupt`` here when hosts were added or removed; a jupyter_hvd job's
        hosts never change, so there is nothing to check (and no collective to run)."""

    def save(self) -> None:
        raise NotImplementedError()

    def restore(self) -> None:
        """Go back to the last commit, undoing what changed since."""
        raise NotImplementedError()

    def sync(self) -> None:
        """Give every rank rank 0's state."""
        raise NotImplementedError()


class ObjectState(State):
    """State made of plain Python objects, given as keyword arguments and kept as attributes of the same names.
    ``sync()`` broadcasts the committed values (as Horovod's does), so an attribute changed since the last
    commit goes back to it."""

    def __init__(self, bcast_object: Callable[[Any], Any], get_rank: Callable[[], int], **kwargs: Any):
        self._saved_state: Dict[str, Any] = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self) -> None:
        self._saved_state = {name: getattr(self, name) for name in self._saved_state}

    def restore(self) -> None:
        self._set_attrs()

    def sync(self) -> None:
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self) -> None:
        for name, value in self._saved_state.items():
            setattr(self, name, value)


def run(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for an elastic training function whose first argument is its ``State``: every rank takes rank
    0's state, then runs ``func``; a ``HorovodInternalError`` restores the last commit and is raised."""
    @functools.wraps(func)
    def wrapper(state: State, *args: Any, **kwargs: Any) -> Any:
        state.sync()
        try:
            return func(state, *args, **kwargs)
        except HorovodInternalError as e:
            state.restore()
            e.add_note(RESTORED_NOTE)
            raise
    return wrapper
