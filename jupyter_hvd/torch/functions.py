"""Broadcasting model parameters and optimizer state between ranks."""
from typing import Any, Optional

import torch

from ..basics import rank
from ..objects import broadcast_object
from .mpi_ops import broadcast_async_


def broadcast_parameters(params: Any, root_rank: int, prefix: Optional[str] = None) -> None:
    """Overwrite every rank's tensors with ``root_rank``'s, in place: ``model.state_dict()``, a dict of
    tensors, ``model.named_parameters()`` or ``model.parameters()``. Use distinct ``prefix`` values when
    broadcasting several sets whose names could collide."""
    if prefix is not None and not isinstance(prefix, str):
        raise ValueError(f"prefix must be a string, got {type(prefix).__name__}")
    if isinstance(params, dict):
        items = sorted(params.items())
    elif isinstance(params, list) or hasattr(params, "__next__"):  # a list, or the generator named_parameters()
        items = [p if isinstance(p, tuple) else (None, p) for p in params]
    else:
        raise ValueError(f"invalid params of type: {type(params)}")
    # A tensor in another memory format (channels_last) goes as a contiguous copy, written back after.
    sent = [p if p.is_contiguous() else p.detach().contiguous() for _, p in items]
    handles = [broadcast_async_(t, root_rank, None if name is None else (prefix or "") + str(name))
               for (name, _), t in zip(items, sent)]
    for h in handles:
        h.wait()
    with torch.no_grad():
        for (_, p), t in zip(items, sent):
            if t is not p:
                p.copy_(t)


def to_host(value: Any) -> Any:
    """A state dict with its tensors moved to the host, so it unpickles on any rank's device."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: to_host(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_host(v) for v in value)
    return value


def broadcast_optimizer_state(optimizer: torch.optim.Optimizer, root_rank: int,
                              model: Optional[torch.nn.Module] = None) -> None:
    """Give every rank ``root_rank``'s optimizer state and hyper-parameters (learning rates, momentum
    buffers, step counts, ...). Works for every optimizer, L-BFGS included. ``model`` is accepted as
    Horovod's is (it names sparse parameters there); the whole state goes as it is, sparse or not."""
    state = to_host(optimizer.state_dict()) if rank() == root_rank else None
    state = broadcast_object(state, root_rank, name="broadcast_optimizer_state")
    if rank() != root_rank:
        optimizer.load_state_dict(state)
