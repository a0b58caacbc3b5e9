"""Broadcasting model parameters and optimizer state between ranks."""
from typing import Any, Optional, Sequence, Tuple

import torch

from .. import objects
from ..agreement import refuse_names, require_same_names
from ..basics import rank
from ..errors import PeerArgumentError
from ..process_sets import ProcessSet, global_process_set
from .eager import eager
from .mpi_ops import broadcast_async_

# Horovod's torch module has them here; pickling and the engine's byte transfers stay out of compiled graphs
broadcast_object, allgather_object = eager(objects.broadcast_object), eager(objects.allgather_object)


@eager
def broadcast_parameters(params: Any, root_rank: int, prefix: Optional[str] = None) -> None:
    """Overwrite every rank's tensors with ``root_rank``'s, in place: ``model.state_dict()``, a dict of
    tensors, ``model.named_parameters()`` or ``model.parameters()``. Use distinct ``prefix`` values when
    broadcasting several sets whose names could collide."""
    try:
        named = _named_tensors(params, prefix)
    except (TypeError, ValueError) as e:
        refuse_names("broadcast_parameters", global_process_set, e)
        raise
    require_same_names([name for name, _ in named], "broadcast_parameters", root_rank, global_process_set)
    broadcast_tensors(named, root_rank)


def _named_tensors(params: Any, prefix: Optional[str]) -> list:
    """broadcast_parameters' (name, tensor) pairs: a dict's by key, a list's or a generator's in order (a name
    of None for a bare tensor), with ``prefix`` before each name."""
    if prefix is not None and not isinstance(prefix, str):
        raise ValueError(f"prefix must be a string, got {type(prefix).__name__}")
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, list) or hasattr(params, "__next__"):  # a list, or the generator named_parameters()
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError(f"invalid params of type: {type(params)}")
    for name, p in items:
        if not isinstance(p, torch.Tensor):
            raise TypeError(f"broadcast_parameters: {'a value' if name is None else repr(name)} is a "
                            f"{type(p).__name__}, not a torch.Tensor")
    return [(None if name is None else (prefix or "") + str(name), p) for name, p in items]


def broadcast_tensors(named: Sequence[Tuple[Optional[str], torch.Tensor]], root_rank: int,
                      process_set: ProcessSet = global_process_set) -> None:
    """Overwrite each (name, tensor) with ``root_rank``'s value, in place, all at once. A tensor in another
    memory format (channels_last) goes as a contiguous copy, written back after."""
    sent = [t if t.is_contiguous() else t.detach().contiguous() for _, t in named]
    handles = [broadcast_async_(s, root_rank, name, process_set) for (name, _), s in zip(named, sent)]
    for h in handles:
        h.wait()
    with torch.no_grad():
        for (_, t), s in zip(named, sent):
            if s is not t:
                t.copy_(s)


def load_root_state(optimizer: torch.optim.Optimizer, root_rank: int, name: str,
                    process_set: ProcessSet = global_process_set) -> None:
    """Load ``root_rank``'s ``state_dict()`` into ``optimizer`` on the other ranks of ``process_set``, into its
    own parameter-group dicts and state dict, as Horovod's assigns each value: a DistributedOptimizer shares them
    with the optimizer it wraps, on which a scheduler may have been made, and torch's load_state_dict makes new
    ones, which that scheduler would never see (its rank's learning rate then stayed where it was).

    A rank whose optimizer cannot take the root's state (another class, other parameter groups) raises why, and
    the others a PeerArgumentError naming it: Horovod's ranks wait for each other's broadcasts of the option
    names they lack, and torch would give an Adam the options of an SGD, to fail at its next step."""
    ours = type(optimizer).__name__  # a DistributedOptimizer's class bears the name of the class it wraps
    sent = (ours, _to_cpu(optimizer.state_dict())) if rank() == root_rank else None
    kind, state = broadcast_object(sent, root_rank, name=name, process_set=process_set)
    error = None
    if rank() != root_rank:
        try:
            if kind != ours:
                raise TypeError(f"{name}: rank {root_rank}'s optimizer is {kind} and this rank's is {ours} (make "
                                f"the same optimizer on every rank)")
            _load_in_place(optimizer, state)
        except Exception as e:  # told to the other ranks, whose calls then fail too
            error = e
    every = allgather_object(None if error is None else f"{type(error).__name__}: {error}", name=f"{name}.loaded",
                             process_set=process_set)
    if error is not None:
        raise error
    failed = [(r, why) for r, why in zip(process_set.ranks, every) if why is not None]
    if failed:
        raise PeerArgumentError(f"{name}: rank {failed[0][0]} could not load rank {root_rank}'s state: "
                                f"{failed[0][1]}")


def _load_in_place(optimizer: torch.optim.Optimizer, state: dict) -> None:
    """``optimizer.load_state_dict(state)``, keeping its own parameter-group dicts and state dict."""
    groups, states = optimizer.param_groups, optimizer.state
    optimizer.load_state_dict(state)
    for group, loaded in zip(groups, optimizer.param_groups):
        group.clear()
        group.update(loaded)
    states.clear()
    states.update(optimizer.state)
    optimizer.param_groups, optimizer.state = groups, states


def _to_cpu(value: Any) -> Any:
    """A state dict with its tensors moved to the host, so it unpickles on any rank's device."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(v) for v in value)
    return value


@eager
def broadcast_optimizer_state(optimizer: torch.optim.Optimizer, root_rank: int,
                              model: Optional[torch.nn.Module] = None) -> None:
    """Give every rank ``root_rank``'s optimizer state and hyper-parameters (learning rates, momentum
    buffers, step counts, ...). Works for every optimizer, L-BFGS included. ``model`` is accepted as
    Horovod's is (it names sparse parameters there); the whole state goes as it is, sparse or not."""
    load_root_state(optimizer, root_rank, "broadcast_optimizer_state")
