"""Asynchronous results: a handle keeps the operation's arrays alive until it completes."""
from typing import Any, Callable, Optional

from .errors import raise_for_status


class Handle:
    """An enqueued operation; ``wait()`` returns its result or raises its error."""

    def __init__(self, native: Any, keep: tuple, finish: Callable[[Any], Any]):
        self._native = native
        self._keep = keep  # the arrays the engine reads and writes by address
        self._finish = finish
        self._result: Any = None
        self._done = False

    def poll(self) -> bool:
        """True when the operation has finished (successfully or not)."""
        return self._native.poll()

    def wait(self, timeout: Optional[float] = None) -> Any:
        """Block until done (Ctrl-C still works) and return the result; TimeoutError on timeout."""
        if self._done:
            return self._result
        if not self._native.wait(-1.0 if timeout is None else float(timeout)):
            raise TimeoutError(f"operation not finished after {timeout} s")
        raise_for_status(self._native.status())
        self._result = self._finish(self._native)
        self._done = True
        self._keep = ()
        return self._result

    synchronize = wait


def synchronize(handle: Handle) -> Any:
    """Wait for an async operation and return its result (Horovod's name)."""
    return handle.wait()


def poll(handle: Handle) -> bool:
    """True when an async operation has finished (Horovod's name)."""
    return handle.poll()
