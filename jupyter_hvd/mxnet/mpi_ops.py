"""Collectives on MXNet NDArrays with horovod.mxnet's names, arguments, defaults and results.

allreduce and broadcast (plain, in place and grouped) are asynchronous operations in MXNet's
dependency engine: they return at once, the engine reads and writes the NDArrays' buffers without
copies, and whatever reads the result waits for it. The ops whose output size the ranks decide
(allgather, alltoall, reducescatter) run synchronously through the core numpy path.
"""
import contextlib
from typing import Any, Iterator, List, Optional, Sequence, Tuple, Union

import mxnet as mx
import numpy as np

from .. import _C
from .. import ops as core
# horovod.mxnet.mpi_ops also carries the basics and process sets: code imports them from there
# (``from horovod.mxnet.mpi_ops import allreduce_, size``).
from ..basics import (ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built,  # noqa: F401
                      gloo_enabled, init, is_initialized, local_rank, local_size, mpi_built, mpi_enabled,
                      mpi_threads_supported, nccl_built, rank, rocm_built, shutdown, size)
from ..dtypes import dtype_code
from ..errors import HorovodInternalError
from ..naming import op_names, prefixed_name
from ..ops import ALLGATHER, ALLREDUCE, ALLTOALL, BROADCAST, REDUCESCATTER, check_root
from ..other_framework import other_framework_hint
from ..ops import Adasum, Average, Max, Min, Product, Sum, resolve_op  # noqa: F401 (re-exported)
from ..process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set, set_id  # noqa: F401
from ..timeline import start_timeline, stop_timeline  # noqa: F401 (re-exported)
from .errors import as_mxnet_error
from . import bridge, drain  # noqa: F401 (drain: shutdown() first runs what MXNet queued)

NDArray = mx.nd.NDArray


@contextlib.contextmanager
def mxnet_errors() -> Iterator[None]:
    """Re-raise the core's collective and argument errors as MXNetError, as horovod.mxnet surfaces them (a
    collective's of the MXNet class of its core class: see errors.py)."""
    try:
        yield
    except (ValueError, HorovodInternalError) as e:
        raise as_mxnet_error(e) from e


def _require_init() -> None:
    if not is_initialized():
        raise ValueError("jupyter_hvd has not been initialized; use hvd.init().")


def _dtype_code(tensor: NDArray, what: str) -> int:
    return dtype_code(np.dtype(tensor.dtype), what)


def _check_ndarrays(tensors: Sequence[Any], what: str) -> None:
    for t in tensors:
        if not isinstance(t, NDArray):
            hint = ("; wrap it with mx.nd.array(...)" if isinstance(t, np.ndarray) else "") + \
                other_framework_hint(t, __package__)
            raise TypeError(f"{what}: expected an mxnet NDArray, got {type(t).__name__}{hint}")
        if isinstance(t, mx.nd.sparse.BaseSparseNDArray):
            raise TypeError(f"{what}: sparse NDArrays ({t.stype}) are not supported; use dense ones (tostype)")


def _check(tensors: Sequence[Any], what: str, op: int, prefix: str, name: Optional[str], group: bool,
           process_set: ProcessSet, kind: Optional[str] = None, rows: bool = False) -> None:
    """_check_ndarrays(tensors, what) (with ``rows``, core.require_rows too), telling the other members when it
    fails (core.refuse_prefixed) under the names the op takes: ``prefix.name``, or numbered as ``kind``'s
    (default: ``what``) when unnamed."""
    try:
        _check_ndarrays(tensors, what)
        if rows:
            core.require_rows(tensors, what)
    except (TypeError, ValueError) as e:
        core.refuse_prefixed(op, kind or what, prefix, name, len(tensors), group, process_set, e)
        raise


def _push_allreduce(tensors: Sequence[NDArray], name: Optional[str], op: int, prescale: float, postscale: float,
                    process_set: ProcessSet, priority: int, out_of_place: bool = False,
                    group: bool = False) -> List[NDArray]:
    """Queue an allreduce of ``tensors`` (a ``group``'s, or one tensor's) as one MXNet engine operation: in place,
    or ``out_of_place`` into new NDArrays, which it returns. An empty group's call waits for the others' calls."""
    _require_init()
    try:
        _check_ndarrays(tensors, "allreduce")
        prescale = _C.scale_factor(prescale, "allreduce", "prescale_factor")
        postscale = _C.scale_factor(postscale, "allreduce", "postscale_factor")
        _C.check_reduce([_dtype_code(t, "allreduce") for t in tensors], op, prescale, postscale, "allreduce", False)
        with mxnet_errors():
            pid = set_id(process_set)
    except Exception as e:  # named as op_names names them
        core.refuse_prefixed(ALLREDUCE, "allreduce", "allreduce", name, len(tensors), group, process_set, e)
        raise
    names = op_names("allreduce", name, len(tensors), pid, group)
    if not tensors:
        with mxnet_errors():
            return core.enqueue(ALLREDUCE, "allreduce", [], [], names, process_set, [], group=True, wait=True)
    spec = _C.OpSpec(ALLREDUCE, reduce=op, process_set=pid, prescale=prescale, postscale=postscale)
    return bridge.push(spec, names, tensors, priority, out_of_place)


