"""TorchState: the elastic state of a PyTorch training run. Models, optimizers, learning-rate schedulers and
ElasticSamplers given to it are kept by handlers of their own (state_dict copies, broadcasts from rank 0); any
other value is a plain object of ``ObjectState``."""
import copy
from typing import Any, Dict, List, Optional, Tuple, Type

import torch

from ...basics import rank
from ...elastic import ObjectState
from ...objects import broadcast_object
from ..functions import broadcast_optimizer_state, broadcast_parameters
from .sampler import ElasticSampler


class StateHandler:
    """Keeps one value of a TorchState: ``save`` copies it, ``restore`` puts the copy back, ``sync`` gives every
    rank rank 0's."""

    def __init__(self, value: Any):
        self.value = value
        self.save()

    def save(self) -> None:
        self._saved = copy.deepcopy(self.value.state_dict())

    def restore(self) -> None:
        """Load a copy of the saved state: an optimizer's load_state_dict keeps the tensors it is given (its
        momentum buffers, say) and its next steps change them in place, which would change the saved state
        and leave a second restore of the same commit with a later one."""
        self.value.load_state_dict(copy.deepcopy(self._saved))

    def sync(self) -> None:
        self.value.load_state_dict(broadcast_object(self.value.state_dict()))

    def set_value(self, value: Any) -> None:
        """A new object in its place (``state.model = other``): kept from now on, and saved at once."""
        self.value = value
        self.save()


class ModelStateHandler(StateHandler):
    def sync(self) -> None:
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class OptimizerStateHandler(StateHandler):
    def sync(self) -> None:
        broadcast_optimizer_state(self.value, root_rank=0)


class SamplerStateHandler(StateHandler):
    """An ElasticSampler, by its state_dict (its epoch and count of processed samples); named as in Horovod, for
    registries built with set_handler_registry."""


# Learning-rate schedulers by their state_dict too (every one derives from LRScheduler since torch 2.0): Horovod
# 0.28 has no handler for them, so they went as plain objects, pickled, and each rank but rank 0 got a copy bound
# to a copy of its optimizer, whose learning rate nothing reads.
_SCHEDULER = getattr(torch.optim.lr_scheduler, "LRScheduler", torch.optim.lr_scheduler._LRScheduler)
_handler_registry: List[Tuple[Type, Type[StateHandler]]] = [
    (torch.nn.Module, ModelStateHandler),
    (torch.optim.Optimizer, OptimizerStateHandler),
    (_SCHEDULER, StateHandler),
    (ElasticSampler, SamplerStateHandler),
]


def get_handler_registry() -> List[Tuple[Type, Type[StateHandler]]]:
    """The (type, handler class) pairs TorchState looks its values up in, first match first."""
    return _handler_registry


def set_handler_registry(registry: List[Tuple[Type, Type[StateHandler]]]) -> None:
    global _handler_registry
    _handler_registry = registry


def _handler(value: Any) -> Optional[StateHandler]:
    for kind, handler in _handler_registry:
        if isinstance(value, kind):
            return handler(value)
    return None


class TorchState(ObjectState):
    """The state of a PyTorch training run: ``model``, ``optimizer`` and any keyword arguments, each an
    attribute of the same name (``state.epoch``, ``state.batch``...)."""

    def __init__(self, model: Optional[torch.nn.Module] = None, optimizer: Optional[torch.optim.Optimizer] = None,
                 **kwargs: Any):
        kwargs.update(model=model, optimizer=optimizer)
        self._handlers: Dict[str, StateHandler] = {}
        plain = {}
        for name, value in kwargs.items():
            handler = _handler(value)
            if handler is None:
                plain[name] = value
            else:
                self._handlers[name] = handler
                setattr(self, name, value)
        super().__init__(bcast_object=broadcast_object, get_rank=rank, **plain)

    def save(self) -> None:
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self) -> None:
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self) -> None:
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def __setattr__(self, name: str, value: Any) -> None:
        if name in getattr(self, "_handlers", {}) and hasattr(self, name):
            self._handlers[name].set_value(value)
        super().__setattr__(name, value)
