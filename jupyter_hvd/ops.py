"""Collective operations on host arrays (numpy or DLPack), with Horovod's names and defaults."""
import numbers
import operator
import warnings
from typing import Any, Callable, List, Optional, Sequence

import numpy as np

from . import _C
from ._C import OpType, ReduceOp
from .arrays import as_array, as_group
from .dtypes import CODES, dtype_code
from .gpu import DeviceArray
from .handles import Handle, release_orphans, wait_for_result
from .naming import engine_name, group_names, prefixed_name, restart as restart_names
from .process_sets import ProcessSet, global_process_set, set_id

# Horovod's reduce-op constants: plain ints with Horovod's values, which are the engine's codes (hvd::ReduceOp).
Average, Sum, Adasum, Min, Max, Product = (int(r) for r in (ReduceOp.Average, ReduceOp.Sum, ReduceOp.Adasum,
                                                             ReduceOp.Min, ReduceOp.Max, ReduceOp.Product))
_ENGINE_OPS = [r for r in ReduceOp if r != ReduceOp.Adasum]  # Adasum holds Horovod's number only: refused by name
_REDUCE_OPS = frozenset(int(r) for r in _ENGINE_OPS)
_OP_NAMES = ", ".join(f"hvd.{r.name}" for r in _ENGINE_OPS)

# The engine's op codes (hvd::OpType), as _C.submit and OpSpec take them.
ALLREDUCE, ALLGATHER, BROADCAST, ALLTOALL, REDUCESCATTER, BARRIER, JOIN = (
    int(t) for t in (OpType.allreduce, OpType.allgather, OpType.broadcast, OpType.alltoall, OpType.reducescatter,
                     OpType.barrier, OpType.join))
_GROUP_OPS = {"allreduce": ALLREDUCE, "allgather": ALLGATHER, "reducescatter": REDUCESCATTER}  # the grouped ones


def resolve_op(average: Optional[bool], op: Optional[int], default: int = Average, stacklevel: int = 3) -> int:
    """Horovod's op/average arguments to one reduce op; average= still works but warns (at ``stacklevel``: by
    default, where the caller of resolve_op's caller is)."""
    if average is not None:
        if op is not None:
            raise ValueError("pass either op= or the deprecated average=, not both")
        warnings.warn("average= is deprecated; use op=hvd.Average or op=hvd.Sum", DeprecationWarning,
                      stacklevel=stacklevel)
        return Average if average else Sum
    op = default if op is None else op
    if type(op) is not int:  # a numpy integer or an IntEnum is one; 1.0 and True are not
        if isinstance(op, bool) or not isinstance(op, numbers.Integral):
            raise ValueError(f"unknown reduce op {op!r}; use {_OP_NAMES}")
        op = int(op)
    if op == Adasum:
        raise NotImplementedError("Adasum is not supported by jupyter_hvd; use op=hvd.Average")
    if op not in _REDUCE_OPS:
        raise ValueError(f"unknown reduce op {op!r}; use {_OP_NAMES}")
    return op


def enqueue(op: int, kind: str, arrs: Sequence[Any], outs: Sequence[Any], names: Sequence[Optional[str]],
            process_set: ProcessSet, finishes: Sequence[Callable[[Any], Any]], *, group: bool = False,
            reduce: int = Sum, root_rank: int = -1, prescale: float = 1.0, postscale: float = 1.0,
            splits: Sequence[int] = (), wait: bool = False) -> Any:
    """Queues one operation per array of ``arrs``, all together (a group fuses); ``outs`` holds where each
    result goes (None: the engine allocates it) and ``finishes`` how each is returned. Returns a Handle, or
    with ``wait`` the result itself: a blocking call makes no handle. The checks of dtypes, reduction and
    names, and the engine entries, are _C.submit's (csrc/submit.cc), with this package's rules below."""
    pid = set_id(process_set)
    release_orphans()
    if group and not arrs:  # an empty group: a call the others' calls of the group meet, under its one name
        natives = _C.submit_empty_group(kind, names[0], pid, wait)
    else:
        natives = _C.submit(op, kind, arrs, outs, names, pid, reduce, root_rank, prescale, postscale, splits, wait)
    if wait:
        try:
            return wait_for_result(natives, (arrs, outs), finishes, group)
        except BaseException:
            del natives  # not kept by the error's traceback (see Handle)
            raise
    return Handle(natives, (arrs, outs), finishes, group)


