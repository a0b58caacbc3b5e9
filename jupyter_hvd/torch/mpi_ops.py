"""Collectives on torch tensors with horovod.torch's names, arguments, defaults, results and gradients.

The ``*_async`` calls queue an operation and return a handle for ``synchronize``/``poll``; the plain calls
wait for it. allreduce, allgather, broadcast, alltoall and reducescatter (and their grouped forms) are
autograd functions with Horovod's gradients. CPU tensors are read and written in their own memory; CUDA
tensors go to the engine's NCCL path, ordered after the work queued on torch's current stream.
"""
from typing import Any, Callable, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from .. import ops as core
# horovod.torch.mpi_ops also carries the basics and process sets: code imports them from there
# (``from horovod.torch.mpi_ops import Average, size``).
from ..basics import (ccl_built, cross_rank, cross_size, cuda_built, ddl_built, gloo_built,  # noqa: F401
                      gloo_enabled, init, is_homogeneous, is_initialized, local_rank, local_size, mpi_built,
                      mpi_enabled, mpi_threads_supported, nccl_built, rank, rocm_built, shutdown, size)
from ..errors import HorovodInternalError  # noqa: F401 (re-exported, as Horovod's mpi_ops has it)
from ..extensions import gpu_available  # noqa: F401 (re-exported, as Horovod's mpi_ops has it)
from ..naming import group_names, prefixed_name
from ..ops import Adasum, Average, Max, Min, Product, Sum, resolve_op  # noqa: F401 (re-exported)
from ..process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set, set_id  # noqa: F401
from ..timeline import start_timeline, stop_timeline  # noqa: F401 (re-exported)
from . import recording
from .compression import Compression, Compressor
from .eager import eager
from .tensors import check_tensors, engine_array, engine_tensor, new_output, to_torch


def handle_average_backwards_compatibility(op: Optional[int], average: Optional[bool]) -> int:
    """Horovod's helper: the reduce op that ``op=`` and the deprecated ``average=`` ask for, Average when
    neither; both at once is a ValueError. It checks the op as every collective here does, so Adasum and
    an unknown op raise at once (Horovod's passes any op through, for the collective to refuse)."""
    return resolve_op(average, op)


def num_rank_is_power_2(num_rank: int) -> bool:
    """Horovod's helper: whether ``num_rank`` is a power of 2 (its Adasum needs that)."""
    return num_rank > 0 and num_rank & (num_rank - 1) == 0


class Handle:
    """A queued operation on torch tensors; ``synchronize(handle)`` returns its result."""

    __slots__ = ("_op", "_result")

    def __init__(self, op: Any, result: Callable[[Any], Any]):
        self._op = op  # the core handle (or, for sparse allreduce, anything with poll() and wait())
        self._result = result  # the core result to what horovod.torch returns

    def poll(self) -> bool:
        """True once the operation has finished."""
        return self._op.poll()

    def wait(self) -> Any:
        """Wait for the operation and return its result; raises its error."""
        return self._result(self._op.wait())


@eager
def synchronize(handle: Handle) -> Any:
    """Wait for an async operation and return its output (a tensor, a list or a tuple of tensors)."""
    if not isinstance(handle, Handle):
        raise TypeError(f"synchronize: expected a handle from an *_async call, got {type(handle).__name__}")
    return handle.wait()


@eager
def poll(handle: Handle) -> bool:
    """True when the async operation has completed, so synchronize() will not block."""
    if not isinstance(handle, Handle):
        raise TypeError(f"poll: expected a handle from an *_async call, got {type(handle).__name__}")
    return handle.poll()


def _check(tensors: Sequence[Any], op: int, kind: str, prefix: str, name: Optional[str], group: bool,
           process_set: ProcessSet) -> None:
    """check_tensors, first thing in a call, telling the other members when it fails (core.refuse_prefixed)."""
    try:
        check_tensors(tensors, kind)
    except TypeError as e:
        core.refuse_prefixed(op, kind, prefix, name, len(tensors), group, process_set, e)
        raise


