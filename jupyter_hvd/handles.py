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
        if all_done or natives.poll():
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
        natives = self._natives
        code = natives.wait(-1.0 if timeout is None else float(timeout))
        if code is None:
            raise TimeoutError(f"operation not finished after {timeout} s")
        if code:
            raise_for_status(natives.status())
        outs, finishes = self._keep[1], self._finishes
        if self._group:
            self._result = [out if finish is None else finish(natives[i])
                            for i, (finish, out) in enumerate(zip(finishes, outs))]
        else:  # one tensor: the usual blocking call, without the list
            self._result = outs[0] if finishes[0] is None else finishes[0](natives[0])
        self._done = True
        self._keep = ()
        return self._result

    synchronize = wait

    def __del__(self) -> None:
        if not self._done and self._keep and not self._natives.poll():
            _orphans[id(self._natives)] = (self._natives, self._keep)


def synchronize(handle: Handle) -> Any:
    """Wait for an async operation and return its result (Horovod's name)."""
    return handle.wait()


def poll(handle: Handle) -> bool:
    """True when an async operation has finished (Horovod's name)."""
    return handle.poll()
