"""The engine's operations run eagerly under torch.compile. Dynamo, tracing a compiled function that calls a
collective, would run this package's code on fake tensors, which have no memory for the engine (an error,
not a graph break). Each function that hands tensors to the engine or waits for them breaks the graph
instead and runs as it does outside compilation, where the check costs one call that returns False."""
import functools
import sys
from typing import Any, Callable, TypeVar

import torch

F = TypeVar("F", bound=Callable[..., Any])


def _dynamo_tracing_before_2_3() -> bool:
    """torch 2.1 and 2.2 answer only in torch._dynamo, whose import takes a second: nothing is compiled before
    it is imported."""
    dynamo = sys.modules.get("torch._dynamo")
    return dynamo is not None and dynamo.is_compiling()


# False when run; Dynamo reads it as True. is_dynamo_compiling (torch 2.3 on) is cheaper than is_compiling.
dynamo_tracing: Callable[[], bool] = getattr(torch.compiler, "is_dynamo_compiling", None) or \
    getattr(torch.compiler, "is_compiling", None) or _dynamo_tracing_before_2_3


def eager(fn: F) -> F:
    """``fn``, run outside Dynamo's graph when called from a compiled function."""
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        if dynamo_tracing():  # Dynamo is loaded by then: disabling imports nothing
            return torch.compiler.disable(fn, recursive=True)(*args, **kwargs)
        return fn(*args, **kwargs)
    return run  # type: ignore[return-value]