def _engine_arrays(tensors: Sequence[Any], op: int, kind: str, prefix: str, name: Optional[str], group: bool,
                   process_set: ProcessSet) -> list:
    """The engine's arrays of ``tensors`` (check_tensors, then engine_array), telling the other members when
    either fails (core.refuse_prefixed)."""
    try:
        check_tensors(tensors, kind)
        return [engine_array(t, kind) for t in tensors]
    except Exception as e:
        core.refuse_prefixed(op, kind, prefix, name, len(tensors), group, process_set, e)
        raise


def _as_tensors(result: Any, like: Sequence[torch.Tensor]) -> Tuple[torch.Tensor, ...]:
    """A group's results, as a tuple: what Horovod's synchronize() returns for a grouped operation."""
    return tuple(to_torch(r, t) for r, t in zip(result, like))


# allreduce

@eager
def _allreduce(tensors: Sequence[torch.Tensor], in_place: bool, group: bool, kind: str, name: Optional[str], op: int,
               prescale: float, postscale: float, process_set: ProcessSet, wait: bool = False) -> Any:
    """A Handle, or with ``wait`` the result: a blocking call takes the core's blocking path, which makes no
    handle and waits at once, so the engine's step runs on this thread (see handles.wait_for_result). The
    engine reads and writes CPU tensors by their data pointers; an out-of-place result is a new tensor."""
    try:
        check_tensors(tensors, kind)
        arrays = [engine_tensor(t, kind, in_place) for t in tensors]
    except Exception as e:
        core.refuse_prefixed(core.ALLREDUCE, kind, "allreduce", name, len(tensors), group, process_set, e)
        raise
    if in_place:
        outs, results = arrays, list(tensors)
    else:
        # A CUDA result comes from torch's allocator, on the current stream the engine waits for, and NCCL writes
        # it directly (out of place: no copy of the input first).
        results = [torch.empty_like(t, memory_format=torch.contiguous_format) if t.is_cuda else new_output(a)
                   for t, a in zip(tensors, arrays)]
        outs = [engine_tensor(r, kind, True) if r.is_cuda else r for r in results]
    finish = (lambda _: tuple(results)) if group else (lambda _: results[0])
    name = prefixed_name("allreduce", name)
    names = group_names(kind, name, len(arrays), set_id(process_set)) if group else [name]
    started = core.enqueue(core.ALLREDUCE, kind, arrays, outs, names, process_set, (None,) * len(arrays), group=group,
                           reduce=op, prescale=prescale, postscale=postscale, wait=wait)
    return finish(started) if wait else Handle(started, finish)


def allreduce_async(tensor: torch.Tensor, average: Optional[bool] = None, name: Optional[str] = None,
                    op: Optional[int] = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                    process_set: ProcessSet = global_process_set) -> Handle:
    """Start reducing ``tensor`` over the ranks into a new tensor (default op: Average)."""
    op = core.checked_op(average, op, process_set, "allreduce", name, prefix="allreduce")
    return _allreduce([tensor], False, False, "allreduce", name, op, prescale_factor, postscale_factor,
                      process_set)


def allreduce_async_(tensor: torch.Tensor, average: Optional[bool] = None, name: Optional[str] = None,
                     op: Optional[int] = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                     process_set: ProcessSet = global_process_set) -> Handle:
    """Start reducing ``tensor`` in place."""
    op = core.checked_op(average, op, process_set, "allreduce_", name, prefix="allreduce")
    return _allreduce([tensor], True, False, "allreduce_", name, op, prescale_factor, postscale_factor,
                      process_set)


def allreduce_(tensor: torch.Tensor, average: Optional[bool] = None, name: Optional[str] = None,
               op: Optional[int] = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
               process_set: ProcessSet = global_process_set) -> torch.Tensor:
    """Reduce ``tensor`` in place and return it (not differentiable)."""
    op = core.checked_op(average, op, process_set, "allreduce_", name, prefix="allreduce")
    return _allreduce([tensor], True, False, "allreduce_", name, op, prescale_factor, postscale_factor,
                      process_set, wait=True)


