"""DistributedOptimizer: averages gradients over the ranks while backward still runs.

Each parameter's allreduce starts from a hook as soon as its gradient is accumulated, so communication
overlaps the rest of the backward pass; step() waits for them, then lets the wrapped optimizer update.
Where that overlap cannot gain anything, the hooks only note the gradient ready and step() starts
the allreduces (overlaps_backward below).

Its first step() compares the ranks' parameters and warns if they differ (each rank made its own
model). Notebook use adds two things a script never meets. A cell that builds a DistributedOptimizer
may run again over the same model: a parameter's hook belongs to the newest optimizer over it (an
older one's is removed; that optimizer starts the parameter's allreduce in step() instead), so the two
never start the same allreduce twice. And a cell may fail or be interrupted mid-step: the engine
restarts at the next cell, and the optimizer drops what the failed run left (its handles, the passes
counted toward them) the first time it is used in the new run; its next step() compares the ranks'
parameters again (a step cut short may have updated some ranks only) and, where they differ, gives
every rank the first rank's parameters and optimizer state.
"""
import collections
import numbers
import os
import warnings
import weakref
from contextlib import contextmanager
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch.utils.weak import WeakIdKeyDictionary

from ..agreement import digest, ranks_agree, require_same_making, warn_apart, warn_replaced
from .. import _C
from .. import ops as core
from ..basics import engine_run, local_size, rank, size
from ..monitor.samples import trainer_step
from ..groups import split_list
from ..ops import resolve_op
from ..optimizer_arguments import check_count, check_predivide_factor
from ..other_framework import other_framework_hint
from ..process_sets import ProcessSet, global_process_set, require_ranks
from . import samples
from .compression import Compression, Compressor
from .eager import eager
from .functions import broadcast_tensors, load_root_state
from .mpi_ops import (Average, Handle, Max, Sum, allreduce, allreduce_async_, grouped_allreduce_async_,
                      sparse_allreduce_async)

Group = Tuple[torch.Tensor, ...]
_hooks = WeakIdKeyDictionary()  # parameter -> the gradient hook of the newest DistributedOptimizer over it
READY = object()  # in place of a handle: the gradient is ready, and synchronize() starts its allreduce
OVERLAP_VAR = "JUPYTER_HVD_OVERLAP"


def overlaps_backward() -> bool:
    """Whether the hooks start CPU gradients' allreduces during backward (JUPYTER_HVD_OVERLAP: 1 always, 0
    never, auto by default). Auto: unless the compute threads of the host's ranks (torch.get_num_threads()
    each) fill the cores they may use together: the engine threads then have no core of their own, and
    whatever they do during backward is taken from backward (at 2 ranks on 2 cores, one thread each, the
    training benchmark's small CNN trained 2.5-8% faster with the allreduces started in step()). CUDA
    gradients always start at once: the GPU computes, and their allreduces run on it."""
    setting = os.environ.get(OVERLAP_VAR, "").strip().lower() or "auto"  # set but empty: as unset
    if setting not in ("auto", "1", "0"):
        raise ValueError(f"{OVERLAP_VAR} must be auto, 1 or 0, got {setting!r}")
    if setting != "auto":
        return setting == "1"
    return local_size() * torch.get_num_threads() < _C.host_cores()


def _frozen(p: torch.Tensor) -> bool:
    """A parameter frozen since the wrap, with no gradient: left alone, as one process leaves it."""
    return p.grad is None and not p.requires_grad


def _place_name(group: int, index: int) -> str:
    """The allreduce name of a parameter not in named_parameters: its place in the parameter groups, alike on every
    rank (Horovod's naming)."""
    return f"allreduce.noname.{group}.{index}"


