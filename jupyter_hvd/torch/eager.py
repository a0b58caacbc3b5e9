"""The engine's operations run eagerly under torch.compile. Dynamo, tracing a compiled function that calls a
collective, would run this package's code on fake tensors, which have no memory for the engine (an error,
not a graph break). Each function that hands tensors to the engine or waits for them breaks the graph
instead and runs as it does outside compilation, where the check costs one call that returns False."""
import functools
from typing import Any, Callable, TypeVar

import torch

F = TypeVar("F", bound=Callable[..., Any])

# False when run; Dynamo reads it as True. is_dynamo_compiling (torch 2.3 on) is cheaper than is_compiling; older
# torch has neither outside torch._dynamo, whose import takes a second: there the operations are not guarded.
_dynamo_tracing = getattr(torch.compiler, "is_dynamo_compiling", None) or \
    getattr(torch.compiler, "is_compiling", None) or (lambda: False)


def eager(fn: F) -> F:
    """``fn``, run outside Dynamo's graph when called from a compiled function."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        if _dynamo_tracing():  # Dynamo is loaded by then: disabling imports nothing
            return torch.compiler.disable(fn, recursive=True)(*args, **kwargs)
        return fn(*args, **kwargs)
    return run  # type: ignore[return-value]