class HorovodAllreduce(torch.autograd.Function):
    """allreduce as an autograd function: the gradient is the same allreduce of the output's gradient."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, name: Optional[str], op: int, prescale_factor: float,
                postscale_factor: float, process_set: ProcessSet) -> torch.Tensor:
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return _allreduce([tensor], False, False, "allreduce", name, op, prescale_factor, postscale_factor,
                          process_set, wait=True)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        op, pre, post, ps = ctx.args
        return (recording.call(HorovodAllreduce, grad, None, op, pre, post, ps),) + (None,) * 5


def allreduce(tensor: torch.Tensor, average: Optional[bool] = None, name: Optional[str] = None,
              compression: Compressor = Compression.none, op: Optional[int] = None, prescale_factor: float = 1.0,
              postscale_factor: float = 1.0, process_set: ProcessSet = global_process_set) -> torch.Tensor:
    """A new tensor: ``tensor`` reduced over the ranks (default op: Average), sent compressed; differentiable."""
    op = core.checked_op(average, op, process_set, "allreduce", name, prefix="allreduce")
    _check([tensor], core.ALLREDUCE, "allreduce", "allreduce", name, False, process_set)
    sent, ctx = compression.compress(tensor)
    reduced = recording.call(HorovodAllreduce, sent, name, op, prescale_factor, postscale_factor, process_set)
    return compression.decompress(reduced, ctx)


def grouped_allreduce_async(tensors: Sequence[torch.Tensor], average: Optional[bool] = None,
                            name: Optional[str] = None, op: Optional[int] = None, prescale_factor: float = 1.0,
                            postscale_factor: float = 1.0, process_set: ProcessSet = global_process_set) -> Handle:
    """Start reducing a list of tensors as one group (negotiated and fused together) into new tensors."""
    tensors = core.group_call(tensors, "grouped_allreduce_async", name, process_set, True)
    op = core.checked_op(average, op, process_set, "grouped_allreduce", name, len(tensors), True, "allreduce")
    return _allreduce(tensors, False, True, "grouped_allreduce", name, op, prescale_factor, postscale_factor,
                      process_set)


def grouped_allreduce_async_(tensors: Sequence[torch.Tensor], average: Optional[bool] = None,
                             name: Optional[str] = None, op: Optional[int] = None, prescale_factor: float = 1.0,
                             postscale_factor: float = 1.0, process_set: ProcessSet = global_process_set) -> Handle:
    """Start reducing a list of tensors in place, as one group."""
    tensors = core.group_call(tensors, "grouped_allreduce_async_", name, process_set, True)
    op = core.checked_op(average, op, process_set, "grouped_allreduce_", name, len(tensors), True, "allreduce")
    return _allreduce(tensors, True, True, "grouped_allreduce_", name, op, prescale_factor, postscale_factor,
                      process_set)


def grouped_allreduce_(tensors: Sequence[torch.Tensor], average: Optional[bool] = None,
                       name: Optional[str] = None, op: Optional[int] = None, prescale_factor: float = 1.0,
                       postscale_factor: float = 1.0, process_set: ProcessSet = global_process_set) -> tuple:
    """Reduce a list of tensors in place, as one group; returns them, as a tuple (not differentiable)."""
    tensors = core.group_call(tensors, "grouped_allreduce_", name, process_set, True)
    op = core.checked_op(average, op, process_set, "grouped_allreduce_", name, len(tensors), True, "allreduce")
    return _allreduce(tensors, True, True, "grouped_allreduce_", name, op, prescale_factor, postscale_factor,
                      process_set, wait=True)


class HorovodGroupedAllreduce(torch.autograd.Function):
    """grouped_allreduce as an autograd function: the gradients are reduced as one group too."""

    @staticmethod
    def forward(ctx: Any, name: Optional[str], op: int, prescale_factor: float, postscale_factor: float,
                process_set: ProcessSet, *tensors: torch.Tensor) -> tuple:
        ctx.args = (op, prescale_factor, postscale_factor, process_set)
        return _allreduce(tensors, False, True, "grouped_allreduce", name, op, prescale_factor, postscale_factor,
                          process_set, wait=True)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple:
        op, pre, post, ps = ctx.args
        return (None,) * 5 + tuple(recording.call(HorovodGroupedAllreduce, None, op, pre, post, ps, *grads))


def grouped_allreduce(tensors: Sequence[torch.Tensor], average: Optional[bool] = None, name: Optional[str] = None,
                      compression: Compressor = Compression.none, op: Optional[int] = None,
                      prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                      process_set: ProcessSet = global_process_set) -> list:
    """New tensors: each of ``tensors`` reduced over the ranks, as one group; differentiable."""
    tensors = core.group_call(tensors, "grouped_allreduce", name, process_set, True)
    op = core.checked_op(average, op, process_set, "grouped_allreduce", name, len(tensors), True, "allreduce")
    if not tensors:  # still a call, which the others' calls of the group meet
        return list(_allreduce([], False, True, "grouped_allreduce", name, op, prescale_factor, postscale_factor,
                               process_set, wait=True))
    _check(tensors, core.ALLREDUCE, "grouped_allreduce", "allreduce", name, True, process_set)
    sent, ctxs = zip(*[compression.compress(t) for t in tensors])
    reduced = recording.call(HorovodGroupedAllreduce, name, op, prescale_factor, postscale_factor, process_set, *sent)
    return [compression.decompress(t, c) for t, c in zip(reduced, ctxs)]


class _Sparse:
    """A sparse allreduce in flight: allgathers of its indices and values, assembled when waited for."""

    def __init__(self, tensor: torch.Tensor, name: Optional[str], op: int, process_set: ProcessSet):
        tensor = tensor.coalesce()
        self._like, self._divisor = tensor, (process_set.size() if op == Average else 1)
        self._indices = allgather_async(tensor.indices().t().contiguous(), f"{name}.indices" if name else None,
                                        process_set)
        self._values = allgather_async(tensor.values().contiguous(), f"{name}.values" if name else None, process_set)

    def poll(self) -> bool:
        return self._indices.poll() and self._values.poll()

    def wait(self) -> torch.Tensor:
        values, indices = self._values.wait(), self._indices.wait()
        summed = torch.sparse_coo_tensor(indices.t(), values, self._like.shape, check_invariants=False).coalesce()
        return summed / self._divisor if self._divisor != 1 else summed  # the mean rounded once, as a dense Average


class SparseHandle(Handle):
    """A sparse allreduce in flight. Callable, as Horovod's is (``handle()`` waits and returns the result),
    and taken by synchronize() and poll() as every other handle."""

    __slots__ = ()

    def __call__(self) -> torch.Tensor:
        return self.wait()


@eager
def sparse_allreduce_async(tensor: torch.Tensor, name: Optional[str], op: int,
                           process_set: ProcessSet = global_process_set) -> SparseHandle:
    """Start reducing a sparse COO tensor by allgathering its indices and values (Sum or Average)."""
    if op not in (Sum, Average):
        raise ValueError("sparse_allreduce_async supports op=hvd.Sum or hvd.Average")
    return SparseHandle(_Sparse(tensor, name, op, process_set), lambda r: r)


# allgather

@eager
def _allgather(tensors: Sequence[torch.Tensor], group: bool, name: Optional[str], process_set: ProcessSet,
               wait: bool = False) -> Any:
    """A Handle, or with ``wait`` the result (as _allreduce)."""
    kind = "grouped_allgather" if group else "allgather"
    arrays = _engine_arrays(tensors, core.ALLGATHER, kind, "allgather", name, group, process_set)
    name = prefixed_name("allgather", name)
    if group:
        call = core.grouped_allgather if wait else core.grouped_allgather_async
        started, finish = call(arrays, name, process_set), lambda r: _as_tensors(r, tensors)
    else:
        call = core.allgather if wait else core.allgather_async
        started, finish = call(arrays[0], name, process_set), lambda r: to_torch(r, tensors[0])
    return finish(started) if wait else Handle(started, finish)


def allgather_async(tensor: torch.Tensor, name: Optional[str] = None,
                    process_set: ProcessSet = global_process_set) -> Handle:
    """Start concatenating every rank's ``tensor`` along dimension 0 (whose size may differ by rank)."""
    return _allgather([tensor], False, name, process_set)