class _DistributedOptimizer(torch.optim.Optimizer):
    """The methods DistributedOptimizer adds to a copy of the wrapped optimizer's class."""

    def __init__(self, params: Any, named_parameters: Optional[Iterable[Tuple[str, torch.Tensor]]],
                 compression: Compressor, backward_passes_per_step: int, op: int, gradient_predivide_factor: float,
                 groups: Optional[Union[int, List[List[torch.Tensor]]]], sparse_as_dense: bool,
                 process_set: ProcessSet):
        super(self.__class__, self).__init__(params)
        self._compression = compression
        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [(_place_name(i, j), p) for i, group in enumerate(self.param_groups)
                                for j, p in enumerate(group["params"])]
        if any(not isinstance(p, tuple) for p in named_parameters):
            raise ValueError("named_parameters should be a sequence of tuples (name, parameter), usually produced "
                             "by model.named_parameters().")
        names = [n for n, _ in named_parameters]
        if dups := sorted(n for n, k in collections.Counter(names).items() if k > 1):
            raise ValueError(f"Parameter names in named_parameters must be unique. Found duplicates: {', '.join(dups)}")
        named_ids = {id(p) for _, p in named_parameters}
        unnamed = [id(p) for group in self.param_groups for p in group["params"] if id(p) not in named_ids]
        if unnamed:
            raise ValueError("named_parameters was specified, but one or more model parameters were not named. "
                             f"Python object ids: {', '.join(map(str, unnamed))}")
        self._parameter_names = {p: n for n, p in sorted(named_parameters, key=lambda item: item[0])}
        self.backward_passes_per_step = backward_passes_per_step
        self._allreduce_delay = {p: backward_passes_per_step for p in self._parameter_names}
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.sparse_as_dense = sparse_as_dense
        self.process_set = process_set
        self._handles: Dict[Any, Tuple[Optional[Handle], Any]] = {}
        self._run = engine_run()  # the engine run that self._handles and the pass counts belong to
        self._made_in_run = self._run  # a later run's check repairs rather than warns
        self._checked_run: Optional[int] = None  # the ranks' parameters are compared once in each run
        self._requires_update: set = set()
        self._hooked: List[torch.Tensor] = []  # _requires_update in name order, alike on every rank (_agree_gradients)
        self._synchronized = False
        self._should_synchronize = True
        self._groups = _check_groups(groups)
        self._p_to_group: Dict[torch.Tensor, Group] = {}
        self._group_counts: Dict[Group, int] = {}
        self._overlap = overlaps_backward()
        samples.watch(p for group in self.param_groups for p in group["params"])

    def load_state_dict(self, *args: Any, **kwargs: Any) -> None:
        """Load the wrapped optimizer's state, forgetting any allreduces in flight."""
        self._start_over()
        self._should_synchronize = True
        super(self.__class__, self).load_state_dict(*args, **kwargs)

    def _start_over(self) -> None:
        """Forget the allreduces in flight and the backward passes counted toward the next ones."""
        self._handles = {}
        self._synchronized = False
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        for g in self._group_counts:
            self._group_counts[g] = 0
        self._run = engine_run()

    def _check_run(self) -> None:
        """Start over if the engine has restarted since this step began (a failed cell's step is stale)."""
        if self._run != engine_run():
            self._start_over()

    def _check_ranks(self) -> None:
        """Do the ranks hold the same parameters (see ``jupyter_hvd.agreement``)? In the run the optimizer was
        made in, warn if not; in a later one (after a failed cell), give every rank the first rank's parameters
        and optimizer state. Every rank decides alike: they all restart the engine together."""
        params = list(self._parameter_names)  # in name order, alike on every rank
        mine = _digest(params)
        if ranks_agree(mine, "DistributedOptimizer.parameters", self.process_set):
            return
        if engine_run() == self._made_in_run:
            warn_apart("hvd.broadcast_parameters(model.state_dict(), root_rank=0)")
            return
        root = self.process_set.ranks[0]
        broadcast_tensors([(f"DistributedOptimizer.restart.{self._parameter_names[p]}", p) for p in params], root,
                          self.process_set)
        load_root_state(self, root, "DistributedOptimizer.restart.state", self.process_set)
        if _digest(params) != mine:
            warn_replaced(rank(), root)

    def set_backward_passes_per_step(self, passes: int) -> None:
        """Change how many backward passes accumulate before each allreduce."""
        check_count("set_backward_passes_per_step", "passes", passes, 1)
        self.backward_passes_per_step = passes
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = passes

    def _trainable(self) -> List[torch.Tensor]:
        return [p for group in self.param_groups for p in group["params"] if p.requires_grad]

    def _trained_names(self) -> Dict[Optional[str], Optional[str]]:
        return {name: name for name in (self._parameter_names.get(p) for p in self._trainable())}

    def _arguments(self) -> dict:
        """What the ranks must make alike (require_same_making): the arguments, a group list by its parameters'
        names."""
        groups = self._groups
        if isinstance(groups, list):
            groups = [[self._parameter_names.get(p) for p in g] for g in groups]
        return {"op": self.op, "backward_passes_per_step": self.backward_passes_per_step,
                "gradient_predivide_factor": float(self.gradient_predivide_factor),
                "compression": getattr(self._compression, "__name__", type(self._compression).__name__),
                "sparse_as_dense": bool(self.sparse_as_dense), "groups": groups}

    def _register_hooks(self, order: List[str]) -> None:
        """Hook every trainable parameter; groups of them are formed alike on every rank, of the parameters in
        ``order`` (the first member's names, from require_same_making)."""
        trainable = self._trainable()
        if self._groups is not None:
            place = {name: i for i, name in enumerate(order)}
            trainable.sort(key=lambda p: place[self._parameter_names.get(p)])
            if isinstance(self._groups, list):
                ids = {id(p) for p in trainable}
                p_groups = [[p for p in g if id(p) in ids] for g in self._groups]
                grouped = {id(p) for g in p_groups for p in g}
                p_groups += [[p] for p in trainable if id(p) not in grouped]
            else:
                p_groups = split_list(trainable, self._groups)
            for g in (tuple(g) for g in p_groups if g):
                for p in g:
                    self._p_to_group[p] = g
                self._group_counts[g] = 0
        for p in trainable:
            self._hook(p)

    def _hook(self, p: torch.Tensor) -> None:
        """Start ``p``'s allreduce from its gradient hook, in place of an older DistributedOptimizer's."""
        self._requires_update.add(p)
        self._hooked = [q for q in self._parameter_names if q in self._requires_update]
        older = _hooks.get(p)
        if older is not None:
            older.remove()
        _hooks[p] = p.register_post_accumulate_grad_hook(self._make_hook(p))

    def _admit_new_parameters(self) -> None:
        """Hook the parameters that became trainable since the wrap (``requires_grad`` set again, as when layers
        are unfrozen) or came with ``add_param_group``: Horovod's never allreduces their gradients, and the
        ranks' copies drift apart without a word. One unnamed is named by its place, alike on every rank."""
        for i, group in enumerate(self.param_groups):
            for j, p in enumerate(group["params"]):
                if p.requires_grad and p not in self._requires_update:
                    self._parameter_names.setdefault(p, _place_name(i, j))
                    self._allreduce_delay[p] = self.backward_passes_per_step
                    if self._groups is not None:
                        self._p_to_group[p] = (p,)
                        self._group_counts[(p,)] = 0
                    self._hook(p)

    def _allreduce_grad_async(self, p: torch.Tensor) -> Tuple[Handle, Any]:
        name = self._parameter_names.get(p)
        tensor = p.grad
        if tensor.is_sparse:
            if not self.sparse_as_dense:
                return sparse_allreduce_async(tensor, name=name, op=self.op, process_set=self.process_set), None
            tensor = tensor.to_dense()
        sent, ctx = self._compression.compress(tensor)
        pre, post = _scale_factors(self.op, self.gradient_predivide_factor)
        handle = allreduce_async_(_packed(sent), name=name, op=self.op, prescale_factor=pre, postscale_factor=post,
                                  process_set=self.process_set)
        return handle, ctx

    def _grouped_allreduce_grad_async(self, group: Group) -> Tuple[Handle, Any]:
        # A sparse gradient goes dense, whatever sparse_as_dense: Horovod's groups fail on one.
        sent, ctxs = zip(*[self._compression.compress(p.grad.to_dense() if p.grad.is_sparse else p.grad)
                           for p in group])
        pre, post = _scale_factors(self.op, self.gradient_predivide_factor)
        whole = self._p_to_group[group[0]]  # named as its whole group, of which a rank may send only some
        handle = grouped_allreduce_async_([_packed(t) for t in sent], name=self._parameter_names.get(whole[0]),
                                          op=self.op, prescale_factor=pre, postscale_factor=post,
                                          process_set=self.process_set)
        return handle, ctxs

    def _make_hook(self, p: torch.Tensor) -> Any:
        # The parameter keeps its hook, and the optimizer its parameters: a hook that held the optimizer would
        # make a cycle that only a collection frees, so an optimizer dropped mid-step (an exception in backward,
        # a cell that makes a new one) kept its handles to the end, and nanobind reported them leaked at exit.
        owner = weakref.ref(self)

        def hook(_: torch.Tensor) -> None:
            if (optimizer := owner()) is not None:
                optimizer._gradient_ready(p)
        return hook

    def _gradient_ready(self, p: torch.Tensor) -> None:
        """``p``'s gradient is accumulated: start its allreduce (its group's, once the group's last is ready),
        or count the pass toward backward_passes_per_step."""
        self._check_run()
        if p in self._handles and self._handles[p][0] is not None and self._allreduce_delay[p] <= 0:
            raise AssertionError("Gradients were computed more than backward_passes_per_step times before call "
                                 "to step(). Increase backward_passes_per_step to accumulate gradients locally. "
                                 f"(Parameter {self._parameter_names.get(p)}. Within one backward pass, this "
                                 "happens to a parameter used both inside and outside torch.utils.checkpoint(..., "
                                 "use_reentrant=True): use use_reentrant=False.)")
        handle, ctx = None, None
        self._allreduce_delay[p] -= 1
        if self._allreduce_delay[p] == 0:
            now = self._overlap or p.grad.is_cuda
            if self._groups is not None:
                group = self._p_to_group[p]
                self._group_counts[group] += 1
                if self._group_counts[group] == len(group):
                    self._handles[group] = self._grouped_allreduce_grad_async(group) if now else (READY, None)
                    for gp in group:
                        self._handles.pop(gp, None)
                    self._group_counts[group] = 0
                    return
            elif now:
                handle, ctx = self._allreduce_grad_async(p)
            else:
                handle = READY
        self._handles[p] = (handle, ctx)

    def _whole(self, key: Union[torch.Tensor, Group], unused: set) -> Optional[Union[torch.Tensor, Group]]:
        """What synchronize() starts for ``key``, which backward left unstarted: a parameter of a group starts its
        group, as on a rank whose hooks all ran (a parameter this rank left unused sends zeros), less the members
        frozen since the wrap and those ``unused`` on every rank; None where they all are."""
        if self._groups is None or isinstance(key, tuple):
            return key
        return tuple(p for p in self._p_to_group[key] if not _frozen(p) and p not in unused) or None

    def _start(self, key: Union[torch.Tensor, Group]) -> Tuple[Handle, Any]:
        """The allreduce of a parameter's gradient, or of a group's."""
        return self._grouped_allreduce_grad_async(key) if isinstance(key, tuple) else self._allreduce_grad_async(key)

    @eager
    def synchronize(self) -> None:
        """Wait for every gradient's allreduce (starting those whose hooks did not run) and write the results
        into the gradients."""
        if not self.process_set.included():
            self._synchronized = True
            return
        self._check_run()
        if size() > 1:
            self._admit_new_parameters()
        started = set()
        for key in self._handles:
            started.update(key) if isinstance(key, tuple) else started.add(key)
        unused = set()
        for p, dims in self._agree_gradients().items():
            if dims < 0:
                unused.add(p)
            elif p.grad is None and p.requires_grad:  # another rank's step used it: zeros in its gradient's layout
                p.grad = _zeros(p, dims)
        for p in self._requires_update - started - unused:
            if not _frozen(p):
                self._handles[p] = (None, None)  # started below
        for key, (handle, ctx) in list(self._handles.items()):
            if handle is None or handle is READY:
                del self._handles[key]
                key = self._whole(key, unused)
                if key is not None and key not in self._handles:
                    self._handles[key] = self._start(key)
        for key, (handle, ctx) in self._handles.items():
            if isinstance(key, tuple):
                for p, out, c in zip(key, handle.wait(), ctx):
                    self._allreduce_delay[p] = self.backward_passes_per_step
                    _write_grad(p, self._compression.decompress(out, c))
                self._group_counts[self._p_to_group[key[0]]] = 0
            else:
                out = handle.wait()
                self._allreduce_delay[key] = self.backward_passes_per_step
                if self._groups is not None:
                    self._group_counts[self._p_to_group[key]] = 0
                _write_grad(key, out if out.is_sparse else self._compression.decompress(out, ctx))
        self._handles.clear()
        self._synchronized = True

    def _agree_gradients(self) -> Dict[torch.Tensor, int]:
        """Which gradients came, and how, agreed at each step before a rank makes zeros for a parameter its step left
        unused: per hooked parameter, -1 where it has no gradient on any rank (no rank's step used it, after
        ``zero_grad()``'s set_to_none), else 0 where a gradient is dense, or its sparse dimensions. One with none keeps
        None, so the optimizer leaves it alone, as one process and DistributedDataParallel do (Horovod steps it with
        zeros, which momentum, Adam and weight decay move). A rank makes its zeros sparse where another rank's
        gradient is: outside groups and without sparse_as_dense they go by allgathers, which dense zeros (an
        allreduce) would never meet; otherwise they go dense and come back sparse, so that every rank updates alike
        (a dense gradient's update differs from a sparse one's in the last bit). One allreduce (Max) of a byte per
        parameter, on a numpy array (a third of a torch tensor's cost); none in a set of one rank."""
        # Frozen ones too: a rank that froze one since the wrap then meets the others' mismatch in their groups
        # or allreduces, which names it.
        params = self._hooked
        mine = np.fromiter((-1 if (g := p.grad) is None else g.sparse_dim() if g.is_sparse else 0 for p in params),
                           dtype=np.int8, count=len(params))
        if self.process_set.size() > 1:
            mine = core.allreduce(mine, op=Max, name="DistributedOptimizer.gradients", process_set=self.process_set)
        return dict(zip(params, mine.tolist()))

    @contextmanager
    def skip_synchronize(self) -> Iterator[None]:
        """Make step() skip synchronize(): for loops that call synchronize() themselves (e.g. to clip gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    @eager
    def step(self, closure: Any = None) -> Any:
        """Wait for the gradients' allreduces, update the parameters, and count the step for the monitor. A
        ``closure`` (L-BFGS's, or any optimizer's) evaluates the model as _averaged_closure says."""
        self._check_run()
        if closure is not None:
            closure = self._averaged_closure(closure)
        if self._should_synchronize and (closure is None or self._handles):  # a closure's backward is its own
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() context after "
                              "optimizer.synchronize(). This can cause training slowdown. You may want to consider "
                              "using optimizer.skip_synchronize() context if you use optimizer.synchronize() in "
                              "your code.")
            self.synchronize()
        self._synchronized = False
        if self._checked_run != engine_run() and self.process_set.included() and self.process_set.size() > 1:
            self._checked_run = engine_run()
            self._check_ranks()
        loss = super(self.__class__, self).step(closure)
        for stood_for in self._stands_for:  # what a scheduler made on one of them checks for in its step
            stood_for._opt_called = True
            if hasattr(stood_for, "_step_count"):  # what torch 2.1's scheduler checks instead
                stood_for._step_count += 1
        trainer_step(samples.take())
        return loss

    def _averaged_closure(self, closure: Any) -> Any:
        """``closure`` as the wrapped optimizer's step calls it, once (SGD) or many times (L-BFGS): after each
        call, the gradients its backward computed are averaged (synchronize) and its loss too (a tensor, a numpy
        array or a number), so every rank steps by the averaged gradient and takes the same decisions on the
        loss (L-BFGS's line search and stopping tests). Horovod calls the closure alone, so each rank stepped by
        its own gradient, or failed at its zero_grad()."""
        reduce = Sum if self.op == Sum else Average

        def averaged() -> Any:
            loss = closure()
            if self._handles:  # its backward ran (not where it only returns the loss, or synchronized itself)
                self.synchronize()
                self._synchronized = False  # the step's own synchronize, not the user's: step() warns after that
            if not self.process_set.included() or size() == 1:
                return loss
            if isinstance(loss, (torch.Tensor, np.ndarray)):  # a numpy scalar is a number, below
                t = torch.as_tensor(loss).detach()
                t = allreduce(t if t.is_floating_point() else t.double(), op=reduce, process_set=self.process_set)
                return t if isinstance(loss, torch.Tensor) else t.numpy()
            if isinstance(loss, numbers.Real):
                return allreduce(torch.tensor(float(loss), dtype=torch.float64), op=reduce,
                                 process_set=self.process_set).item()
            return loss
        return averaged

    @eager
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients; an error while their allreduces are still in flight."""
        self._check_run()
        if self._handles:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but before optimizer.step() "
                                 "or optimizer.synchronize(). This is prohibited as it can cause a race condition.")
        return super(self.__class__, self).zero_grad(set_to_none)