def _push_broadcast(tensor: NDArray, name: Optional[str], root_rank: int, process_set: ProcessSet,
                    priority: int, out_of_place: bool = False) -> List[NDArray]:
    """Queue a broadcast of ``tensor`` from ``root_rank``: in place, or ``out_of_place`` into a new NDArray,
    which it returns."""
    _require_init()
    try:
        _check_ndarrays([tensor], "broadcast")
        _dtype_code(tensor, "broadcast")
        with mxnet_errors():
            pid = set_id(process_set)
            root = check_root(root_rank, process_set, "broadcast")
    except Exception as e:
        core.refuse_prefixed(BROADCAST, "broadcast", "broadcast", name, 1, False, process_set, e)
        raise
    spec = _C.OpSpec(BROADCAST, process_set=pid, root_rank=root)
    return bridge.push(spec, op_names("broadcast", name, 1, pid, False), [tensor], priority, out_of_place)


def allreduce(tensor: NDArray, average: Optional[bool] = None, name: Optional[str] = None, priority: int = 0,
              prescale_factor: float = 1.0, postscale_factor: float = 1.0,
              process_set: ProcessSet = global_process_set, op: Optional[int] = None) -> NDArray:
    """Reduce ``tensor`` over the ranks into a new NDArray (default op: Average); returns at once."""
    op = core.checked_op(average, op, process_set, "allreduce", name, prefix="allreduce")
    _check([tensor], "allreduce", ALLREDUCE, "allreduce", name, False, process_set)
    return _push_allreduce([tensor], name, op, prescale_factor, postscale_factor, process_set, priority, True)[0]


def allreduce_(tensor: NDArray, average: Optional[bool] = None, name: Optional[str] = None, priority: int = 0,
               prescale_factor: float = 1.0, postscale_factor: float = 1.0,
               process_set: ProcessSet = global_process_set, op: Optional[int] = None) -> NDArray:
    """Reduce ``tensor`` in place over the ranks and return it; returns at once."""
    op = core.checked_op(average, op, process_set, "allreduce", name, prefix="allreduce")
    _push_allreduce([tensor], name, op, prescale_factor, postscale_factor, process_set, priority)
    return tensor


def grouped_allreduce(tensors: Sequence[NDArray], average: Optional[bool] = None, name: Optional[str] = None,
                      priority: int = 0, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                      process_set: ProcessSet = global_process_set, op: Optional[int] = None) -> List[NDArray]:
    """Reduce a list of NDArrays into new ones, as one engine operation the engine can fuse."""
    tensors = core.group_call(tensors, "grouped_allreduce", name, process_set, True, "allreduce")
    op = core.checked_op(average, op, process_set, "allreduce", name, len(tensors), True, "allreduce")
    _check(tensors, "grouped_allreduce", ALLREDUCE, "allreduce", name, True, process_set, "allreduce")
    return _push_allreduce(tensors, name, op, prescale_factor, postscale_factor, process_set, priority, True, True)


def grouped_allreduce_(tensors: Sequence[NDArray], average: Optional[bool] = None, name: Optional[str] = None,
                       priority: int = 0, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                       process_set: ProcessSet = global_process_set, op: Optional[int] = None) -> Sequence[NDArray]:
    """Reduce a list of NDArrays in place, as one engine operation; returns the list at once."""
    group = core.group_call(tensors, "grouped_allreduce_", name, process_set, True, "allreduce")
    op = core.checked_op(average, op, process_set, "allreduce", name, len(group), True, "allreduce")
    _push_allreduce(group, name, op, prescale_factor, postscale_factor, process_set, priority, group=True)
    return tensors


def broadcast(tensor: NDArray, root_rank: int, name: Optional[str] = None, priority: int = 0,
              process_set: ProcessSet = global_process_set) -> NDArray:
    """A new NDArray holding ``root_rank``'s value of ``tensor``; returns at once."""
    _check([tensor], "broadcast", BROADCAST, "broadcast", name, False, process_set)
    return _push_broadcast(tensor, name, root_rank, process_set, priority, True)[0]