def grouped_allgather_async(tensors: Sequence[torch.Tensor], name: Optional[str] = None,
                            process_set: ProcessSet = global_process_set) -> Handle:
    """Start allgathers of a list of tensors as one group."""
    tensors = core.group_call(tensors, "grouped_allgather_async", name, process_set, True)
    return _allgather(tensors, True, name, process_set)


def _own_rows(grad: torch.Tensor, rows: int, process_set: ProcessSet) -> torch.Tensor:
    """This rank's block of rows of a gradient gathered in set-rank order (blocks sized by each rank's rows)."""
    counts = allgather(torch.tensor([rows], dtype=torch.int64), process_set=process_set)
    offset = int(counts[:process_set.rank()].sum())
    return grad.narrow(0, offset, rows)


class HorovodAllgather(torch.autograd.Function):
    """allgather as an autograd function: the gradient is this rank's rows of the averaged output gradient."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, name: Optional[str], process_set: ProcessSet) -> torch.Tensor:
        ctx.rows, ctx.process_set = tensor.shape[0] if tensor.dim() else 0, process_set
        return _allgather([tensor], False, name, process_set, wait=True)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        reduced = allreduce(grad, op=Average, process_set=ctx.process_set)
        return _own_rows(reduced, ctx.rows, ctx.process_set), None, None


def allgather(tensor: torch.Tensor, name: Optional[str] = None,
              process_set: ProcessSet = global_process_set) -> torch.Tensor:
    """Every rank's ``tensor`` concatenated along dimension 0, in rank order; differentiable."""
    _check([tensor], core.ALLGATHER, "allgather", "allgather", name, False, process_set)
    return recording.call(HorovodAllgather, tensor, name, process_set)