def _check_arguments(optimizer: Any, op: int, gradient_predivide_factor: Any, backward_passes_per_step: Any) -> None:
    """DistributedOptimizer's checks of its arguments, as Horovod's makes them (and of their types)."""
    check_predivide_factor("DistributedOptimizer", gradient_predivide_factor)
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    check_count("DistributedOptimizer", "backward_passes_per_step", backward_passes_per_step, 1)
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"DistributedOptimizer: expected a torch.optim.Optimizer, got {type(optimizer).__name__}"
                        f"{other_framework_hint(optimizer, __package__)}")


def _check_groups(groups: Any) -> Any:
    if groups is None:
        return None
    if isinstance(groups, list):
        seen = set()
        for g in groups:
            for p in g:
                if not isinstance(p, torch.Tensor):
                    raise ValueError("groups must consist of torch.Tensor.")
                if id(p) in seen:
                    raise ValueError("A parameter can only appear once in groups.")
                seen.add(id(p))
        return groups
    if isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0:
        raise ValueError("groups should be a non-negative integer or a list of list of torch.Tensor.")
    return groups


def _scale_factors(op: int, predivide: float) -> Tuple[float, float]:
    """Average splits its 1 / size around the sum: 1 / predivide before, predivide (and the engine's 1 / size)
    after."""
    return (1.0 / predivide, predivide) if op == Average else (1.0, 1.0)