def refuse(op: int, kind: str, names: Sequence[Optional[str]], process_set: ProcessSet, error: BaseException) -> None:
    """This rank's call of ``op`` failed its checks before reaching the engine (``error``, which the caller then
    raises): the other members of ``process_set`` are told, so that their operations of these ``names`` fail
    too, saying why, instead of waiting for this rank; unnamed ones take their numbers, so that the ranks'
    numbering stays in step. Returns once every member has reached the op, so the names are free again.
    _C.submit does the same for the checks it makes (csrc/submit.cc)."""
    try:
        _C.refuse(op, kind, list(names), set_id(process_set), str(error))
    except (TypeError, ValueError):  # a bad name or process set, or no engine: nothing to tell; ``error`` stands
        pass


def refuse_prefixed(op: int, kind: str, prefix: Optional[str], name: Optional[str], n: int, group: bool,
                    process_set: ProcessSet, error: BaseException) -> None:
    """refuse() for a call of ``n`` tensors under ``name``, named as it names them: ``name``, or ``name.i`` in a
    ``group``; a framework API's, with its ``prefix`` first (``prefix.name``; see naming.prefixed_name)."""
    try:
        given = name if prefix is None else prefixed_name(prefix, name)
        names = group_names(kind, given, n, set_id(process_set)) if group else [given]
    except (TypeError, ValueError):  # a bad name or process set: nothing to tell the others under
        return
    refuse(op, kind, names, process_set, error)


def checked_op(average: Optional[bool], op: Optional[int], process_set: ProcessSet, kind: str, name: Optional[str],
               n: int = 1, group: bool = False, prefix: Optional[str] = None) -> int:
    """resolve_op for a user's allreduce call of ``kind`` on ``n`` tensors under ``name`` (as refuse_prefixed
    names them): where the op is refused, the set's other members are told first, so that their calls fail
    too, saying why, rather than wait for this rank. Call it from the API function the user called."""
    try:
        return resolve_op(average, op, stacklevel=4)
    except Exception as e:
        refuse_prefixed(ALLREDUCE, kind, prefix, name, n, group, process_set, e)
        raise


# What _C.submit takes from Python: each numpy dtype's engine code, automatic names, and what a GPU tensor is.
_C.set_python_rules(CODES, dtype_code, engine_name, DeviceArray)


def group_call(tensors: Any, what: str, name: Optional[str], process_set: ProcessSet, prefixed: bool = False,
               kind: Optional[str] = None) -> list:
    """A grouped call's tensors, as a list (arrays.as_group). Where they are no list, the TypeError is told to the
    set's other members first (refuse), under the name the group's first tensor takes, so that their calls of the
    group fail too. ``what`` is the call (``grouped_allreduce_async_``, ...), whose unnamed tensors are numbered
    as ``kind`` (default: ``what`` less ``_async``); ``prefixed``: named as the frameworks' APIs name them
    (``allreduce.name``)."""
    try:
        return as_group(tensors, what)
    except TypeError as e:
        kind = kind or what.replace("_async", "")
        word = kind.replace("grouped_", "").rstrip("_")
        try:
            given = prefixed_name(word, name) if prefixed else name
            first = group_names(kind, given, 0, set_id(process_set))
        except (TypeError, ValueError):  # a bad name or process set: nothing to tell the others under
            raise e from None
        refuse(_GROUP_OPS[word], kind, first, process_set, e)
        raise


def _group(kind: str, name: Optional[str], tensors: Sequence[Any], process_set: ProcessSet) -> List[str]:
    """The engine names of a grouped call of ``kind`` on ``tensors`` under ``name`` (naming.group_names)."""
    return group_names(kind, name, len(tensors), set_id(process_set))