class HorovodGroupedAllgather(torch.autograd.Function):
    """grouped_allgather as an autograd function (each gradient as allgather's)."""

    @staticmethod
    def forward(ctx: Any, name: Optional[str], process_set: ProcessSet, *tensors: torch.Tensor) -> tuple:
        ctx.rows = [t.shape[0] if t.dim() else 0 for t in tensors]
        ctx.process_set = process_set
        return _allgather(tensors, True, name, process_set, wait=True)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple:
        reduced = grouped_allreduce(list(grads), op=Average, process_set=ctx.process_set)
        return (None, None) + tuple(_own_rows(g, r, ctx.process_set) for g, r in zip(reduced, ctx.rows))


def grouped_allgather(tensors: Sequence[torch.Tensor], name: Optional[str] = None,
                      process_set: ProcessSet = global_process_set) -> tuple:
    """Allgather a list of tensors as one group; differentiable. A tuple, as Horovod's (whose grouped_allreduce
    and grouped_reducescatter return lists)."""
    tensors = core.group_call(tensors, "grouped_allgather", name, process_set, True)
    if not tensors:  # still a call, which the others' calls of the group meet
        return _allgather([], True, name, process_set, wait=True)
    _check(tensors, core.ALLGATHER, "grouped_allgather", "allgather", name, True, process_set)
    return recording.call(HorovodGroupedAllgather, name, process_set, *tensors)


# broadcast