def _digest(params: List[torch.Tensor]) -> bytes:
    return digest(p.detach().reshape(-1).cpu().view(torch.uint8).numpy() for p in params)


def _packed(t: torch.Tensor) -> torch.Tensor:
    """``t``, or a contiguous copy of it to reduce in its place: the gradient of a parameter in another memory
    format (``channels_last``) has the parameter's strides, which in-place ops refuse. The reduced copy is
    written back into the gradient by ``_write_grad``, element by element, whatever the strides."""
    return t if t.is_contiguous() else t.contiguous()


def _zeros(p: torch.Tensor, sparse_dim: int) -> torch.Tensor:
    """The gradient a rank sends for a parameter its step left unused: zeros, or, where the parameter's gradient
    comes sparse (``sparse_dim`` > 0, as _agree_gradients says), a sparse one with nothing in it, which meets the
    others' allgathers (dense zeros would wait for ever for their allreduce, in Horovod too)."""
    if not sparse_dim:
        return torch.zeros_like(p)
    indices = torch.empty((sparse_dim, 0), dtype=torch.long, device=p.device)
    return torch.sparse_coo_tensor(indices, p.new_empty((0, *p.shape[sparse_dim:])), p.shape, check_invariants=False)


def _write_grad(p: torch.Tensor, reduced: torch.Tensor) -> None:
    """The reduced gradient into ``p.grad``, in its layout: a sparse one (an ``Embedding(sparse=True)``'s) stays
    sparse (for SparseAdam) when it was reduced dense."""
    if p.grad.is_sparse:
        p.grad.zero_().add_(reduced if reduced.is_sparse else reduced.to_sparse())
    elif reduced.data_ptr() != p.grad.data_ptr():
        p.grad.copy_(reduced)