def _engine_output(arr: Any) -> Callable[[Any], Any]:
    """Wraps the engine-allocated result without a copy (the view keeps the handle alive)."""
    if isinstance(arr, DeviceArray):
        return arr.wrap_output
    dtype = arr.dtype
    return lambda native: native.output().view(dtype).reshape(native.output_shape)


def _output_like(arr: Any, out: Any) -> tuple:
    """Where an op writes a result shaped like its input, and how the handle returns it: ``out``
    when given (in place), else a new array (a GPU tensor's comes from the engine). A host array's
    finish is None: the handle returns the output array itself."""
    if type(arr) is np.ndarray:  # the usual case first; np.empty is faster than np.empty_like
        return (np.empty(arr.shape, arr.dtype) if out is None else out), None
    if isinstance(arr, DeviceArray):
        if out is None:
            out = arr.empty_like()  # CuPy: from its memory pool; others: the engine allocates
        return (None, arr.wrap_output) if out is None else (out, lambda _: out.source)
    return (np.empty_like(arr) if out is None else out), None  # a subclass stays one


def allreduce_arrays(tensors: Sequence[Any], in_place: bool, kind: str, names: Sequence[Optional[str]], op: int,
                     prescale: float, postscale: float, process_set: ProcessSet, group: bool,
                     out: Optional[Sequence[Any]] = None, wait: bool = False) -> Any:
    """The one path of every allreduce form of host and DLPack arrays: ``tensors`` reduced in place, or
    into new arrays (``out``'s when given), under the engine names ``names``; a Handle, or with ``wait``
    the result (a group's: the list of results), with no handle made."""
    arrs, outs, finishes = [], [], []
    try:
        if out is not None and len(out) != len(tensors):
            raise ValueError(f"{kind}: out= needs one array per tensor, got {len(out)} for {len(tensors)}")
        for i, t in enumerate(tensors):
            arr = as_array(t, kind, in_place)
            given = arr if in_place else None if out is None else _given_output(out[i], arr, kind)
            o, finish = _output_like(arr, given)
            arrs.append(arr)
            outs.append(o)
            finishes.append(finish)
    except Exception as e:
        refuse(ALLREDUCE, kind, names, process_set, e)
        raise
    return enqueue(ALLREDUCE, kind, arrs, outs, names, process_set, finishes, group=group, reduce=op,
                   prescale=prescale, postscale=postscale, wait=wait)


def _given_output(out: Any, arr: Any, kind: str) -> Any:
    """The caller's ``out=`` array for ``arr``'s result: writable, contiguous, and of its shape and dtype."""
    o = as_array(out, f"{kind} out=", True)
    if isinstance(o, DeviceArray) != isinstance(arr, DeviceArray) or tuple(o.shape) != tuple(arr.shape) \
            or np.dtype(o.dtype) != np.dtype(arr.dtype):
        raise ValueError(f"{kind}: out= must be a {np.dtype(arr.dtype)} array of shape {tuple(arr.shape)} on the "
                         f"input's device, got {np.dtype(o.dtype)} {tuple(o.shape)}")
    return o


def allreduce_async(tensor: Any, average: Optional[bool] = None, name: Optional[str] = None,
                    op: Optional[int] = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                    process_set: ProcessSet = global_process_set, out: Any = None) -> Handle:
    """Start an allreduce; the handle's wait() returns the reduced array: ``out`` when given (an array of
    the input's shape and dtype to write the result into, an extension of Horovod's API), else a new one."""
    op = checked_op(average, op, process_set, "allreduce", name)
    return allreduce_arrays([tensor], False, "allreduce", [name], op, prescale_factor, postscale_factor,
                            process_set, False, None if out is None else [out])


def allreduce(tensor: Any, average: Optional[bool] = None, name: Optional[str] = None, op: Optional[int] = None,
              prescale_factor: float = 1.0, postscale_factor: float = 1.0,
              process_set: ProcessSet = global_process_set, out: Any = None) -> np.ndarray:
    """Reduce ``tensor`` over the ranks of ``process_set`` (default op: Average), into ``out`` if given."""
    op = checked_op(average, op, process_set, "allreduce", name)
    return allreduce_arrays([tensor], False, "allreduce", [name], op, prescale_factor, postscale_factor,
                            process_set, False, None if out is None else [out], wait=True)


