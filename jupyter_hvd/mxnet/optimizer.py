"""Data-parallel training for MXNet: DistributedOptimizer wraps an Optimizer, DistributedTrainer is a Trainer.

Both sum each gradient over the ranks with asynchronous in-place allreduces (so communication
overlaps the rest of backward) and, as horovod.mxnet does on CPU, fold the 1 / size of the average
into the optimizer's gradient rescaling instead of spending a pass over every gradient on it.
"""
import warnings
from collections import OrderedDict, defaultdict
from typing import Any, Dict, Optional, Sequence, Union

import mxnet as mx
import numpy as np

from ..agreement import digest, ranks_agree, require_same_making, warn_apart, warn_replaced
from ..basics import engine_run, rank
from ..errors import HorovodInternalError
from ..groups import split_list
from ..monitor.samples import trainer_step
from ..ops import Max, allreduce
from ..optimizer_arguments import check_count, check_predivide_factor
from ..other_framework import other_framework_hint
from ..process_sets import ProcessSet, global_process_set, require_ranks
from .compression import Compression, Compressor
from .errors import as_mxnet_error
from .functions import broadcast_object, broadcast_tensors
from .mpi_ops import Sum, _require_init, allreduce_, grouped_allreduce_, mxnet_errors


def _average_factor(gradient_predivide_factor: float, process_set: ProcessSet, user: str) -> float:
    """What the optimizer's rescaling takes on to turn the sum of prescaled gradients into their average.

    A set of one rank skips the allreduce (and with it the 1 / gradient_predivide_factor prescale).
    """
    n = require_ranks(process_set, user).size()
    return gradient_predivide_factor / n if n > 1 else 1.0


def _check_arguments(what: str, gradient_predivide_factor: Any, num_groups: Any) -> None:
    check_predivide_factor(what, gradient_predivide_factor)
    check_count(what, "num_groups", num_groups, 0)


def _agree(what: str, error: Optional[BaseException], arguments: Optional[dict], params: Optional[list],
           process_set: ProcessSet) -> None:
    """Did every member of ``process_set`` make this optimizer or trainer alike (see require_same_making)? Ranks
    that made it with other arguments or trainable parameters would wait for each other's allreduces."""
    if not process_set.included() or process_set.size() == 1:
        return
    # The allreduces are named by the parameters' places in the list, whatever their names on each rank.
    trained = None if params is None else {i: p.name for i, p in enumerate(params) if p.grad_req != "null"}
    try:
        require_same_making(what, error, arguments, trained, process_set, "give every rank the same parameters, with "
                            "grad_req 'null' on the same ones, before making it")
    except HorovodInternalError as e:  # a rank that failed to make it (PeerArgumentError), or the engine's end
        raise as_mxnet_error(e) from e


def _state_arrays(state: Any) -> list:
    """The NDArrays of one parameter's optimizer state: none, one, or (nested) tuples of them."""
    if isinstance(state, mx.nd.NDArray):
        return [state]
    if isinstance(state, (tuple, list)):
        return [a for s in state for a in _state_arrays(s)]
    return []


