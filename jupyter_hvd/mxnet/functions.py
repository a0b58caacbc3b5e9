"""Broadcasting model parameters (including deferred-initialised ones) and Python objects; the barrier."""
import types
from typing import Any, Optional, Sequence, Tuple

import mxnet as mx

from .. import objects as core_objects
from .. import ops as core_ops
from ..agreement import refuse_names, require_same_names
from ..basics import size
from ..process_sets import ProcessSet, global_process_set
from . import bridge
from .mpi_ops import NDArray, broadcast_, mxnet_errors


def _broadcast_after_init(param: mx.gluon.Parameter, root_rank: int, name: str) -> None:
    """Make ``param`` broadcast its value from ``root_rank`` right after its (deferred) initialisation."""
    init_impl = param._init_impl

    def init_then_broadcast(self: mx.gluon.Parameter, *args: Any, **kwargs: Any) -> None:
        init_impl(*args, **kwargs)
        broadcast_(self.data(), root_rank=root_rank, name=name)

    param._init_impl = types.MethodType(init_then_broadcast, param)


def broadcast_parameters(params: Any, root_rank: int = 0, prefix: Optional[str] = None) -> None:
    """Overwrite every rank's parameters with ``root_rank``'s, asynchronously.

    ``params`` is a dict of NDArrays or Parameters, or a ParameterDict (``block.collect_params()``).
    Parameters whose initialisation is deferred are broadcast as soon as they are initialised (on the
    first forward pass). Each initialised one is first brought to MXNet's plain layout, waiting for its
    pending writers. Use distinct ``prefix`` values when broadcasting several sets.
    """
    try:
        items = _named_params(params, prefix)
    except (TypeError, ValueError) as e:
        refuse_names("broadcast_parameters", global_process_set, e)
        raise
    if size() == 1:
        return
    with mxnet_errors():
        require_same_names([name for name, _ in items], "broadcast_parameters", root_rank, global_process_set)
    tensors = []
    for name, p in items:
        if isinstance(p, mx.nd.NDArray):
            tensors.append((p, name))
            continue
        try:
            tensors.append((p.data(), name))
        except mx.gluon.parameter.DeferredInitializationError:
            _broadcast_after_init(p, root_rank, name)
    broadcast_tensors(tensors, root_rank)


def _named_params(params: Any, prefix: Optional[str]) -> list:
    """broadcast_parameters' (name, Parameter or NDArray) pairs, by key, with ``prefix`` before each name."""
    if prefix is not None and not isinstance(prefix, str):
        raise ValueError(f"prefix must be a string, got {type(prefix).__name__}")
    if not isinstance(params, (dict, mx.gluon.ParameterDict)):
        raise ValueError(f"invalid params of type: {type(params)}")
    given = sorted(params.items())
    for name, p in given:
        if not isinstance(p, (mx.gluon.Parameter, mx.nd.NDArray)):
            raise TypeError(f"broadcast_parameters: {name!r} is a {type(p).__name__}, not an NDArray or Parameter")
    return [((prefix or "") + str(name), p) for name, p in given]


def broadcast_tensors(named: Sequence[Tuple[NDArray, str]], root_rank: int,
                      process_set: ProcessSet = global_process_set) -> None:
    """Overwrite each (NDArray, name) with ``root_rank``'s value, asynchronously, each first brought to MXNet's
    plain layout (waiting for its pending writers)."""
    for tensor, name in named:
        bridge.to_default_layout(tensor)
        broadcast_(tensor, root_rank, name=name, process_set=process_set)


def broadcast_object(obj: Any, root_rank: int = 0, name: Optional[str] = None,
                     process_set: ProcessSet = global_process_set) -> Any:
    """``root_rank``'s picklable ``obj``, on every rank (synchronous)."""
    with mxnet_errors():
        return core_objects.broadcast_object(obj, root_rank, name, process_set)


def allgather_object(obj: Any, name: Optional[str] = None, process_set: ProcessSet = global_process_set) -> list:
    """The list of every rank's picklable ``obj``, in rank order (synchronous)."""
    with mxnet_errors():
        return core_objects.allgather_object(obj, name, process_set)


def barrier(process_set: ProcessSet = global_process_set) -> None:
    """Return once every rank of ``process_set`` has called barrier() (horovod.mxnet has it since after 0.28)."""
    with mxnet_errors():
        core_ops.barrier(process_set)
