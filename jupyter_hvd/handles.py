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
    results) or raises its first error."""

    __slots__ = ("_natives", "_keep", "_finishes", "_group", "_result", "_done")

    def __init__(self, natives: Any, keep: tuple, finishes: Sequence[Optional[Callable[[Any], Any]]],
                 group: bool = False):
        self._natives = natives  # the native HandleGroup: one handle per tensor
        self._keep = keep  # (inputs, outputs): the arrays the engine reads and writes by address
        self._finishes = finishes  # each tensor's result from its native handle; None: its output array
        self._group = group
        self._result: Any = None
        self._done = False

    def poll(self) -> bool:
        """True when the operation has finished (successfully or not)."""
        return self._natives.poll()

    def wait(self, timeout: Optional[float] = None) -> Any:
        """Block until done (Ctrl-C still works) and return the result; TimeoutError on timeout."""
        if self._done:
            return self._result
        code = self._natives.wait(-1.0 if timeout is None else float(timeout))
        if code is None:
            raise TimeoutError(f"operation not finished after {timeout} s")
        self._result = _result(self._natives, code, self._keep[1], self._finishes, self._group)
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
    arrays ``keep`` holds), or its error. Interrupted (Ctrl-C), it leaves the arrays to the orphans, as a
    dropped handle does."""
    try:
        code = natives.wait(-1.0)
    except BaseException:
        if not natives.done():
            _orphans[id(natives)] = (natives, keep)
        raise
    return _result(natives, code, keep[1], finishes, group)


def _result(natives: Any, code: int, outs: Sequence[Any], finishes: Sequence[Optional[Callable[[Any], Any]]],
            group: bool) -> Any:
    """A finished group's result (a group's: the list of results), or the exception of its first error."""
    if code:
        raise_for_status(natives.status())
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
