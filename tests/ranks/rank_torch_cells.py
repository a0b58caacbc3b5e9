"""DistributedOptimizer across notebook cells: the cell that builds it run again over the same model, and a
training cell that fails mid-step (the engine restarts at the next cell, as %%hvd does) before training on.
Each case must reach the parameters one process reaches with the whole batch, the same on every rank."""
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import jupyter_hvd
import jupyter_hvd.torch as hvd
from jupyter_hvd.magic.engine_restart import restart_engine
from jupyter_hvd.monitor.samples import counted_since, snapshot
from rank_torch_training import batch, cnn, flat, same_on_every_rank
from told import check_first_step_warning, check_replaced, runtime_warnings

STEPS = 3


class Pair:
    """A reference model trained by one process on the whole batch, and this rank's distributed copy."""

    def __init__(self, **kwargs):
        self.ref, self.model = cnn(200), cnn(200 + hvd.rank())
        hvd.broadcast_parameters(self.model.state_dict(), root_rank=0)
        self.kwargs = kwargs
        self.ref_opt = self.opt = None
        self.new_optimizers()

    def new_optimizers(self) -> None:
        """What running the cell that builds the optimizer again does: a fresh one over the same parameters."""
        self.ref_opt = torch.optim.SGD(self.ref.parameters(), lr=0.1, momentum=0.9)
        self.opt = hvd.DistributedOptimizer(torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9),
                                            named_parameters=self.model.named_parameters(), **self.kwargs)

    def backward(self, step: int) -> None:
        """The distributed model's half of a step: gradients computed, their allreduces started by the hooks."""
        _, (xs, ys) = batch(step)
        self.opt.zero_grad()
        passes = self.kwargs.get("backward_passes_per_step", 1)
        for part in range(passes):
            rows = slice(part * len(xs) // passes, (part + 1) * len(xs) // passes)
            (F.cross_entropy(self.model(xs[rows]), ys[rows]) / passes).backward()

    def step(self, step: int) -> None:
        (x, y), _ = batch(step)
        self.ref_opt.zero_grad()
        F.cross_entropy(self.ref(x), y).backward()
        self.ref_opt.step()
        self.backward(step)
        self.opt.step()
        assert same_on_every_rank(flat(self.model)), f"parameters differ between ranks after step {step}"

    def check(self) -> None:
        np.testing.assert_allclose(flat(self.model).numpy(), flat(self.ref).numpy(), rtol=1e-5, atol=1e-5)


def failed_cell() -> None:
    """What %%hvd does at the start of the cell after a failed one, on every rank."""
    restart_engine(jupyter_hvd)


def test_the_cell_that_builds_the_optimizer_runs_again():
    """The first optimizer's gradient hooks would start every allreduce a second time under the same name."""
    pair = Pair()
    pair.step(0)
    pair.new_optimizers()
    pair.new_optimizers()
    for step in range(1, STEPS):
        pair.step(step)
    pair.check()


CUTS = {  # how far the step had gone when its cell failed: the optimizer's arguments, backward passes made
    "allreduces in flight": ({}, 1),
    "grouped allreduces in flight": ({"groups": 2}, 1),
    "one pass of two counted": ({"backward_passes_per_step": 2}, 1),
    "two passes, allreduces in flight": ({"backward_passes_per_step": 2}, 2),
}


@pytest.mark.parametrize("kwargs, passes", CUTS.values(), ids=CUTS.keys())
def test_a_step_cut_short_by_a_failed_cell_is_dropped(kwargs, passes):
    """The next cell trains on as if that step had never begun."""
    pair = Pair(**kwargs)
    pair.step(0)
    _, (xs, ys) = batch(1)
    pair.opt.zero_grad()
    for _ in range(passes):
        F.cross_entropy(pair.model(xs), ys).backward()
    failed_cell()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the ranks still agree: nothing to replace
        for step in range(1, STEPS):
            pair.step(step)
    pair.check()


def momenta(opt: torch.optim.Optimizer, model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([opt.state[p]["momentum_buffer"].reshape(-1) for p in model.parameters()])


def test_ranks_a_cut_short_step_left_apart_take_the_first_ranks_parameters_and_state():
    """A failure between one rank's update and another's leaves them a step apart, silently; the first step
    after it gives every rank rank 0's parameters and momentum, then applies the averaged gradient."""
    if hvd.size() == 1:
        pytest.skip("one rank cannot disagree with itself")
    pair = Pair()
    pair.step(0)
    if hvd.rank() == hvd.size() - 1:  # the last rank applied step 1, the others did not
        pair.backward(1)
        with pair.opt.skip_synchronize():
            pair.opt.step()
    failed_cell()
    params0 = hvd.broadcast(flat(pair.model), 0, name="check.params")
    momenta0 = hvd.broadcast(momenta(pair.opt, pair.model), 0, name="check.momenta")
    with runtime_warnings() as told:
        pair.backward(1)
        pair.opt.step()
    check_replaced(told, hvd.rank(), hvd.size() - 1)
    grads = torch.cat([p.grad.reshape(-1) for p in pair.model.parameters()])  # averaged: alike on every rank
    assert same_on_every_rank(grads) and same_on_every_rank(flat(pair.model))
    got = momenta(pair.opt, pair.model)
    np.testing.assert_allclose(got.numpy(), (0.9 * momenta0 + grads).numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(flat(pair.model).numpy(), (params0 - 0.1 * got).numpy(), rtol=1e-6, atol=1e-7)
    for step in range(2, STEPS):
        pair.step(step)


def test_the_monitor_counts_no_sample_of_the_failed_cell():
    """Forward passes of the failed cell's last step (on a model in training mode other than the one the
    next cell trains) are not counted in the next cell's first step."""
    pair = Pair()
    pair.step(0)
    _, (xs, ys) = batch(1)
    for _ in range(3):
        pair.ref(torch.cat([xs, xs]))
    failed_cell()
    origin = snapshot()
    pair.backward(1)
    pair.opt.step()
    samples, steps = counted_since(origin)[:2]
    assert (samples, steps) == (len(xs), 1)


def test_ranks_that_made_their_own_models_are_warned_at_the_first_step():
    """As after running the cell that makes the model again without broadcasting it: every rank trains
    another model. Each rank is told once, at the first step; the parameters are left as they are."""
    if hvd.size() == 1:
        pytest.skip("one rank cannot disagree with itself")
    model = cnn(300 + hvd.rank())
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
    with runtime_warnings() as told:
        for step in range(2):
            _, (xs, ys) = batch(step)
            opt.zero_grad()
            F.cross_entropy(model(xs), ys).backward()
            opt.step()
    check_first_step_warning(told, "hvd.broadcast_parameters(model.state_dict(), root_rank=0)")
    assert not same_on_every_rank(flat(model))


def test_the_first_step_check_runs_beside_a_rank_that_has_joined():
    """A rank without batches joins at once; the others' first step still compares their parameters (an
    allreduce, which a joined rank stands in for, where an allgather would fail)."""
    if hvd.size() == 1:
        pytest.skip("needs a rank to join")
    torch.manual_seed(6)
    model = torch.nn.Linear(3, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
    if hvd.rank() != hvd.size() - 1:
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            opt.zero_grad()
            model(torch.ones(2, 3)).sum().backward()
            opt.step()
    assert hvd.join() != hvd.size() - 1  # the others' step needed its join, so it joined first