@eager
def _broadcast(tensor: torch.Tensor, root_rank: int, name: Optional[str], process_set: ProcessSet, in_place: bool,
               wait: bool = False) -> Any:
    """A Handle, or with ``wait`` the result (as _allreduce)."""
    kind = "broadcast_" if in_place else "broadcast"
    try:
        check_tensors([tensor], kind)
        if not in_place and tensor.is_cuda:
            tensor, in_place = tensor.detach().clone(memory_format=torch.contiguous_format), True
        array = engine_array(tensor, kind, in_place)
    except Exception as e:
        core.refuse_prefixed(core.BROADCAST, "broadcast", "broadcast", name, 1, False, process_set, e)
        raise
    name = prefixed_name("broadcast", name)
    if in_place:
        call, finish = (core.broadcast_ if wait else core.broadcast_async_), lambda _: tensor
    else:
        call, finish = (core.broadcast if wait else core.broadcast_async), lambda r: to_torch(r, tensor)
    started = call(array, root_rank, name, process_set)
    return finish(started) if wait else Handle(started, finish)


def broadcast_async(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None,
                    process_set: ProcessSet = global_process_set) -> Handle:
    """Start a broadcast of ``root_rank``'s ``tensor`` into a new tensor on every rank."""
    return _broadcast(tensor, root_rank, name, process_set, False)


def broadcast_async_(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None,
                     process_set: ProcessSet = global_process_set) -> Handle:
    """Start overwriting ``tensor`` with ``root_rank``'s value."""
    return _broadcast(tensor, root_rank, name, process_set, True)


def broadcast_(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None,
               process_set: ProcessSet = global_process_set) -> torch.Tensor:
    """Overwrite ``tensor`` with ``root_rank``'s value and return it (not differentiable)."""
    return _broadcast(tensor, root_rank, name, process_set, True, wait=True)


class HorovodBroadcast(torch.autograd.Function):
    """broadcast as an autograd function: the root gets the averaged gradient, the other ranks zeros."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, root_rank: int, name: Optional[str],
                process_set: ProcessSet) -> torch.Tensor:
        ctx.root_rank, ctx.process_set = root_rank, process_set
        return _broadcast(tensor, root_rank, name, process_set, False, wait=True)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        reduced = allreduce(grad, op=Average, process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            reduced = torch.zeros_like(reduced)
        return reduced, None, None, None


def broadcast(tensor: torch.Tensor, root_rank: int, name: Optional[str] = None,
              process_set: ProcessSet = global_process_set) -> torch.Tensor:
    """A new tensor holding ``root_rank``'s ``tensor`` on every rank; differentiable."""
    _check([tensor], core.BROADCAST, "broadcast", "broadcast", name, False, process_set)
    return recording.call(HorovodBroadcast, tensor, root_rank, name, process_set)


# alltoall

def _splits_list(splits: Any) -> Optional[Sequence[int]]:
    if isinstance(splits, torch.Tensor):
        return splits.detach().cpu().numpy()
    return splits