def allreduce_async_(tensor: np.ndarray, average: Optional[bool] = None, name: Optional[str] = None,
                     op: Optional[int] = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                     process_set: ProcessSet = global_process_set) -> Handle:
    """Start an in-place allreduce of ``tensor``."""
    op = checked_op(average, op, process_set, "allreduce_", name)
    return allreduce_arrays([tensor], True, "allreduce_", [name], op, prescale_factor, postscale_factor,
                            process_set, False)


def allreduce_(tensor: np.ndarray, average: Optional[bool] = None, name: Optional[str] = None,
               op: Optional[int] = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
               process_set: ProcessSet = global_process_set) -> np.ndarray:
    """Reduce ``tensor`` in place and return it."""
    op = checked_op(average, op, process_set, "allreduce_", name)
    return allreduce_arrays([tensor], True, "allreduce_", [name], op, prescale_factor, postscale_factor,
                            process_set, False, wait=True)


def grouped_allreduce_async(tensors: Sequence[Any], average: Optional[bool] = None, name: Optional[str] = None,
                            op: Optional[int] = None, prescale_factor: float = 1.0,
                            postscale_factor: float = 1.0,
                            process_set: ProcessSet = global_process_set,
                            out: Optional[Sequence[Any]] = None) -> Handle:
    """Start allreduces of several tensors as one group, which negotiates and fuses as one; the handle's
    wait() returns the reduced arrays in order (``out``'s, when given: one array per tensor)."""
    tensors = group_call(tensors, "grouped_allreduce_async", name, process_set)
    op = checked_op(average, op, process_set, "grouped_allreduce", name, len(tensors), True)
    names = _group("grouped_allreduce", name, tensors, process_set)
    return allreduce_arrays(tensors, False, "grouped_allreduce", names, op,
                            prescale_factor, postscale_factor, process_set, True, out)


def grouped_allreduce(tensors: Sequence[Any], average: Optional[bool] = None, name: Optional[str] = None,
                      op: Optional[int] = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                      process_set: ProcessSet = global_process_set, out: Optional[Sequence[Any]] = None) -> list:
    """Allreduce a list of tensors; returns the reduced arrays in order (into ``out``'s, when given)."""
    tensors = group_call(tensors, "grouped_allreduce", name, process_set)
    op = checked_op(average, op, process_set, "grouped_allreduce", name, len(tensors), True)
    names = _group("grouped_allreduce", name, tensors, process_set)
    return allreduce_arrays(tensors, False, "grouped_allreduce", names, op,
                            prescale_factor, postscale_factor, process_set, True, out,
                            wait=True)


def grouped_allreduce_async_(tensors: Sequence[np.ndarray], average: Optional[bool] = None,
                             name: Optional[str] = None, op: Optional[int] = None, prescale_factor: float = 1.0,
                             postscale_factor: float = 1.0,
                             process_set: ProcessSet = global_process_set) -> Handle:
    """Start in-place allreduces of several tensors as one group."""
    tensors = group_call(tensors, "grouped_allreduce_async_", name, process_set)
    op = checked_op(average, op, process_set, "grouped_allreduce_", name, len(tensors), True)
    names = _group("grouped_allreduce_", name, tensors, process_set)
    return allreduce_arrays(tensors, True, "grouped_allreduce_", names, op,
                            prescale_factor, postscale_factor, process_set, True)


def grouped_allreduce_(tensors: Sequence[np.ndarray], average: Optional[bool] = None, name: Optional[str] = None,
                       op: Optional[int] = None, prescale_factor: float = 1.0, postscale_factor: float = 1.0,
                       process_set: ProcessSet = global_process_set) -> list:
    """Allreduce a list of tensors in place."""
    tensors = group_call(tensors, "grouped_allreduce_", name, process_set)
    op = checked_op(average, op, process_set, "grouped_allreduce_", name, len(tensors), True)
    names = _group("grouped_allreduce_", name, tensors, process_set)
    return allreduce_arrays(tensors, True, "grouped_allreduce_", names, op,
                            prescale_factor, postscale_factor, process_set, True, wait=True)


