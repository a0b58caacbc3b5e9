"""How many samples a training step saw, for the monitor: DistributedOptimizer.step() has no batch size.

A global forward pre-hook notes the first module in training mode that runs after a step (the outermost
model: its pre-hook runs before its children's) and adds up the leading dimension of its first tensor
argument on each of its calls, so gradient accumulation over several forward passes counts them all.
"""
from typing import Any, Optional

import torch

_hook: Optional[Any] = None
_root: Optional[torch.nn.Module] = None
_samples = 0


def _pre_hook(module: torch.nn.Module, args: tuple) -> None:
    global _root, _samples
    if not module.training:
        return
    if _root is None:
        _root = module
    if module is _root and args and isinstance(args[0], torch.Tensor) and args[0].dim():
        _samples += args[0].shape[0]


def watch() -> None:
    """Start counting (once per process)."""
    global _hook
    if _hook is None:
        _hook = torch.nn.modules.module.register_module_forward_pre_hook(_pre_hook)


def take() -> int:
    """The samples seen since the last call, and start counting the next step's."""
    global _root, _samples
    samples, _root, _samples = _samples, None, 0
    return samples