class DistributedOptimizer(mx.optimizer.Optimizer):
    """Wraps ``optimizer`` so every update first sums its gradients over the ranks of ``process_set``.

    Gradients are scaled by 1 / gradient_predivide_factor before the sum, and the wrapped optimizer's
    rescale_grad is multiplied by gradient_predivide_factor / size once, here. Attribute reads fall
    through to the wrapped optimizer, writes stay on the wrapper (as in Horovod): with gluon.Trainer,
    whose batch-size rescaling writes rescale_grad, prefer DistributedTrainer.
    """

    def __init__(self, optimizer: mx.optimizer.Optimizer, gradient_predivide_factor: float = 1.0,
                 num_groups: int = 0, process_set: ProcessSet = global_process_set):
        _require_init()
        require_ranks(process_set, "DistributedOptimizer")  # a bad set: no other rank to tell
        error = None
        try:
            _check_arguments("DistributedOptimizer", gradient_predivide_factor, num_groups)
            if not isinstance(optimizer, mx.optimizer.Optimizer):
                raise TypeError(f"DistributedOptimizer: expected an mxnet.optimizer.Optimizer, got "
                                f"{type(optimizer).__name__}{other_framework_hint(optimizer, __package__)}")
        except Exception as e:  # told to the other ranks, whose optimizers then fail too
            error = e
        arguments = None if error else {"gradient_predivide_factor": float(gradient_predivide_factor),
                                        "num_groups": num_groups}
        _agree("DistributedOptimizer", error, arguments, None, process_set)
        if error is not None:
            raise error
        self._optimizer = optimizer
        self._gradient_predivide_factor = gradient_predivide_factor
        self._average_factor = _average_factor(gradient_predivide_factor, process_set, "DistributedOptimizer")
        self._optimizer.rescale_grad *= self._average_factor
        self._num_groups = num_groups
        self._process_set = process_set
        self._made_in_run = engine_run()  # a later run's check of the ranks' parameters repairs rather than warns
        self._checked_run: Optional[int] = None  # the run whose first updates were compared, and what they found:
        self._checked: set = set()  # the parameter indices compared in that run
        self._told = False  # whether this rank was warned in that run

    def __getattr__(self, item: str) -> Any:
        if item == "_optimizer":  # not yet set (e.g. while unpickling): no recursion
            raise AttributeError(item)
        return getattr(self._optimizer, item)

    def unwrap(self) -> mx.optimizer.Optimizer:
        """The wrapped optimizer, with the averaging factor this wrapper folded into it taken out again."""
        self._optimizer.rescale_grad /= self._average_factor
        return self._optimizer

    def create_state(self, index: int, weight: mx.nd.NDArray) -> Any:
        """The wrapped optimizer's state for one weight."""
        return self._optimizer.create_state(index, weight)

    def create_state_multi_precision(self, index: int, weight: mx.nd.NDArray) -> Any:
        """The wrapped optimizer's (mixed-precision) state for one weight."""
        return self._optimizer.create_state_multi_precision(index, weight)

    def _do_allreduce(self, index: Any, grad: Any) -> None:
        if self._process_set.size() == 1:
            return
        prescale = 1.0 / self._gradient_predivide_factor
        if not isinstance(index, (tuple, list)):
            allreduce_(grad, name=str(index), prescale_factor=prescale, process_set=self._process_set, op=Sum)
        elif self._num_groups > 0:
            groups = zip(split_list(grad, self._num_groups), split_list(index, self._num_groups))
            for i, (grads, indices) in enumerate(g for g in groups if len(g[0])):
                grouped_allreduce_(list(grads), name=f"{indices[0]}:{indices[-1]}", priority=-i,
                                   prescale_factor=prescale, process_set=self._process_set, op=Sum)
        else:
            for i in range(len(index)):
                allreduce_(grad[i], name=str(index[i]), priority=-i, prescale_factor=prescale,
                           process_set=self._process_set, op=Sum)

    def update(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """Sum the gradient(s) over the ranks (asynchronously), then let the wrapped optimizer update."""
        if self._process_set.included():
            self._check_ranks(index, weight, state)
            self._do_allreduce(index, grad)
        self._optimizer.update(index, weight, grad, state)

    def update_multi_precision(self, index: Any, weight: Any, grad: Any, state: Any) -> None:
        """As update(), for the wrapped optimizer's mixed-precision path."""
        if self._process_set.included():
            self._check_ranks(index, weight, state)
            self._do_allreduce(index, grad)
        self._optimizer.update_multi_precision(index, weight, grad, state)

    def _check_ranks(self, index: Any, weight: Any, state: Any) -> None:
        """Do the ranks hold the same parameters (see ``jupyter_hvd.agreement``)? The wrapper sees one update call
        at a time (one parameter, or the few MXNet aggregates), never a whole step, so it asks at the first
        call of each parameter in a run: in the run the wrapper was made in it warns once if not; in a later
        one (after a failed cell) every rank takes the first rank's values of these parameters, their states
        and their update counts (Adam's bias correction and learning-rate schedules read them)."""
        several = isinstance(index, (tuple, list))
        indices = index if several else (index,)
        if self._checked_run == engine_run() and self._checked.issuperset(indices) or self._process_set.size() == 1:
            return
        if self._checked_run != engine_run():
            self._checked_run, self._checked, self._told = engine_run(), set(), False
        self._checked.update(indices)
        indices, weights, states = (list(index), list(weight), list(state)) if several else ([index], [weight], [state])
        name = f"DistributedOptimizer.{indices[0]}:{indices[-1]}"
        mine = digest(w.asnumpy() for w in weights)
        with mxnet_errors():
            if ranks_agree(mine, f"{name}.parameters", self._process_set):
                return
        if engine_run() == self._made_in_run:
            if not self._told:
                self._told = True
                warn_apart("hvd.broadcast_parameters(net.collect_params(), root_rank=0)")
            return
        self._take_first_ranks(name, indices, weights, states)
        if not self._told and digest(w.asnumpy() for w in weights) != mine:
            self._told = True
            warn_replaced(rank(), self._process_set.ranks[0])

    def _take_first_ranks(self, name: str, indices: list, weights: list, states: list) -> None:
        """Give every rank the first rank's values of these parameters, of their states and update counts."""
        root = self._process_set.ranks[0]
        arrays = weights + [a for s in states for a in _state_arrays(s)]
        broadcast_tensors([(a, f"{name}.restart.{k}") for k, a in enumerate(arrays)], root, self._process_set)
        optimizer = self._optimizer
        counts = ({i: optimizer._index_update_count.get(i) for i in indices}, optimizer.num_update)
        counts = broadcast_object(counts if rank() == root else None, root, name=f"{name}.restart.counts",
                                  process_set=self._process_set)
        for i, count in counts[0].items():
            if count is None:
                optimizer._index_update_count.pop(i, None)
            else:
                optimizer._index_update_count[i] = count
        optimizer.num_update = counts[1]

    def set_learning_rate(self, lr: float) -> None:
        """Set the wrapped optimizer's learning rate."""
        self._optimizer.set_learning_rate(lr)

    def set_lr_mult(self, args_lr_mult: Dict[Any, float]) -> None:
        """Set the wrapped optimizer's per-parameter learning-rate multipliers."""
        self._optimizer.set_lr_mult(args_lr_mult)

    def set_wd_mult(self, args_wd_mult: Dict[Any, float]) -> None:
        """Set the wrapped optimizer's per-parameter weight-decay multipliers."""
        self._optimizer.set_wd_mult(args_wd_mult)


class DistributedTrainer(mx.gluon.Trainer):
    """A gluon.Trainer that averages gradients over the ranks of ``process_set`` with allreduce.

    Gradients are scaled by 1 / gradient_predivide_factor, summed (optionally compressed to float16,
    and in ``num_groups`` fused groups), and the Trainer's rescaling takes gradient_predivide_factor /
    size on top of its 1 / batch_size. Several trainers in one program need distinct ``prefix`` values.
    """

    def __init__(self, params: Union[Dict[str, mx.gluon.Parameter], mx.gluon.ParameterDict,
                                     Sequence[mx.gluon.Parameter]],
                 optimizer: Union[str, mx.optimizer.Optimizer], optimizer_params: Optional[dict] = None,
                 compression: type = Compression.none, gradient_predivide_factor: float = 1.0,
                 prefix: Optional[str] = None, num_groups: int = 0, process_set: ProcessSet = global_process_set):
        _require_init()
        require_ranks(process_set, "DistributedTrainer")  # a bad set: no other rank to tell
        error = None
        try:
            _check_arguments("DistributedTrainer", gradient_predivide_factor, num_groups)
            if prefix is not None and not isinstance(prefix, str):
                raise ValueError(f"prefix must be a string, got {type(prefix).__name__}")
            if isinstance(optimizer, DistributedOptimizer):
                optimizer = optimizer.unwrap()
                warnings.warn("DistributedTrainer does not take DistributedOptimizer as its optimizer. "
                              "We have unwrapped it for you.")
            # The same parameter order on every rank, whatever order the caller listed them in.
            if isinstance(params, dict):
                params = OrderedDict(params)
            elif isinstance(params, (list, tuple)):
                params = sorted(params, key=lambda p: p.name)
            super().__init__(params, optimizer, optimizer_params=optimizer_params, kvstore=None)
        except Exception as e:  # told to the other ranks, whose trainers then fail too
            error = e
        # The check is a blocking collective: trainers are made in the same order on every rank (see the README).
        arguments = None if error else {
            "prefix": prefix or "", "gradient_predivide_factor": float(gradient_predivide_factor),
            "num_groups": num_groups, "compression": getattr(compression, "__name__", type(compression).__name__)}
        _agree("DistributedTrainer", error, arguments, None if error else self._params, process_set)
        if error is not None:
            raise error
        self._compression: Compressor = compression
        self._process_set = process_set
        self._gradient_predivide_factor = gradient_predivide_factor
        self._scale *= _average_factor(gradient_predivide_factor, process_set, "DistributedTrainer")
        self._prefix = prefix or ""
        self._num_groups = num_groups
        self._made_in_run = engine_run()  # a later run's check of the ranks' parameters repairs rather than warns
        self._checked_run: Optional[int] = None  # the ranks' parameters are compared once in each run

    def step(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        """Allreduce the gradients and update the parameters (``batch_size``: this rank's samples)."""
        super().step(batch_size, ignore_stale_grad)
        trainer_step(batch_size)

    def update(self, batch_size: int, ignore_stale_grad: bool = False) -> None:
        """Update the parameters from already-reduced gradients (after allreduce_grads())."""
        super().update(batch_size, ignore_stale_grad)
        trainer_step(batch_size)

    def _allreduce_grads(self) -> None:
        if self._process_set.size() == 1 or not self._process_set.included():
            return
        if self._checked_run != engine_run():
            self._checked_run = engine_run()
            self._check_ranks()
        prescale = 1.0 / self._gradient_predivide_factor
        # (parameter index, the tensor to send, its decompression context, the gradient)
        entries = []
        for i, param in self._agree_fresh():
            grad = param.list_grad()[0]
            sent, ctx = self._compression.compress(grad)
            entries.append((i, sent, ctx, grad))
        if self._num_groups > 0:
            for g, group in enumerate(split_list(entries, self._num_groups)):
                by_dtype = defaultdict(list)  # one fused call per dtype
                for e in group:
                    by_dtype[e[1].dtype].append(e)
                for same in by_dtype.values():
                    grouped_allreduce_([e[1] for e in same],
                                       name=f"{self._prefix}{same[0][0]}:{self._prefix}{same[-1][0]}",
                                       priority=-g, prescale_factor=prescale, process_set=self._process_set, op=Sum)
        else:
            for i, sent, _, _ in entries:
                allreduce_(sent, name=self._prefix + str(i), priority=-i, prescale_factor=prescale,
                           process_set=self._process_set, op=Sum)
        if self._compression is not Compression.none:
            for _, sent, ctx, grad in entries:
                grad[:] = self._compression.decompress(sent, ctx)

    def _agree_fresh(self) -> list:
        """The trained parameters (index, parameter) whose gradient some rank's backward computed since its last
        update, as one process training on the union of the ranks' batches would see them: one allreduce (Max) of a
        byte per parameter. Where a rank's pass left one out (a branch or layer used on other ranks only), its
        gradient with grad_req 'write' still holds an earlier step's value: it sends zeros, and the parameter is
        marked fresh so that every rank updates it alike (gluon.Trainer's ``ignore_stale_grad=True`` would skip it
        on that rank alone, and without it that rank alone would raise). One stale on every rank is left out of the
        allreduces, and gluon.Trainer's update skips it or raises on every rank alike."""
        trained = [(i, p) for i, p in enumerate(self._params) if p.grad_req != "null"]
        mine = np.array([p.list_data()[0]._fresh_grad for _, p in trained], dtype=np.uint8)
        with mxnet_errors():
            agreed = allreduce(mine, op=Max, name=f"{self._prefix}DistributedTrainer.fresh",
                               process_set=self._process_set)
        fresh = []
        for (i, param), here, anywhere in zip(trained, mine, agreed):
            if anywhere and not here:
                if param.grad_req == "write":
                    param.list_grad()[0][:] = 0
                param.list_data()[0]._fresh_grad = True
            if anywhere:
                fresh.append((i, param))
        return fresh

    def _check_ranks(self) -> None:
        """Do the ranks hold the same trained parameters (see ``jupyter_hvd.agreement``)? In the run the trainer was
        made in, warn if not; in a later one (after a failed cell), give every rank the first rank's parameters
        and optimizer state. Every rank decides alike: they all restart the engine together."""
        mine = self._digest()
        with mxnet_errors():
            if ranks_agree(mine, f"{self._prefix}DistributedTrainer.parameters", self._process_set):
                return
        if engine_run() == self._made_in_run:
            warn_apart("hvd.broadcast_parameters(net.collect_params(), root_rank=0)")
            return
        root = self._process_set.ranks[0]
        broadcast_tensors([(p.data(), f"{self._prefix}DistributedTrainer.restart.{i}")
                           for i, p in enumerate(self._params)], root, self._process_set)
        ours = self._updaters[0].get_states(dump_optimizer=True) if rank() == root else None
        states = broadcast_object(ours, root, name=f"{self._prefix}DistributedTrainer.restart.states",
                                  process_set=self._process_set)
        if rank() == root:
            return
        for updater in self._updaters:  # as gluon.Trainer.load_states does with a file's states
            updater.set_states(states)
            updater.optimizer = self._updaters[0].optimizer
        self._optimizer = self._updaters[0].optimizer
        self._optimizer.param_dict = dict(enumerate(self._params))
        if self._digest() != mine:
            warn_replaced(rank(), root)

    def _digest(self) -> bytes:
        """The trained parameters' digest. Those with ``grad_req='null'`` are left out: BatchNorm's running mean
        and variance are updated by each rank's own forward passes, so they differ between ranks by design."""
        return digest(p.data().asnumpy() for p in self._params if p.grad_req != "null")