def require_rows(tensors: Sequence[Any], kind: str) -> None:
    """ValueError for a 0-d tensor: ops that split or join along the first dimension need one (as in Horovod)."""
    if any(len(t.shape) == 0 for t in tensors):
        raise ValueError(f"{kind}: the tensor needs at least one dimension")


def _allgather(tensors: Sequence[Any], kind: str, names: Sequence[Optional[str]], process_set: ProcessSet,
               group: bool, wait: bool = False) -> Any:
    try:
        arrs = [as_array(t, kind) for t in tensors]
        require_rows(arrs, kind)
    except Exception as e:
        refuse(ALLGATHER, kind, names, process_set, e)
        raise
    return enqueue(ALLGATHER, kind, arrs, [None] * len(arrs), names, process_set,
                   [_engine_output(a) for a in arrs], group=group, wait=wait)


def allgather_async(tensor: Any, name: Optional[str] = None,
                    process_set: ProcessSet = global_process_set) -> Handle:
    """Start an allgather along the first dimension (which may differ per rank)."""
    return _allgather([tensor], "allgather", [name], process_set, False)


def allgather(tensor: Any, name: Optional[str] = None, process_set: ProcessSet = global_process_set) -> np.ndarray:
    """Concatenate every rank's ``tensor`` along dimension 0, in rank order."""
    return _allgather([tensor], "allgather", [name], process_set, False, wait=True)


def grouped_allgather_async(tensors: Sequence[Any], name: Optional[str] = None,
                            process_set: ProcessSet = global_process_set) -> Handle:
    """Start allgathers of several tensors as one group; the handle's wait() returns the list."""
    tensors = group_call(tensors, "grouped_allgather_async", name, process_set)
    names = _group("grouped_allgather", name, tensors, process_set)
    return _allgather(tensors, "grouped_allgather", names, process_set, True)


def grouped_allgather(tensors: Sequence[Any], name: Optional[str] = None,
                      process_set: ProcessSet = global_process_set) -> list:
    """Allgather a list of tensors."""
    tensors = group_call(tensors, "grouped_allgather", name, process_set)
    names = _group("grouped_allgather", name, tensors, process_set)
    return _allgather(tensors, "grouped_allgather", names, process_set, True, wait=True)


def check_root(root_rank: int, process_set: ProcessSet, what: str) -> int:
    """``root_rank`` as an int (anything with ``__index__``, as Horovod's binding takes: a numpy integer, a torch
    integer tensor of one element such as an argmax; not a bool); TypeError or ValueError unless it is a rank of
    ``process_set``."""
    try:
        if isinstance(root_rank, bool):
            raise TypeError
        root = operator.index(root_rank)
    except TypeError:
        raise TypeError(f"{what}: root_rank must be an int, got {type(root_rank).__name__}") from None
    if root not in (process_set.ranks or ()):  # None: a communicator's set not yet registered
        raise ValueError(f"{what}: root_rank {root} is not a rank of {process_set}")
    return root


def _broadcast(tensor: Any, root_rank: int, name: Optional[str], process_set: ProcessSet, in_place: bool,
               wait: bool = False) -> Any:
    try:
        arr = as_array(tensor, "broadcast_" if in_place else "broadcast", in_place)
        root = check_root(root_rank, process_set, "broadcast")
    except Exception as e:
        refuse(BROADCAST, "broadcast", [name], process_set, e)
        raise
    out, finish = _output_like(arr, arr if in_place else None)
    return enqueue(BROADCAST, "broadcast", [arr], [out], [name], process_set, [finish], root_rank=root, wait=wait)


def broadcast_async(tensor: Any, root_rank: int, name: Optional[str] = None,
                    process_set: ProcessSet = global_process_set) -> Handle:
    """Start a broadcast of ``root_rank``'s tensor (a global rank in ``process_set``)."""
    return _broadcast(tensor, root_rank, name, process_set, False)