@eager
def _alltoall(tensor: torch.Tensor, splits: Any, name: Optional[str], process_set: ProcessSet,
              wait: bool = False) -> Any:
    """A Handle, or with ``wait`` the result (as _allreduce): the gathered tensor and the rows received."""
    array = _engine_arrays([tensor], core.ALLTOALL, "alltoall", "alltoall", name, False, process_set)[0]
    sizes, n = _splits_list(splits), process_set.size()
    if sizes is None and array.ndim and n and array.shape[0] % n == 0:
        sizes = [array.shape[0] // n] * n  # so the received splits come back too, as Horovod's handle returns them
    started = (core.alltoall if wait else core.alltoall_async)(array, sizes, prefixed_name("alltoall", name),
                                                               process_set)

    def finish(r: Tuple[Any, np.ndarray]) -> Tuple[torch.Tensor, torch.Tensor]:
        out, received = r
        received = torch.from_numpy(received)
        if isinstance(splits, torch.Tensor) and not splits.is_cpu:  # on the splits' device, as Horovod's
            received = received.to(splits.device)
        return to_torch(out, tensor), received

    return finish(started) if wait else Handle(started, finish)


def alltoall_async(tensor: torch.Tensor, splits: Optional[Union[torch.Tensor, Sequence[int]]] = None,
                   name: Optional[str] = None, process_set: ProcessSet = global_process_set) -> Handle:
    """Start an alltoall: rows ``splits[i]`` of ``tensor`` go to the i-th rank of the set (equal blocks without
    splits). synchronize() returns (the gathered tensor, the int32 rows received from each rank, int64 past 2^31)."""
    return _alltoall(tensor, splits, name, process_set)


class HorovodAlltoall(torch.autograd.Function):
    """alltoall as an autograd function: gradients travel back by the alltoall the other way."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, splits: Any, name: Optional[str], process_set: ProcessSet) -> Any:
        output, received = _alltoall(tensor, splits, name, process_set, wait=True)
        ctx.received, ctx.process_set = received, process_set
        if splits is None:
            return output
        ctx.mark_non_differentiable(received)
        return output, received

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor, *_: Any) -> tuple:
        back, _ = _alltoall(grad.contiguous(), ctx.received, None, ctx.process_set, wait=True)
        return back, None, None, None


def alltoall(tensor: torch.Tensor, splits: Optional[Union[torch.Tensor, Sequence[int]]] = None,
             name: Optional[str] = None, process_set: ProcessSet = global_process_set) -> Any:
    """Scatter rows of ``tensor`` to every rank and gather theirs; with ``splits`` also returns the rows
    received from each rank (an int32 tensor). Differentiable."""
    _check([tensor], core.ALLTOALL, "alltoall", "alltoall", name, False, process_set)
    return recording.call(HorovodAlltoall, tensor, splits, name, process_set)


# reducescatter

@eager
def _reducescatter(tensors: Sequence[torch.Tensor], group: bool, name: Optional[str], op: int,
                   process_set: ProcessSet, prescale: float, postscale: float, wait: bool = False) -> Any:
    """A Handle, or with ``wait`` the result (as _allreduce)."""
    kind = "grouped_reducescatter" if group else "reducescatter"
    arrays = _engine_arrays(tensors, core.REDUCESCATTER, kind, "reducescatter", name, group, process_set)
    name = prefixed_name("reducescatter", name)
    if group:
        call = core.grouped_reducescatter if wait else core.grouped_reducescatter_async
        started, finish = call(arrays, op, name, process_set, prescale, postscale), lambda r: _as_tensors(r, tensors)
    else:
        call = core.reducescatter if wait else core.reducescatter_async
        started, finish = call(arrays[0], op, name, process_set, prescale, postscale), lambda r: to_torch(r, tensors[0])
    return finish(started) if wait else Handle(started, finish)


def reducescatter_async(tensor: torch.Tensor, name: Optional[str] = None, op: int = Average,
                        process_set: ProcessSet = global_process_set, prescale_factor: float = 1.0,
                        postscale_factor: float = 1.0) -> Handle:
    """Start a reducescatter: reduce over the ranks, then rank i keeps the i-th block of rows."""
    return _reducescatter([tensor], False, name, op, process_set, prescale_factor, postscale_factor)


def grouped_reducescatter_async(tensors: Sequence[torch.Tensor], name: Optional[str] = None, op: int = Average,
                                process_set: ProcessSet = global_process_set, prescale_factor: float = 1.0,
                                postscale_factor: float = 1.0) -> Handle:
    """Start reducescatters of a list of tensors as one group."""
    tensors = core.group_call(tensors, "grouped_reducescatter_async", name, process_set, True)
    return _reducescatter(tensors, True, name, op, process_set,
                          prescale_factor, postscale_factor)


def _scatter_grad(grads: Sequence[torch.Tensor], op: int, scale: float, process_set: ProcessSet) -> list:
    """Horovod's reducescatter gradient: the output gradients gathered (times the set's size for Sum), and times
    the forward's prescale and postscale factors."""
    gathered = grouped_allgather(list(grads), process_set=process_set)
    factor = scale * (process_set.size() if op == Sum else 1)
    return [g * factor if factor != 1 else g for g in gathered]


