"""Rank side: the %%hvd cell wrapper each rank runs, with its timeout and the job abort when it fails."""
from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import linecache
import signal
import threading
from types import CodeType
from typing import Any

import numpy as np

from ..errors import raised_reason
from ..runner.launch import rank_place
from . import rank_awaiting, rank_shell
from .engine_restart import restart_engine
from .notebook_place import NotebookPlace, follow_notebook
from .rank_setup import STATE
from .remote_repr import ByValue, RemoteRepr


def run_cell(code: str, cell_id: int, reinit: bool, timeout: float | None, value_ranks: list[int] | None,
             monitor: bool = False, place: NotebookPlace | None = None) -> Any:
    """Run a %%hvd cell in this rank's namespace; on error abort the job so peers cannot hang, then re-raise.

    The last expression's value is sent back only from value_ranks (None: from every rank). With monitor,
    the rank publishes its progress and engine events to the kernel while the cell runs. With place, the
    rank first follows the notebook's import path and working directory.
    """
    __tracebackhide__ = True  # keep this wrapper out of the traceback the notebook shows
    if reinit and STATE.engine is not None:
        restart_engine(STATE.engine)
    rank = rank_place().rank
    if place is not None:
        follow_notebook(place)
    publisher = importlib.import_module("jupyter_hvd.monitor.publisher") if monitor else None
    if publisher is not None:
        publisher.start_publisher(rank)
    deadline = _Deadline(timeout)
    with rank_shell.interrupts_raised():
        try:
            body, last = compile_cell(code, f"<hvd cell {cell_id}>")
            shell = rank_shell.current_shell()
            namespace = shell.user_ns
            if STATE.api is not None:  # every cell has ``hvd``: one that deleted it (or %reset) lost it for the rest
                namespace.setdefault("hvd", STATE.api)
            rank_shell.exit_called()  # an exit() in a cell that failed went with that cell
            with rank_shell.execute_events(shell, code), rank_shell.child_signals_in_cells_only():
                _run(body, namespace)
                value = _run(last, namespace) if last is not None else None
            if rank_shell.exit_called():
                raise rank_shell.ExitCalled("exit() was called in the cell")
        except BaseException as exc:
            if deadline.expired:
                raise TimeoutError(f"cell exceeded --timeout {timeout:g}s").with_traceback(
                    exc.__traceback__
                ) from None
            _abort_job(exc)
            raise
        finally:
            deadline.cancel()
            if publisher is not None:
                publisher.stop_publisher()
    if deadline.expired:  # it fired as the cell ended: the engine is aborted, so the cell counts as failed
        raise TimeoutError(f"cell exceeded --timeout {timeout:g}s")
    if value_ranks is not None and rank not in value_ranks:
        return None
    return sendable(value)


class _Deadline:
    """Cuts a cell off after a timeout: aborts the engine (freeing peers in collectives), then interrupts."""

    def __init__(self, timeout: float | None):
        self.timeout = timeout
        self.expired = False
        self._lock = threading.Lock()
        self._done = False
        self._main = threading.main_thread().ident
        self._timer = threading.Timer(timeout, self._expire) if timeout else None
        if self._timer is not None:
            self._timer.daemon = True
            self._timer.start()

    def _expire(self) -> None:
        with self._lock:
            if self._done:
                return
            self.expired = True
        engine = STATE.engine
        if engine is not None and engine.is_initialized():
            engine.abort(f"rank {rank_place().rank}: cell exceeded --timeout {self.timeout:g}s")
        signal.pthread_kill(self._main, signal.SIGINT)

    def cancel(self) -> None:
        with self._lock:
            self._done = True
        if self._timer is not None:
            self._timer.cancel()


def _abort_job(exc: BaseException) -> None:
    """Abort every rank's collectives because this rank failed, unless the failure is itself an abort."""
    engine = STATE.engine
    if engine is None or not engine.is_initialized() or isinstance(exc, engine.EngineAbortedError):
        return
    # A failing abort must not hide the cell's own error; peers it failed to free get SIGINT from the kernel.
    with contextlib.suppress(Exception):
        engine.abort(raised_reason(rank_place().rank, exc))


def _run(code: CodeType, namespace: dict[str, Any]) -> Any:
    """Run compiled cell code; code with top-level ``await`` gives a coroutine, which runs to its end."""
    value = eval(code, namespace)
    return rank_awaiting.run_awaited(value) if code.co_flags & inspect.CO_COROUTINE else value


def compile_cell(code: str, filename: str) -> tuple[CodeType, CodeType | None]:
    """Compile IPython cell syntax into a body and, when the cell ends in an expression, that expression
    (the value the cell returns); either may use ``await`` at its top level, as in a notebook."""
    source = rank_shell.current_shell().transform_cell(code)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    tree = ast.parse(source, filename)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = compile(ast.Expression(tree.body.pop().value), filename, "eval", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return compile(tree, filename, "exec", ast.PyCF_ALLOW_TOP_LEVEL_AWAIT), last


def sendable(value: Any) -> Any:
    """value itself if it is made of plain data, which the notebook surely loads; else pickled by value (a
    class or function the cells defined travels as code, one from a module as its name), or its repr where
    that fails. Loading an object in ipyparallel's client could fail (a class of the rank's ``__main__``, a
    module only the ranks have), and its result then never arrived: the cell hung."""
    if _plain(value):
        return value
    import cloudpickle

    stand_in = _stand_in(value)
    try:
        return ByValue(cloudpickle.dumps(value, protocol=5), stand_in)
    except Exception:  # noqa: BLE001 - whatever the object's own reduction raises
        return stand_in


_PLAIN_TYPES = (type(None), bool, int, float, complex, str, bytes)
_PLAIN_ITEMS = 1000  # larger containers are pickled by value (and copied) rather than checked item by item


def _plain(value: Any, depth: int = 0) -> bool:
    """Builtin scalars, numpy arrays and scalars without objects, and small lists, tuples and dicts of them."""
    kind = type(value)
    if kind in _PLAIN_TYPES:
        return True
    if kind is np.ndarray or isinstance(value, np.generic):
        return not value.dtype.hasobject
    if depth >= 2 or kind not in (list, tuple, dict) or len(value) > _PLAIN_ITEMS:
        return False
    items = [*value.keys(), *value.values()] if kind is dict else value
    return all(_plain(item, depth + 1) for item in items)


def _stand_in(value: Any) -> RemoteRepr:
    return RemoteRepr(repr(value), rank_shell.mime_bundle(rank_shell.current_shell(), value))