def broadcast(tensor: Any, root_rank: int, name: Optional[str] = None,
              process_set: ProcessSet = global_process_set) -> np.ndarray:
    """Return ``root_rank``'s value of ``tensor`` on every rank."""
    return _broadcast(tensor, root_rank, name, process_set, False, wait=True)


def broadcast_async_(tensor: np.ndarray, root_rank: int, name: Optional[str] = None,
                     process_set: ProcessSet = global_process_set) -> Handle:
    """Start an in-place broadcast."""
    return _broadcast(tensor, root_rank, name, process_set, True)


def broadcast_(tensor: np.ndarray, root_rank: int, name: Optional[str] = None,
               process_set: ProcessSet = global_process_set) -> np.ndarray:
    """Overwrite ``tensor`` with ``root_rank``'s value and return it."""
    return _broadcast(tensor, root_rank, name, process_set, True, wait=True)


def _split_counts(splits: Any) -> list:
    """``splits`` as a list of ints; ValueError for anything but integers (Horovod takes int32 tensors)."""
    arr = np.asarray(splits.numpy() if hasattr(splits, "numpy") and not isinstance(splits, np.ndarray) else splits)
    if arr.size and arr.dtype.kind not in "iu":
        raise ValueError(f"alltoall: splits must be integers, got {arr.dtype}")
    if arr.ndim > 1:  # Horovod's "alltoall expects a 1D splits tensor"
        raise ValueError(f"alltoall: splits must be one count per rank (one dimension), got shape {arr.shape}")
    return [int(s) for s in arr.reshape(-1)]


def _received_rows(rows: list) -> np.ndarray:
    """The rows received from each rank: int32, as Horovod returns them, or int64 where one is past 2^31."""
    return np.asarray(rows, dtype=np.int32 if max(rows, default=0) < 2**31 else np.int64)


def _alltoall_splits(arr: Any, splits: Any, n: int) -> list:
    """The rows of ``arr`` each of the ``n`` members gets: [] for equal blocks, else ``splits`` checked."""
    require_rows([arr], "alltoall")
    if splits is None:
        if arr.shape[0] % n:
            raise ValueError(f"alltoall: first dimension {arr.shape[0]} is not divisible by {n} ranks; pass splits")
        return []
    split_list = _split_counts(splits)
    if len(split_list) != n or any(s < 0 for s in split_list) or sum(split_list) != arr.shape[0]:
        raise ValueError(f"alltoall: splits {split_list} must be {n} non-negative counts "
                         f"summing to the first dimension {arr.shape[0]}")
    return split_list


def _alltoall(tensor: Any, splits: Optional[Sequence[int]], name: Optional[str], process_set: ProcessSet,
              wait: bool = False) -> Any:
    try:
        arr = as_array(tensor, "alltoall")
        split_list = _alltoall_splits(arr, splits, process_set.size())
    except Exception as e:
        refuse(ALLTOALL, "alltoall", [name], process_set, e)
        raise
    want_splits = splits is not None

    def finish(native: Any) -> Any:
        out = _engine_output(arr)(native)
        return (out, _received_rows(native.received_splits)) if want_splits else out

    return enqueue(ALLTOALL, "alltoall", [arr], [None], [name], process_set, [finish], splits=split_list, wait=wait)


def alltoall_async(tensor: Any, splits: Optional[Sequence[int]] = None, name: Optional[str] = None,
                   process_set: ProcessSet = global_process_set) -> Handle:
    """Start an alltoall: rows splits[i] of ``tensor`` go to the i-th member of the set."""
    return _alltoall(tensor, splits, name, process_set)


def alltoall(tensor: Any, splits: Optional[Sequence[int]] = None, name: Optional[str] = None,
             process_set: ProcessSet = global_process_set) -> Any:
    """Scatter rows to every rank and gather theirs; with ``splits``, also the received splits."""
    return _alltoall(tensor, splits, name, process_set, wait=True)