class HorovodReducescatter(torch.autograd.Function):
    """reducescatter as an autograd function."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, name: Optional[str], op: int, process_set: ProcessSet,
                prescale_factor: float, postscale_factor: float) -> torch.Tensor:
        out = _reducescatter([tensor], False, name, op, process_set, prescale_factor, postscale_factor, wait=True)
        ctx.args = (op, prescale_factor * postscale_factor, process_set)  # once the call has checked the factors
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple:
        return (_scatter_grad([grad], *ctx.args)[0],) + (None,) * 5


def reducescatter(tensor: torch.Tensor, name: Optional[str] = None, compression: Compressor = Compression.none,
                  op: int = Average, process_set: ProcessSet = global_process_set, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0) -> torch.Tensor:
    """``tensor`` reduced over the ranks (Average or Sum), this rank's block of rows of it; differentiable."""
    _check([tensor], core.REDUCESCATTER, "reducescatter", "reducescatter", name, False, process_set)
    sent, ctx = compression.compress(tensor)
    out = recording.call(HorovodReducescatter, sent, name, op, process_set, prescale_factor, postscale_factor)
    return compression.decompress(out, ctx)


class HorovodGroupedReducescatter(torch.autograd.Function):
    """grouped_reducescatter as an autograd function."""

    @staticmethod
    def forward(ctx: Any, name: Optional[str], op: int, process_set: ProcessSet, prescale_factor: float,
                postscale_factor: float, *tensors: torch.Tensor) -> tuple:
        out = _reducescatter(tensors, True, name, op, process_set, prescale_factor, postscale_factor, wait=True)
        ctx.args = (op, prescale_factor * postscale_factor, process_set)  # once the call has checked the factors
        return out

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple:
        return (None,) * 5 + tuple(_scatter_grad(grads, *ctx.args))


def grouped_reducescatter(tensors: Sequence[torch.Tensor], name: Optional[str] = None,
                          compression: Compressor = Compression.none, op: int = Average,
                          process_set: ProcessSet = global_process_set, prescale_factor: float = 1.0,
                          postscale_factor: float = 1.0) -> list:
    """Reducescatter a list of tensors as one group; differentiable."""
    tensors = core.group_call(tensors, "grouped_reducescatter", name, process_set, True)
    if not tensors:  # still a call, which the others' calls of the group meet
        return list(_reducescatter([], True, name, op, process_set, prescale_factor, postscale_factor, wait=True))
    _check(tensors, core.REDUCESCATTER, "grouped_reducescatter", "reducescatter", name, True, process_set)
    sent, ctxs = zip(*[compression.compress(t) for t in tensors])
    outs = recording.call(HorovodGroupedReducescatter, name, op, process_set, prescale_factor, postscale_factor, *sent)
    return [compression.decompress(t, c) for t, c in zip(outs, ctxs)]


# synchronisation

@eager
def barrier(process_set: ProcessSet = global_process_set) -> None:
    """Return once every rank of ``process_set`` has called barrier()."""
    core.barrier(process_set)


@eager
def join(device: int = -1) -> int:
    """Horovod's join: this rank is done; it stands in for the others' allreduces (zeros, so an Average
    still divides by every rank) and barriers until all have joined, and returns the rank that joined last.
    The others' allgathers, broadcasts, alltoalls and reducescatters raise meanwhile (as in Horovod).
    ``device`` is accepted for compatibility: for CUDA tensors a joined rank stands in on the GPU its own
    CUDA ops ran on (see jupyter_hvd.join)."""
    return core.join()
