"""Running a collective's autograd Function only where autograd records it.

``Function.apply`` costs more than a small collective itself (its graph node, the checks of every output),
and gains nothing when no input needs a gradient, or under ``torch.no_grad()``: then the Function's forward
runs directly, on a context that drops what it would have saved for backward. The result is the same
tensor either way, with no ``grad_fn``.
"""
from typing import Any

import torch

from ..process_sets import ProcessSet


class _Unrecorded:
    """The context of a forward that autograd does not record: nothing of it is read again."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        pass

    def mark_non_differentiable(self, *tensors: torch.Tensor) -> None:
        pass


_UNRECORDED = _Unrecorded()

# The types of a collective's other arguments (names, ops, factors, ranks, splits, process sets), which
# are never tensors: isinstance(x, torch.Tensor) is slow when it is false (torch's metaclass), so these
# are passed over by their exact type.
_NOT_TENSORS = frozenset({type(None), str, int, float, bool, list, tuple, ProcessSet})


def call(function: Any, *args: Any) -> Any:
    """``function.apply(*args)`` where autograd records the call (grad mode is on and a tensor argument
    requires a gradient); otherwise the same forward, without the autograd bookkeeping."""
    if torch.is_grad_enabled():
        for a in args:
            if type(a) not in _NOT_TENSORS and isinstance(a, torch.Tensor) and a.requires_grad:
                return function.apply(*args)
    return function.forward(_UNRECORDED, *args)
