"""Rank side: cells with top-level ``await``, and the tasks they start, run as a notebook kernel runs them.

The engine's own event loop is running while a cell runs (the cell is one of its callbacks), so an awaiting
cell runs on an event loop of the rank's own, kept between cells; between cells the engine's loop turns it.
"""
from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Coroutine, Iterator
from typing import Any

_loop: asyncio.AbstractEventLoop | None = None  # the loop cells with top-level ``await`` run on
_ticking = False  # a turn of that loop is scheduled on the engine's
TICK_S = 0.01  # how often that loop turns between cells while it has tasks


def run_awaited(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run to its end the coroutine that a cell with top-level ``await`` compiles to, as a notebook kernel
    runs such a cell. The engine's own event loop is running (the cell is one of its callbacks), so the
    coroutine runs on a loop of the rank's own, kept between cells. Tasks a cell starts go on while later
    cells await and, as in a kernel, between cells (``_keep_tasks_going``). An error or an interrupt cancels
    the cell's coroutine, not those tasks."""
    global _loop
    if _loop is None:
        _loop = asyncio.new_event_loop()
    engine_loop = asyncio._get_running_loop()
    task = _loop.create_task(coroutine)
    try:
        with _ours_running(engine_loop), _interrupts_reach(task):
            return _loop.run_until_complete(task)
    except BaseException:
        task.cancel()
        with contextlib.suppress(BaseException), _ours_running(engine_loop):
            _loop.run_until_complete(task)  # its finally blocks run, as when a kernel interrupts a cell
        raise
    finally:
        _keep_tasks_going(engine_loop)


@contextlib.contextmanager
def _interrupts_reach(cell: asyncio.Task) -> Iterator[None]:
    """An interrupt (SIGINT) stops the cell's task, never another: Python raises KeyboardInterrupt in whatever
    code runs when it comes, which may be a step of a task the cell started (that task then ended with it,
    while the cell's went on to be cancelled). Then the cell's task is cancelled instead, and the interrupt
    is raised from the cell once that has run its finally blocks."""
    handler = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or not callable(handler):
        yield
        return
    deferred = False

    def on_interrupt(signum: int, frame: Any) -> None:
        nonlocal deferred
        running = asyncio.current_task(_loop)
        if running is None or running is cell:
            handler(signum, frame)
            return
        deferred = True
        cell.cancel()

    signal.signal(signal.SIGINT, on_interrupt)
    try:
        yield
    except asyncio.CancelledError:
        if not deferred:
            raise
        raise KeyboardInterrupt from None
    finally:
        signal.signal(signal.SIGINT, handler)


@contextlib.contextmanager
def _ours_running(engine_loop: asyncio.AbstractEventLoop | None) -> Iterator[None]:
    """Let the rank's loop run from within the engine's: one loop runs at a time on a thread, and the
    engine's waits meanwhile."""
    asyncio._set_running_loop(None)
    try:
        yield
    finally:
        asyncio._set_running_loop(engine_loop)


def _keep_tasks_going(engine_loop: asyncio.AbstractEventLoop | None) -> None:
    """While the rank's loop has tasks, give it one pass over what is ready every ``TICK_S`` from the engine's
    loop, between cells (a cell that does not await holds the engine's loop, and so the tasks, as it holds a
    kernel's)."""
    global _ticking
    if _ticking or engine_loop is None or not asyncio.all_tasks(_loop):
        return
    _ticking = True

    def tick() -> None:
        global _ticking
        _ticking = False
        with _ours_running(engine_loop):
            _loop.call_soon(_loop.stop)
            _loop.run_forever()
        _keep_tasks_going(engine_loop)

    engine_loop.call_later(TICK_S, tick)
