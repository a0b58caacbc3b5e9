"""Each rank's output messages for one cell, in the order the rank sent them.

ipyparallel's client keeps a request's stdout and stderr as growing strings and its display_data
in a list, which loses their order, and drops update_display_data and clear_output altogether.
So the cell's AsyncResults get an IOPub callback each, registered on the client's I/O thread
(which dispatches IOPub): whatever that thread had filed before the callback is taken from the
result's metadata, and everything after comes through the callback, so nothing is lost or seen twice.
Submitted under ``io_held``, the callbacks are registered before anything the cell prints comes back,
so even a cell that ends at once keeps its order (the metadata has no order between streams and displays).
What a rank prints after its cell ended (a thread's or an asyncio task's lines) is kept in ``BetweenCells``
for the next cell, where a kernel would show it under whatever cell runs; so is what a rank prints while a
request between cells runs (``%hvd push``, ``pull``, ``status``), and after it: an engine files its output under
the last request it ran.
"""
from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

KINDS = frozenset({"stream", "display_data", "update_display_data", "clear_output", "execute_result"})
REGISTER_WAIT_S = 10.0  # the I/O thread registers within milliseconds; this only bounds a wedged client
OUTPUT_WAIT_S = 1.0  # output that trails a rank's result

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


class BetweenCells:
    """Each rank's lines that arrived after its cell ended, the newest ``limit`` characters of them, for the
    next cell. Used on the client's I/O thread only.

    The client forgets a request once its result and output are in, and then drops (into fresh metadata)
    what the engine still sends under it: the last cell's requests are watched by stand-ins for the
    client's futures, whose IOPub callbacks the client still runs, until the next cell begins."""

    def __init__(self, ranks: int, limit: int = 1 << 20):
        self.limit = limit
        self._held: list[deque[Message]] = [deque() for _ in range(ranks)]
        self._sizes = [0] * ranks
        self._dropped = [0] * ranks
        self._watched: list[tuple[Any, str, Any]] = []  # (client, msg_id, stand-in)

    def watch(self, rank: int, client: Any, msg_id: str) -> None:
        """File what ``rank`` sends under the finished request ``msg_id`` from now on."""
        def on_message(msg: dict[str, Any]) -> None:
            client.metadata.pop(msg_id, None)  # the client's copy of the text would grow for the life of the job
            if (kind := msg["header"]["msg_type"]) in KINDS:
                self.add(rank, (kind, msg["content"]))

        if msg_id not in client._futures:
            stand_in = SimpleNamespace(iopub_callbacks=[on_message])
            client._futures[msg_id] = stand_in
            self._watched.append((client, msg_id, stand_in))

    def keep_from(self, rank: int, client: Any, result: Any) -> None:
        """On the I/O thread, after the finished request ``result`` (with its output) that ran between cells on
        ``rank``: keep what the rank printed while it ran, and file what it prints from now on."""
        msg_id = result.msg_ids[0]
        # What came after the client forgot the request (then it files it in fresh metadata, not the result's).
        after = {} if msg_id in client._futures else client.metadata.pop(msg_id, None) or {}
        for metadata in (result.metadata, after):
            for name in ("stdout", "stderr"):
                if metadata.get(name):
                    self.add(rank, ("stream", {"name": name, "text": metadata[name]}))
        self.watch(rank, client, msg_id)

    def unwatch(self) -> None:
        """The next cell's requests carry what the ranks print now."""
        for client, msg_id, stand_in in self._watched:
            if client._futures.get(msg_id) is stand_in:
                del client._futures[msg_id]
        self._watched.clear()

    def add(self, rank: int, message: Message) -> None:
        kind, content = message
        if kind != "stream":  # a display's place was in its own cell, which is over
            return
        held = self._held[rank]
        held.append(message)
        self._sizes[rank] += len(content["text"])
        while self._sizes[rank] > self.limit:
            text = held.popleft()[1]["text"]
            self._sizes[rank] -= len(text)
            self._dropped[rank] += len(text)

    def take(self, rank: int) -> list[Message]:
        """What ``rank`` printed between cells, oldest first, after a line saying how much was dropped."""
        taken = list(self._held[rank])
        if self._dropped[rank]:
            taken.insert(0, ("stream", {"name": "stderr", "text": f"[hvd] {self._dropped[rank]} earlier characters "
                                                                   "printed between cells were not kept\n"}))
        self._held[rank].clear()
        self._sizes[rank] = self._dropped[rank] = 0
        return taken


class RankMessages:
    """Collects the output messages of one AsyncResult per rank; ``take(rank)`` hands them out in order, after
    what the ranks printed since the last cell (``between``), where what arrives after ``close()`` goes."""

    def __init__(self, results: Sequence[Any], between: BetweenCells):
        self._queues: list[deque[Message]] = [deque() for _ in results]
        self._registered = [threading.Event() for _ in results]
        self._io_threads = [result._client._io_thread for result in results]
        self._between = between
        self._results = results
        self._open = True  # changed on the I/O thread, where messages are filed
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
        """The cell is over: what arrives from now on, and what was not taken, is kept for the next cell."""
        if self._results:
            self._results[0]._client._io_loop.add_callback(self._to_next_cell)

    def _to_next_cell(self) -> None:
        self._open = False
        for rank, queue in enumerate(self._queues):
            while queue:
                self._between.add(rank, queue.popleft())
        for rank, result in enumerate(self._results):
            self._between.watch(rank, result._client, result.msg_ids[0])

    def _register(self, rank: int, result: Any) -> None:
        """On the I/O thread: file what arrived between cells, then what arrived before now from the
        metadata, then listen."""
        queue = self._queues[rank]
        self._between.unwatch()
        queue.extend(self._between.take(rank))
        metadata = result.metadata
        for name in ("stdout", "stderr"):
            if metadata.get(name):
                queue.append(("stream", {"name": name, "text": metadata[name]}))
        queue.extend(("display_data", content) for content in metadata.get("outputs") or [])
        if metadata.get("execute_result"):
            queue.append(("execute_result", metadata["execute_result"]))

        def on_message(msg: dict[str, Any]) -> None:
            kind = msg["header"]["msg_type"]
            if kind not in KINDS:
                return
            if self._open:
                queue.append((kind, msg["content"]))
            else:
                self._between.add(rank, (kind, msg["content"]))

        for future in result._children:
            future.iopub_callbacks.append(on_message)
        self._registered[rank].set()
