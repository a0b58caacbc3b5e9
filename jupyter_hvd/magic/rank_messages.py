"""Each rank's output messages for one cell, in the order the rank sent them.

ipyparallel's client keeps a request's stdout and stderr as growing strings and its display_data
in a list, which loses their order, and drops update_display_data and clear_output altogether.
So the cell's AsyncResults get an IOPub callback each, registered on the client's I/O thread
(which dispatches IOPub): whatever that thread had filed before the callback is taken from the
result's metadata, and everything after comes through the callback, so nothing is lost or seen twice.
Submitted under ``io_held``, the callbacks are registered before anything the cell prints comes back,
so even a cell that ends at once keeps its order (the metadata has no order between streams and displays).
"""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

KINDS = frozenset({"stream", "display_data", "update_display_data", "clear_output", "execute_result"})
REGISTER_WAIT_S = 10.0  # the I/O thread registers within milliseconds; this only bounds a wedged client

Message = tuple[str, dict[str, Any]]  # (msg_type, content)


@contextmanager
def io_held(io_loop: Any) -> Iterator[None]:
    """Holds the client's I/O loop (which sends requests and dispatches what comes back) while the block
    runs: what the block queues on it (sends, then RankMessages' registrations) runs before anything those
    requests bring back is dispatched."""
    released = threading.Event()
    io_loop.add_callback(released.wait, REGISTER_WAIT_S)  # a wedged block cannot stall the loop for good
    try:
        yield
    finally:
        released.set()


class RankMessages:
    """Collects the output messages of one AsyncResult per rank; ``take(rank)`` hands them out in order."""

    def __init__(self, results: Sequence[Any]):
        self._queues: list[deque[Message]] = [deque() for _ in results]
        self._registered = [threading.Event() for _ in results]
        self._callbacks: list[tuple[Any, Any]] = []
        self._io_threads = [result._client._io_thread for result in results]
        for rank, result in enumerate(results):
            result._client._io_loop.add_callback(self._register, rank, result)

    def take(self, rank: int) -> list[Message]:
        """The messages of ``rank`` that arrived since the last call, oldest first."""
        if not self._registered[rank].is_set() and self._io_threads[rank].is_alive():  # a closed client never will
            self._registered[rank].wait(REGISTER_WAIT_S)
        queue, taken = self._queues[rank], []
        while queue:
            taken.append(queue.popleft())
        return taken

    def close(self) -> None:
        """Stop listening (the cell is over)."""
        for future, callback in self._callbacks:
            if callback in future.iopub_callbacks:
                future.iopub_callbacks.remove(callback)

    def _register(self, rank: int, result: Any) -> None:
        """On the I/O thread: file what arrived before now from the metadata, then listen."""
        queue = self._queues[rank]
        metadata = result.metadata
        for name in ("stdout", "stderr"):
            if metadata.get(name):
                queue.append(("stream", {"name": name, "text": metadata[name]}))
        queue.extend(("display_data", content) for content in metadata.get("outputs") or [])
        if metadata.get("execute_result"):
            queue.append(("execute_result", metadata["execute_result"]))

        def on_message(msg: dict[str, Any]) -> None:
            kind = msg["header"]["msg_type"]
            if kind in KINDS:
                queue.append((kind, msg["content"]))

        for future in result._children:
            future.iopub_callbacks.append(on_message)
            self._callbacks.append((future, on_message))
        self._registered[rank].set()