def _reducescatter(tensors: Sequence[Any], kind: str, names: Sequence[Optional[str]], op: Optional[int],
                   prescale: float, postscale: float, process_set: ProcessSet, group: bool, wait: bool = False) -> Any:
    try:
        arrs = [as_array(t, kind) for t in tensors]
        op = resolve_op(None, op)
        if op not in (Sum, Average):
            raise ValueError(f"{kind} supports op=hvd.Sum or hvd.Average")
        require_rows(arrs, kind)
    except Exception as e:
        refuse(REDUCESCATTER, kind, names, process_set, e)
        raise
    return enqueue(REDUCESCATTER, kind, arrs, [None] * len(arrs), names, process_set,
                   [_engine_output(a) for a in arrs], group=group, reduce=op, prescale=prescale, postscale=postscale,
                   wait=wait)


def reducescatter_async(tensor: Any, op: Optional[int] = None, name: Optional[str] = None,
                        process_set: ProcessSet = global_process_set, prescale_factor: float = 1.0,
                        postscale_factor: float = 1.0) -> Handle:
    """Start a reducescatter: reduce, then rank i keeps the i-th block of rows."""
    return _reducescatter([tensor], "reducescatter", [name], op, prescale_factor, postscale_factor, process_set,
                          False)


def reducescatter(tensor: Any, op: Optional[int] = None, name: Optional[str] = None,
                  process_set: ProcessSet = global_process_set, prescale_factor: float = 1.0,
                  postscale_factor: float = 1.0) -> np.ndarray:
    """Reduce ``tensor`` over ranks and return this rank's block of rows (default op: Average)."""
    return _reducescatter([tensor], "reducescatter", [name], op, prescale_factor, postscale_factor, process_set,
                          False, wait=True)


def grouped_reducescatter_async(tensors: Sequence[Any], op: Optional[int] = None, name: Optional[str] = None,
                                process_set: ProcessSet = global_process_set, prescale_factor: float = 1.0,
                                postscale_factor: float = 1.0) -> Handle:
    """Start reducescatters of several tensors as one group; the handle's wait() returns the list."""
    tensors = group_call(tensors, "grouped_reducescatter_async", name, process_set)
    names = _group("grouped_reducescatter", name, tensors, process_set)
    return _reducescatter(tensors, "grouped_reducescatter", names, op, prescale_factor,
                          postscale_factor, process_set, True)


def grouped_reducescatter(tensors: Sequence[Any], op: Optional[int] = None, name: Optional[str] = None,
                          process_set: ProcessSet = global_process_set, prescale_factor: float = 1.0,
                          postscale_factor: float = 1.0) -> list:
    """Reducescatter a list of tensors."""
    tensors = group_call(tensors, "grouped_reducescatter", name, process_set)
    names = _group("grouped_reducescatter", name, tensors, process_set)
    return _reducescatter(tensors, "grouped_reducescatter", names, op, prescale_factor,
                          postscale_factor, process_set, True, wait=True)


def barrier(process_set: ProcessSet = global_process_set) -> None:
    """Return once every rank of ``process_set`` has called barrier(). Each rank's ops are negotiated in the
    order it submitted them, so the set's ops that every rank submitted before the barrier have run by then,
    and their names can be used again (a dropped optimizer's allreduces, say)."""
    arr = np.zeros(0, dtype=np.uint8)
    enqueue(BARRIER, "barrier", [arr], [None], [None], process_set, [lambda _: None], wait=True)


def join(process_set: ProcessSet = global_process_set) -> int:
    """Horovod's join: this rank has no more work in ``process_set``, and waits until every member has joined;
    returns the rank that joined last. Meanwhile it stands in for the others' allreduces (with zeros for Sum
    and Average, as in Horovod, and the op's identity for Min, Max and Product) and barriers, so ranks with
    fewer batches need not wait for the others; the others' other ops raise. For GPU tensors it stands in on
    the GPU its own GPU ops ran on (one must have run). Automatic names of the set count from 0 again
    afterwards (its ranks ran different numbers of unnamed ops)."""
    last = np.full(1, -1, dtype=np.int32)
    enqueue(JOIN, "join", [last], [last], [None], process_set, [lambda _: None], wait=True)
    restart_names(set_id(process_set))
    return int(last[0])
