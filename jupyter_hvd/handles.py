"""Asynchronous results: a handle keeps the operation's arrays alive until it completes."""
from typing import Any, Callable, Optional, Sequence

from .errors import raise_for_status

# What handles dropped before their operation finished still lend the engine: the arrays it reads and
# writes by address, held until their native handles are done (a freed output would be written anyway).
# Keyed by id() and only ever changed one key at a time, so a collection in another thread cannot lose one.
_orphans: dict = {}


def release_orphans(all_done: bool = False) -> None:
    """Let go of the arrays of dropped handles whose operations have finished (all, once the engine
    has stopped: then nothing touches them)."""
    if not _orphans:  # the usual case, on every enqueue
        return
    for key, (natives, _) in list(_orphans.items()):
        if all_done or natives.done():
            _orphans.pop(key, None)


class Handle:
    """An enqueued operation, or a group of them; ``wait()`` returns its result (a group's: the list of
    results) or raises its first error, again at each call.

    An error's traceback keeps the frames it passed, which a script's uncaught one may keep to the end of the
    program; there nanobind would report a native group still held as leaked. So what raises lets go of it
    first: a failed handle keeps its status instead, and the blocking calls' frames drop theirs."""

    __slots__ = ("_natives", "_keep", "_finishes", "_group", "_result", "_done", "_failed")

    def __init__(self, natives: Any, keep: tuple, finishes: Sequence[Optional[Callable[[Any], Any]]],
                 group: bool = False):
        self._natives = natives  # the native HandleGroup: one handle per tensor; None once it has failed
        self._keep = keep  # (inputs, outputs): the arrays the engine reads and writes by address
        self._finishes = finishes  # each tensor's result from its native handle; None: its output array
        self._group = group
        self._result: Any = None
        self._done = False
        self._failed: Optional[tuple] = None  # the native status of its first error, once it has failed

    def poll(self) -> bool:
        """True when the operation has finished (successfully or not)."""
        return self._natives is None or self._natives.poll()

    def wait(self, timeout: Optional[float] = None) -> Any:
        """Block until done (Ctrl-C still works) and return the result; TimeoutError on timeout."""
        if self._done:
            return self._result
        if self._failed is not None:
            raise_for_status(self._failed)
        natives = self._natives
        code = natives.wait(-1.0 if timeout is None else float(timeout))
        if code is None:
            raise TimeoutError(f"operation not finished after {timeout} s")
        if code:
            self._failed, self._natives, self._keep = natives.status(), None, ()
            del natives
            raise_for_status(self._failed)
        self._result = _result(natives, self._keep[1], self._finishes, self._group)
        self._done = True
        self._keep = ()
        return self._result

    synchronize = wait

    def __del__(self) -> None:
        if not self._done and self._keep and not self._natives.done():
            _orphans[id(self._natives)] = (self._natives, self._keep)


def wait_for_result(natives: Any, keep: tuple, finishes: Sequence[Optional[Callable[[Any], Any]]],
                    group: bool = False) -> Any:
    """A blocking call's wait, with no Handle to make: the result of the native group ``natives`` (whose
    arrays ``keep`` holds), or its error, raised with the group let go (see Handle). Interrupted (Ctrl-C), it
    leaves the arrays to the orphans, as a dropped handle does."""
    try:
        if natives.wait(-1.0):
            raise_for_status(natives.status())
    except BaseException:  # its error, or Ctrl-C before the operation ended
        if not natives.done():
            _orphans[id(natives)] = (natives, keep)
        del natives
        raise
    return _result(natives, keep[1], finishes, group)


def _result(natives: Any, outs: Sequence[Any], finishes: Sequence[Optional[Callable[[Any], Any]]],
            group: bool) -> Any:
    """A group's result, once it has finished without error (a group's: the list of results)."""
    if group:
        if not any(finishes):  # host arrays only: their output arrays, with no call per array
            return list(outs)
        return [out if finish is None else finish(natives[i]) for i, (finish, out) in enumerate(zip(finishes, outs))]
    return outs[0] if finishes[0] is None else finishes[0](natives[0])  # one tensor: without the list


def synchronize(handle: Handle) -> Any:
    """Wait for an async operation and return its result (Horovod's name)."""
    return handle.wait()


def poll(handle: Handle) -> bool:
    """True when an async operation has finished (Horovod's name)."""
    return handle.poll()
