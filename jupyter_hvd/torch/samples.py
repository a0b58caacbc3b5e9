"""How many samples a training step saw, for the monitor: DistributedOptimizer.step() has no batch size.

A global forward pre-hook notes the first module in training mode that runs after a step and holds a
parameter some DistributedOptimizer trains (the outermost model: its pre-hook runs before its children's;
a reference or teacher model left in training mode is passed over), and adds up the leading dimension of
its first tensor argument on each of its calls, so gradient accumulation over several forward passes
counts them all.
Under ``torch.compile`` the hook does nothing while TorchDynamo traces a module's calls (it would
otherwise trace this module's globals into the graph, which it refuses): the wrapper that
``torch.compile(model)`` returns runs eagerly, so it is the outermost module, and the one counted. A
model compiled in place (``model.compile()``) runs even its own hooks inside the compiled code, so
its samples are not counted. Forward passes made before the engine restarted (a failed %%hvd cell's)
belong to no step: the first training module to run after the restart is noted afresh.
"""
import warnings
from typing import Any, Iterable, Optional

import torch
from torch.utils.weak import WeakIdKeyDictionary

from ..basics import engine_run
from .eager import dynamo_tracing

_hook: Optional[Any] = None
_root: Optional[torch.nn.Module] = None
_samples = 0
_run = 0  # the engine run in which _root was noted
_trained = WeakIdKeyDictionary()  # the parameters of every DistributedOptimizer (the values mean nothing)


def _is_trained(module: torch.nn.Module) -> bool:
    return any(p in _trained for p in module.parameters())


def _pre_hook(module: torch.nn.Module, args: tuple) -> None:
    global _root, _samples, _run
    if not module.training or dynamo_tracing():
        return
    if _root is None or _run != engine_run():
        if not _is_trained(module):
            return
        _root, _samples, _run = module, 0, engine_run()
    if module is _root and args and isinstance(args[0], torch.Tensor) and args[0].dim():
        _samples += args[0].shape[0]


def watch(parameters: Iterable[torch.Tensor]) -> None:
    """Count the samples of modules that hold any of ``parameters`` (each DistributedOptimizer gives its own;
    the hook is installed once per process)."""
    global _hook
    _trained.update((p, True) for p in parameters)
    if _hook is None:
        _hook = torch.nn.modules.module.register_module_forward_pre_hook(_pre_hook)
    # torch.compile(model) warns of any global hook that it fires for its wrapper too; this one expects
    # that (the wrapper is the module it counts). Again on each call: a caller's catch_warnings (pytest
    # wraps every test in one) drops the filter at its end; an identical filter replaces the old one.
    warnings.filterwarnings("ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks",
                            category=UserWarning)


def take() -> int:
    """The samples seen since the last call, and start counting the next step's."""
    global _root, _samples
    samples = _samples if _run == engine_run() else 0
    _root, _samples = None, 0
    return samples