def broadcast_(tensor: NDArray, root_rank: int, name: Optional[str] = None, priority: int = 0,
               process_set: ProcessSet = global_process_set) -> NDArray:
    """Overwrite ``tensor`` with ``root_rank``'s value and return it; returns at once."""
    _push_broadcast(tensor, name, root_rank, process_set, priority)
    return tensor


def _host(tensor: NDArray, what: str) -> np.ndarray:
    """The NDArray's value on the host, once its pending writers are done."""
    _check_ndarrays([tensor], what)
    return tensor.asnumpy()


def _like(arr: np.ndarray, tensor: NDArray) -> NDArray:
    return mx.nd.array(arr, ctx=tensor.context, dtype=arr.dtype)


def allgather(tensor: NDArray, name: Optional[str] = None, priority: int = 0,
              process_set: ProcessSet = global_process_set) -> NDArray:
    """Concatenate every rank's ``tensor`` along dimension 0, in rank order.

    Synchronous: waits for ``tensor``, then for the result (its size depends on every rank).
    ``priority`` is accepted for compatibility.
    """
    _require_init()
    _check([tensor], "allgather", ALLGATHER, "allgather", name, False, process_set)
    with mxnet_errors():
        out = core.allgather(_host(tensor, "allgather"), prefixed_name("allgather", name), process_set)
    return _like(out, tensor)


def grouped_allgather(tensors: Sequence[NDArray], name: Optional[str] = None, priority: int = 0,
                      process_set: ProcessSet = global_process_set) -> List[NDArray]:
    """Allgather a list of NDArrays (synchronous, like allgather)."""
    tensors = core.group_call(tensors, "grouped_allgather", name, process_set, True)
    _require_init()
    _check(tensors, "grouped_allgather", ALLGATHER, "allgather", name, True, process_set)
    hosts = [_host(t, "grouped_allgather") for t in tensors]
    with mxnet_errors():
        outs = core.grouped_allgather(hosts, prefixed_name("allgather", name), process_set)
    return [_like(o, t) for o, t in zip(outs, tensors)]


def alltoall(tensor: NDArray, splits: Optional[Union[NDArray, Sequence[int]]] = None, name: Optional[str] = None,
             priority: int = 0, process_set: ProcessSet = global_process_set) -> Union[NDArray, Tuple[NDArray, NDArray]]:
    """Send rows ``splits[i]`` of ``tensor`` to the i-th rank of the set and gather what they send.

    Returns the gathered NDArray, and with ``splits`` also the int32 rows received from each rank (int64 past 2^31).
    Synchronous: waits for ``tensor``, then for the result (its size depends on every rank).
    """
    _require_init()
    _check([tensor], "alltoall", ALLTOALL, "alltoall", name, False, process_set)
    if isinstance(splits, NDArray):
        splits = splits.asnumpy()
    with mxnet_errors():
        res = core.alltoall(_host(tensor, "alltoall"), splits, prefixed_name("alltoall", name), process_set)
    if splits is None:
        return _like(res, tensor)
    out, received = res
    return _like(out, tensor), mx.nd.array(received, ctx=mx.cpu(), dtype=received.dtype)


def reducescatter(tensor: NDArray, op: int = Average, name: Optional[str] = None, priority: int = 0,
                  process_set: ProcessSet = global_process_set, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0) -> NDArray:
    """Reduce ``tensor`` over the ranks and keep this rank's block of rows (op: Average or Sum).

    Synchronous: waits for ``tensor``, then for the result.
    """
    _require_init()
    _check([tensor], "reducescatter", REDUCESCATTER, "reducescatter", name, False, process_set, rows=True)
    with mxnet_errors():
        out = core.reducescatter(_host(tensor, "reducescatter"), op, prefixed_name("reducescatter", name),
                                 process_set, prescale_factor, postscale_factor)
    return _like(out, tensor)


def grouped_reducescatter(tensors: Sequence[NDArray], op: int = Average, name: Optional[str] = None,
                          priority: int = 0, process_set: ProcessSet = global_process_set,
                          prescale_factor: float = 1.0, postscale_factor: float = 1.0) -> List[NDArray]:
    """Reducescatter a list of NDArrays (synchronous, like reducescatter)."""
    tensors = core.group_call(tensors, "grouped_reducescatter", name, process_set, True)
    _require_init()
    _check(tensors, "grouped_reducescatter", REDUCESCATTER, "reducescatter", name, True, process_set, rows=True)
    hosts = [_host(t, "grouped_reducescatter") for t in tensors]
    with mxnet_errors():
        outs = core.grouped_reducescatter(hosts, op, prefixed_name("reducescatter", name), process_set,
                                          prescale_factor, postscale_factor)
    return [_like(o, t) for o, t in zip(outs, tensors)]