def DistributedOptimizer(optimizer: torch.optim.Optimizer,
                         named_parameters: Optional[Iterable[Tuple[str, torch.Tensor]]] = None,
                         compression: Compressor = Compression.none, backward_passes_per_step: int = 1,
                         op: int = Average, gradient_predivide_factor: float = 1.0, num_groups: int = 0,
                         groups: Optional[Union[int, Sequence[Sequence[torch.Tensor]]]] = None,
                         sparse_as_dense: bool = False,
                         process_set: ProcessSet = global_process_set) -> torch.optim.Optimizer:
    """``optimizer`` turned into one whose gradients are averaged (``op``) over the ranks of ``process_set``.

    Returns an instance of a subclass of the optimizer's class over the same parameter groups; each gradient's
    allreduce starts as soon as backward has produced it (after ``backward_passes_per_step`` passes), optionally
    in float16 (``compression``) and in fused ``groups``; step() waits for them before updating.
    """
    require_ranks(process_set, "DistributedOptimizer")  # a bad set: no other rank to tell
    wrapped, error = None, None
    try:
        op = resolve_op(None, op)  # Adasum: NotImplementedError; unknown ops: ValueError
        _check_arguments(optimizer, op, gradient_predivide_factor, backward_passes_per_step)
        if num_groups != 0:
            warnings.warn("Parameter `num_groups` has been replaced by `groups` and will be removed in v0.23.0.",
                          DeprecationWarning)
            if groups is None:
                groups = num_groups
        # A DistributedOptimizer given again (its notebook cell ran again) is made anew over what it wraps.
        earlier = list(getattr(optimizer, "_stands_for", []))
        base = earlier[0].__class__ if earlier else optimizer.__class__
        cls = type(base.__name__, (base,), dict(_DistributedOptimizer.__dict__))
        given_groups = list(map(list, groups)) if isinstance(groups, (list, tuple)) else groups
        wrapped = cls(optimizer.param_groups, named_parameters, compression, backward_passes_per_step, op,
                      gradient_predivide_factor, given_groups, sparse_as_dense, process_set)
    except Exception as e:  # told to the other ranks (require_same_making), whose wraps then fail too
        error = e
    order = None
    if process_set.included() and size() > 1:
        arguments, trained = (None, None) if wrapped is None else (wrapped._arguments(), wrapped._trained_names())
        order = require_same_making("DistributedOptimizer", error, arguments, trained, process_set,
                                    "freeze the same parameters on every rank before the wrap")
    if error is not None:
        raise error
    # Beyond Horovod's copy, which shares only the parameter groups: the state loaded or made before wrapping
    # (a checkpoint's Adam moments), the defaults of groups added later, and a scheduler made on `optimizer`.
    wrapped.state, wrapped.defaults, wrapped._stands_for = optimizer.state, optimizer.defaults, earlier + [optimizer]
    if order is not None:
        wrapped._register_hooks(order)
    return wrapped
