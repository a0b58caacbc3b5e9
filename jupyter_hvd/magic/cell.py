"""What runs inside each rank's engine: device pinning, engine start, and the %%hvd cell wrapper.

Only the standard library is imported at module level so that ranks can import
this module cheaply; the engine API is imported by setup_rank(). The engine's
lifecycle (init, shutdown, abort) goes through the core ``jupyter_hvd`` module,
whatever framework module is bound to ``hvd``.
"""
from __future__ import annotations

import ast
import contextlib
import importlib
import linecache
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
from types import CodeType
from typing import Any

from . import rank_shell
from .engine_restart import restart_engine

# Per-rank state kept between cells (this module lives as long as the engine).
_state: dict[str, Any] = {"engine": None, "api": None, "device": "cpu"}


class RemoteRepr:
    """Stand-in for a rank's value that cannot be sent to the notebook: it shows the value as the rank's
    IPython formats it (its repr, and its HTML, images, ... when it has them)."""

    def __init__(self, text: str, bundle: dict[str, Any] | None = None):
        self.text = text
        self.bundle = bundle or {}

    def __repr__(self) -> str:
        return self.text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {**self.bundle, "text/plain": self.text}


def api_module(framework: str) -> str:
    """The module bound to ``hvd`` in the cells for ``framework``."""
    return {"mxnet": "jupyter_hvd.mxnet", "torch": "jupyter_hvd.torch"}.get(framework, "jupyter_hvd")


def setup_rank(framework: str, cpu: bool) -> dict[str, Any]:
    """Pin this rank to its device, init the engine and bind the framework's API to ``hvd`` for the cells."""
    local_rank = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
    local_size = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_SIZE", "1"))
    _state["device"] = _pin_device(local_rank, local_size, cpu, framework)
    rank_shell.use_inline_matplotlib()
    engine = _state["engine"] = importlib.import_module("jupyter_hvd")
    _state["api"] = _user_ns()["hvd"] = importlib.import_module(api_module(framework))
    engine.init()
    return {
        "rank": _world_rank(),
        "local_rank": local_rank,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        **rank_status(),
    }


def rank_status() -> dict[str, Any]:
    """Report this rank's device, engine API module and whether its engine is initialised."""
    engine = _state["engine"]
    return {
        "device": _state["device"],
        "api": getattr(_state["api"], "__name__", None),
        "initialised": bool(engine is not None and engine.is_initialized()),
    }


def run_cell(code: str, cell_id: int, reinit: bool, timeout: float | None, value_ranks: list[int] | None,
             monitor: bool = False) -> Any:
    """Run a %%hvd cell in this rank's namespace; on error abort the job so peers cannot hang, then re-raise.

    The last expression's value is sent back only from value_ranks (None: from every rank). With monitor,
    the rank publishes its progress and engine events to the kernel while the cell runs.
    """
    __tracebackhide__ = True  # keep this wrapper out of the traceback the notebook shows
    engine = _state["engine"]
    if reinit and engine is not None:
        restart_engine(engine, _state["api"])
    publisher = importlib.import_module("jupyter_hvd.monitor.publisher") if monitor else None
    if publisher is not None:
        publisher.start_publisher(_world_rank())
    deadline = _Deadline(timeout)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        body, last = _compile(code, f"<hvd cell {cell_id}>")
        namespace = _user_ns()
        with rank_shell.execute_events(_shell()):
            exec(body, namespace)
            value = eval(last, namespace) if last is not None else None
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
        signal.signal(signal.SIGINT, previous)
    if deadline.expired:  # it fired as the cell ended: the engine is aborted, so the cell counts as failed
        raise TimeoutError(f"cell exceeded --timeout {timeout:g}s")
    if value_ranks is not None and _world_rank() not in value_ranks:
        return None
    return _sendable(value)


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
        engine = _state["engine"]
        if engine is not None and engine.is_initialized():
            engine.abort(f"rank {_world_rank()}: cell exceeded --timeout {self.timeout:g}s")
        signal.pthread_kill(self._main, signal.SIGINT)

    def cancel(self) -> None:
        with self._lock:
            self._done = True
        if self._timer is not None:
            self._timer.cancel()


def _abort_job(exc: BaseException) -> None:
    """Abort every rank's collectives because this rank failed, unless the failure is itself an abort."""
    engine = _state["engine"]
    if engine is None or not engine.is_initialized() or isinstance(exc, engine.EngineAbortedError):
        return
    # A failing abort must not hide the cell's own error; peers it failed to free get SIGINT from the kernel.
    with contextlib.suppress(Exception):
        engine.abort(f"rank {_world_rank()} raised {type(exc).__name__}: {exc}")


def _compile(code: str, filename: str) -> tuple[CodeType, CodeType | None]:
    """Compile IPython cell syntax into a body and, when the cell ends in an expression, that expression."""
    from IPython import get_ipython

    source = get_ipython().transform_cell(code)
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    tree = ast.parse(source, filename)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = compile(ast.Expression(tree.body.pop().value), filename, "eval")
    return compile(tree, filename, "exec"), last


def _sendable(value: Any) -> Any:
    """Return value if it can travel back to the notebook, else its repr (arrays are checked without copying)."""
    try:
        pickle.dumps(value, protocol=5, buffer_callback=lambda buffer: False)
    except Exception:
        return RemoteRepr(repr(value), rank_shell.mime_bundle(_shell(), value))
    return value


def _pin_device(local_rank: int, local_size: int, cpu: bool, framework: str = "none") -> str:
    """Give this rank the GPU of its local rank when GPUs exist, else share the host's cores; return the device.

    The GPU becomes the current CUDA device of the thread that runs the cells, so CuPy arrays made
    in a cell live there (and, with torch, ``"cuda"`` tensors). Every GPU stays visible, as under
    Horovod, so scripts that pick their GPU by ``hvd.local_rank()`` work unchanged.
    """
    gpus = [] if cpu else _visible_gpus()
    if gpus:
        index = local_rank % len(gpus)
        _use_gpu(index, framework)
        return f"gpu:{gpus[index]}"
    if cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // local_size)))
    return "cpu"


def _use_gpu(index: int, framework: str) -> None:
    """Make visible GPU ``index`` current (for torch as well, with ``--framework torch``); where CUDA cannot be
    used here, say why and go on (ops on GPU tensors then give the reason)."""
    from jupyter_hvd import gpu

    if not gpu.cuda_available():
        return
    try:
        gpu.use_device(index)
        if framework == "torch":
            import torch

            torch.cuda.set_device(index)
    except RuntimeError as e:
        print(f"[jupyter_hvd] WARNING: {e}", file=sys.stderr)


def _visible_gpus() -> list[str]:
    """GPU ids this rank may use: CUDA_VISIBLE_DEVICES when set, else those `nvidia-smi -L` lists."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, _ in enumerate(line for line in listing.splitlines() if line.startswith("GPU "))]


def _world_rank() -> int:
    return int(os.environ.get("OMPI_COMM_WORLD_RANK", "0"))


def _shell() -> Any:
    from IPython import get_ipython

    return get_ipython()


def _user_ns() -> dict[str, Any]:
    return _shell().user_ns
