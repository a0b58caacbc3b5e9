"""Training with jupyter_hvd.torch: N ranks with batch b reach the parameters one process reaches with batch N*b
(plain, fp16 compression, gradient accumulation, groups), identical on every rank; SyncBatchNorm; the monitor."""
import contextlib
import copy
import gc
import os
import warnings
import weakref

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import jupyter_hvd
import jupyter_hvd.torch as hvd
from jupyter_hvd.monitor.samples import counted_since, snapshot
from jupyter_hvd.torch.optimizer import OVERLAP_VAR, READY, overlaps_backward

PER_RANK = 8  # samples per rank and step
STEPS = 4


def cnn(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 3), torch.nn.ReLU(),
                               torch.nn.Flatten(), torch.nn.Linear(4 * 4 * 4, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 10))


def batch(step: int):
    """The whole job's batch for ``step`` (every rank can build it) and this rank's shard of it."""
    g = torch.Generator().manual_seed(step)
    x = torch.randn(PER_RANK * hvd.size(), 1, 8, 8, generator=g)
    y = torch.randint(0, 10, (PER_RANK * hvd.size(),), generator=g)
    shard = slice(hvd.rank() * PER_RANK, (hvd.rank() + 1) * PER_RANK)
    return (x, y), (x[shard], y[shard])


@pytest.fixture(params=["1", "0"], ids=["overlapped", "started_in_step"])
def overlap(request, monkeypatch):
    """Allreduces started by the hooks during backward, or by step() (JUPYTER_HVD_OVERLAP)."""
    monkeypatch.setenv(OVERLAP_VAR, request.param)


def flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def same_on_every_rank(values: torch.Tensor) -> bool:
    everyone = hvd.allgather(values[None], name="check.same")
    return all(torch.equal(everyone[0], row) for row in everyone)


def train(passes: int, memory_format: torch.memory_format = torch.contiguous_format, **kwargs):
    """Reference (one process, whole batch) and distributed models after STEPS steps of SGD with momentum;
    the distributed model's parameters and inputs in ``memory_format``."""
    ref, model = cnn(100), cnn(100 + hvd.rank()).to(memory_format=memory_format)  # rank 0 starts as ref does
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
                                   named_parameters=model.named_parameters(), backward_passes_per_step=passes,
                                   **kwargs)
    assert isinstance(opt, torch.optim.SGD)
    for step in range(STEPS):
        (x, y), (xs, ys) = batch(step)
        ref_opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        ref_opt.step()
        opt.zero_grad()
        xs = xs.to(memory_format=memory_format)
        for part in range(passes):  # gradient accumulation: micro-batches whose losses add up to the batch's
            rows = slice(part * PER_RANK // passes, (part + 1) * PER_RANK // passes)
            (F.cross_entropy(model(xs[rows]), ys[rows]) / passes).backward()
        opt.step()
        assert same_on_every_rank(flat(model)), f"parameters differ between ranks after step {step}"
    return flat(ref), flat(model)


@pytest.mark.parametrize("passes", [1, 2])
@pytest.mark.parametrize("compression", ["none", "fp16"])
def test_ranks_with_batch_b_match_one_process_with_batch_nb(compression, passes, overlap):
    ref, got = train(passes, compression=getattr(hvd.Compression, compression))
    tol = 2e-3 if compression == "fp16" and hvd.size() > 1 else 1e-5
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=tol, atol=tol)


class Halved(hvd.Compression.none):
    """A compressor of the user's, with no context: its decompress must still be called."""

    @staticmethod
    def compress(tensor: torch.Tensor):
        return tensor * 0.5, None

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx):
        return tensor * 2.0


@pytest.mark.parametrize("kwargs", [{"groups": 2}, {"num_groups": 3}, {"gradient_predivide_factor": 2.0},
                                    {"compression": Halved}, {"compression": Halved, "groups": 2}],
                         ids=["groups", "num_groups", "predivide", "own_compressor", "own_compressor_groups"])
def test_groups_and_predivide_factor_give_the_same_parameters(kwargs, overlap):
    with pytest.warns(DeprecationWarning) if "num_groups" in kwargs else contextlib.nullcontext():
        ref, got = train(1, **kwargs)
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kwargs", [{}, {"compression": hvd.Compression.fp16}, {"groups": 2}],
                         ids=["plain", "fp16", "groups"])
def test_a_channels_last_model_trains_as_one_process_with_the_whole_batch(kwargs):
    """Its convolutions' gradients have the parameters' strides (not contiguous), as do the tensors that
    broadcast_parameters writes; Horovod refuses both ("Tensor is required to be contiguous")."""
    ref, got = train(1, memory_format=torch.channels_last, **kwargs)
    tol = 2e-3 if "compression" in kwargs and hvd.size() > 1 else 1e-5
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=tol, atol=tol)


def test_explicit_groups_of_tensors():
    model = cnn(3)
    layers = [m for m in model if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    groups = [[layers[0].weight, layers[0].bias], [layers[2].weight, layers[3].weight]]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters(),
                                   groups=groups)
    _, (xs, ys) = batch(0)
    F.cross_entropy(model(xs), ys).backward()
    opt.step()
    assert same_on_every_rank(flat(model))


def test_allreduces_start_during_backward(monkeypatch):
    """Each gradient's allreduce is queued by its hook as backward produces it, before step()."""
    if hvd.size() == 1:
        pytest.skip("one rank reduces nothing")
    monkeypatch.setenv(OVERLAP_VAR, "1")
    model = cnn(4)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
    _, (xs, ys) = batch(0)
    F.cross_entropy(model(xs), ys).backward()
    started = [h for h, _ in opt._handles.values()]
    assert len(started) == len(list(model.parameters())) and all(h is not None for h in started)
    opt.step()


def test_the_hooks_overlap_backward_only_where_the_ranks_compute_leaves_a_core_free(monkeypatch):
    cores, ranks, threads = jupyter_hvd._C.host_cores(), hvd.local_size(), torch.get_num_threads()
    assert 1 <= cores <= os.cpu_count()
    try:
        monkeypatch.delenv(OVERLAP_VAR, raising=False)
        torch.set_num_threads(-(-cores // ranks))  # the host's ranks fill its cores
        assert not overlaps_backward()
        if ranks < cores:
            torch.set_num_threads(1)
            assert overlaps_backward()
        for setting, overlaps in (("1", True), ("0", False), (" Auto ", ranks * torch.get_num_threads() < cores),
                                  ("", ranks * torch.get_num_threads() < cores)):  # set but empty: auto
            monkeypatch.setenv(OVERLAP_VAR, setting)
            assert overlaps_backward() is overlaps
        monkeypatch.setenv(OVERLAP_VAR, "yes")
        with pytest.raises(ValueError, match="JUPYTER_HVD_OVERLAP must be auto, 1 or 0"):
            overlaps_backward()
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("groups", [None, 2])
def test_without_overlap_the_hooks_only_note_the_gradients_and_step_starts_their_allreduces(monkeypatch, groups):
    """Where the rank's compute fills its cores, nothing reaches the engine during backward."""
    if hvd.size() == 1:
        pytest.skip("one rank reduces nothing")
    monkeypatch.setenv(OVERLAP_VAR, "0")
    model = cnn(4)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters(),
                                   groups=groups)
    for step in range(2):  # the first step() also compares the ranks' parameters, with an allreduce of its own
        _, (xs, ys) = batch(step)
        opt.zero_grad()
        F.cross_entropy(model(xs), ys).backward()
        assert opt._handles and all(h is READY for h, _ in opt._handles.values())  # none made: nothing enqueued
        before = jupyter_hvd.metrics()["ops"]["allreduce"]  # completed tensors
        opt.step()
    # The gradients' and the one in which the ranks agree which gradients came (see _agree_gradients).
    assert jupyter_hvd.metrics()["ops"]["allreduce"] == before + len(list(model.parameters())) + 1
    assert same_on_every_rank(flat(model))


def test_unused_parameter_clip_and_too_many_passes(overlap):
    model = torch.nn.ModuleDict({"used": torch.nn.Linear(3, 2), "spare": torch.nn.Linear(3, 2)})
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5), model.named_parameters())
    x = torch.ones(4, 3) * (hvd.rank() + 1)
    layer = model["spare"] if hvd.rank() == 0 else model["used"]  # each rank leaves a layer out
    layer(x).sum().backward()
    opt.synchronize()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    with opt.skip_synchronize():
        opt.step()
    assert same_on_every_rank(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))
    if hvd.size() > 1:
        opt.zero_grad()
        model["used"](x).sum().backward()
        with pytest.raises(AssertionError, match="backward_passes_per_step"):
            model["used"](x).sum().backward()
        opt.synchronize()


@pytest.mark.parametrize("groups", [1, 2, "lists"])
def test_a_parameter_one_rank_leaves_unused_goes_with_its_group(groups, overlap):
    """With groups, a group whose hooks had not all run was started member by member, under other names than
    on the ranks whose hooks all ran: every rank waited in step() for good (as in Horovod). It goes as its
    group, with zeros for the gradient this rank has not."""
    torch.manual_seed(0)
    model = torch.nn.ModuleDict({"used": torch.nn.Linear(3, 2), "spare": torch.nn.Linear(3, 2)})
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    spare_bias = model["spare"].bias.detach().clone()
    if groups == "lists":
        groups = [[model["used"].weight, model["spare"].weight], [model["spare"].bias]]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5), model.named_parameters(),
                                   groups=groups)
    for _ in range(2):
        opt.zero_grad()
        x = torch.ones(4, 3) * (hvd.rank() + 1)
        loss = model["used"](x).sum()
        if hvd.rank() == 0:  # the others leave "spare" out
            loss = loss + model["spare"](x).sum()
        loss.backward()
        opt.step()
    assert same_on_every_rank(flat(model))
    # Each step: rank 0's gradient of each bias is its 4 rows, the others' zeros; averaged, times the rate 0.5.
    torch.testing.assert_close(model["spare"].bias.detach(), spare_bias - 2 * 0.5 * 4 / hvd.size())



@pytest.mark.parametrize("set_to_none", [True, False])
@pytest.mark.parametrize("groups", [None, 2])
def test_a_parameter_no_rank_uses_is_left_alone_as_one_process_leaves_it(groups, set_to_none, overlap):
    """A head that no rank's step uses keeps no gradient (zero_grad's set_to_none), so AdamW leaves it alone, as
    one process and DistributedDataParallel do: Horovod gave it zeros, whose update its weight decay and its
    moments moved. With zeros kept (set_to_none=False) it is stepped with them, as in one process."""
    torch.manual_seed(0)
    model = torch.nn.ModuleDict({"body": torch.nn.Linear(3, 2), "head": torch.nn.Linear(2, 2)})
    reference = torch.nn.ModuleDict({"body": torch.nn.Linear(3, 2), "head": torch.nn.Linear(2, 2)})
    reference.load_state_dict(model.state_dict())
    opt = hvd.DistributedOptimizer(torch.optim.AdamW(model.parameters(), lr=0.1, weight_decay=0.1),
                                   model.named_parameters(), groups=groups)
    ref_opt = torch.optim.AdamW(reference.parameters(), lr=0.1, weight_decay=0.1)
    for step in range(3):  # the head: step 0 on rank 0 alone, then on none
        opt.zero_grad(set_to_none)
        ref_opt.zero_grad(set_to_none)
        for r in range(hvd.size()):
            x = torch.ones(4, 3) * (r + 1)
            if r == hvd.rank():
                (model["head"](model["body"](x)) if step == 0 and r == 0 else model["body"](x)).sum().backward()
            (reference["head"](reference["body"](x)) if step == 0 and r == 0 else reference["body"](x)).sum().div(
                hvd.size()).backward()
        opt.step()
        ref_opt.step()
        assert same_on_every_rank(flat(model))
        assert (model["head"].weight.grad is None) == (set_to_none and step > 0)
    torch.testing.assert_close(flat(model), flat(reference))


@pytest.mark.parametrize("left_out_at", [0, 1])
@pytest.mark.parametrize("sparse_as_dense", [False, True])
@pytest.mark.parametrize("groups", [None, 1, 2])
def test_a_sparse_embedding_one_rank_leaves_out_trains_as_one_process(groups, sparse_as_dense, left_out_at, overlap):
    """Groups took a sparse gradient (an Embedding(sparse=True)'s) as a dense one and failed in step(), in
    Horovod too, whatever sparse_as_dense: it goes dense in its group and comes back sparse, for SparseAdam.
    And a step where one rank leaves the embedding out sent dense zeros for it, which the others' allgathers
    (outside groups, without sparse_as_dense) never met: the ranks waited for ever, as in Horovod. It sends an
    empty sparse one, at the first step too, where it has never seen that gradient come sparse."""
    torch.manual_seed(0)
    model = torch.nn.ModuleDict({"emb": torch.nn.Embedding(10, 3, sparse=True), "head": torch.nn.Linear(3, 1)})
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    reference = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters(),
                                   groups=groups, sparse_as_dense=sparse_as_dense)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)

    def loss(m: torch.nn.ModuleDict, rank: int, step: int) -> torch.Tensor:
        ids = torch.tensor([rank, 5 + step, 9 - rank])
        features = m["emb"](ids) if rank != 0 or step != left_out_at else torch.ones(3, 3)  # rank 0, once
        return m["head"](features).square().sum()

    for step in range(3):
        opt.zero_grad()
        ref_opt.zero_grad()
        loss(model, hvd.rank(), step).backward()
        assert model["emb"].weight.grad is None or model["emb"].weight.grad.is_sparse
        opt.step()
        (sum(loss(reference, r, step) for r in range(hvd.size())) / hvd.size()).backward()
        ref_opt.step()
        if not (hvd.rank() == 0 and step == left_out_at):
            assert model["emb"].weight.grad.is_sparse
    assert same_on_every_rank(flat(model))
    torch.testing.assert_close(flat(model), flat(reference))

class SharedInCheckpoint(torch.nn.Module):
    """A layer used both inside and outside a checkpointed segment."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, reentrant: bool) -> torch.Tensor:
        return self.a(checkpoint(lambda t: self.b(torch.relu(self.a(t))), x, use_reentrant=reentrant))


def test_a_parameter_used_inside_and_outside_a_checkpoint_trains_as_one_process(overlap):
    """Without reentrance its gradient is accumulated once per backward pass; with it, twice, which every rank
    refuses with Horovod's error, which here names the parameter and says why (one rank, which has no hooks,
    takes it)."""
    torch.manual_seed(0)
    model = SharedInCheckpoint()
    reference = copy.deepcopy(model)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(hvd.size(), 3, 4, generator=torch.Generator().manual_seed(step), requires_grad=True)
        opt.zero_grad()
        ref_opt.zero_grad()
        model(x[hvd.rank()], reentrant=False).square().sum().backward()
        opt.step()
        (sum(reference(x[r], reentrant=False).square().sum() for r in range(hvd.size())) / hvd.size()).backward()
        ref_opt.step()
    torch.testing.assert_close(flat(model), flat(reference))
    opt.zero_grad()
    refused = pytest.raises(AssertionError, match=r"more than backward_passes_per_step times .*Parameter "
                                                  r"a\.(weight|bias)\. Within one backward pass.*use_reentrant=False")
    with refused if hvd.size() > 1 else contextlib.nullcontext():  # one rank has no hooks, as in Horovod
        model(torch.ones(3, 4, requires_grad=True), reentrant=True).sum().backward()
    opt.synchronize()  # what the hooks started


def test_ranks_that_train_different_parameters_in_groups_fail_alike():
    """Groups over parameters that one rank froze: the ranks formed different groups under different names
    and waited for good; now every rank raises, at the wrap or at the step."""
    if hvd.size() < 2:
        pytest.skip("needs two ranks")
    torch.manual_seed(0)
    model = torch.nn.ModuleDict({"a": torch.nn.Linear(3, 2), "b": torch.nn.Linear(2, 1)})
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    model["b"].requires_grad_(hvd.rank() != 1)
    with pytest.raises(ValueError, match=r"the ranks train different parameters: ranks 0 and 1 differ in b\.bias, "
                                         r"b\.weight \(freeze the same parameters on every rank before the wrap\)"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters(), groups=1)
    model.requires_grad_(True)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters(), groups=1)
    model["b"].requires_grad_(hvd.rank() != 1)  # frozen after the wrap, on one rank
    model["b"](model["a"](torch.ones(4, 3))).sum().backward()
    with pytest.raises(hvd.TensorMismatchError, match="mismatched groups"):
        opt.step()


OPTIMIZERS_WITH_CLOSURES = {"sgd": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
                            "lbfgs": lambda ps: torch.optim.LBFGS(ps, lr=0.5, max_iter=4),
                            "lbfgs_wolfe": lambda ps: torch.optim.LBFGS(ps, max_iter=6, line_search_fn="strong_wolfe")}


@pytest.mark.parametrize("kind", list(OPTIMIZERS_WITH_CLOSURES))
def test_step_with_a_closure_steps_as_one_process_with_the_whole_batch(kind, overlap):
    """The closure's gradients and loss are averaged each time the optimizer calls it (L-BFGS: several times a
    step, with a line search on the loss). Horovod's ranks each stepped by their own gradient, or failed."""
    make = OPTIMIZERS_WITH_CLOSURES[kind]
    torch.manual_seed(5)
    x = torch.randn(PER_RANK * hvd.size(), 4, dtype=torch.float64)
    y = (x ** 2).sum(1, keepdim=True) + x[:, :1]
    shard = slice(hvd.rank() * PER_RANK, (hvd.rank() + 1) * PER_RANK)
    ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).double()
    model.load_state_dict(ref.state_dict())
    ref_opt = make(ref.parameters())
    opt = hvd.DistributedOptimizer(make(model.parameters()), named_parameters=model.named_parameters())

    def closure_of(net, optimizer, xs, ys):
        def closure():
            optimizer.zero_grad()
            loss = F.mse_loss(net(xs), ys)
            loss.backward()
            return loss
        return closure
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "optimizer.step.. called without")  # the closure's synchronize is step's
        for _ in range(3):
            ref_loss = ref_opt.step(closure_of(ref, ref_opt, x, y))
            loss = opt.step(closure_of(model, opt, x[shard], y[shard]))
            assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-9)
    torch.testing.assert_close(flat(model), flat(ref), rtol=1e-7, atol=1e-9)
    assert same_on_every_rank(flat(model))


def test_a_closure_that_synchronizes_itself_or_runs_no_backward_is_not_averaged_again(overlap):
    """op=Sum shows a second allreduce of gradients already summed: it doubled them. A closure that runs no
    backward leaves the gradients None, as in one process, where an allreduce would have made them zeros (which
    weight decay then moved by)."""
    torch.manual_seed(7)
    x = torch.randn(PER_RANK * hvd.size(), 3, dtype=torch.float64)
    y = x.sum(1, keepdim=True)
    shard = slice(hvd.rank() * PER_RANK, (hvd.rank() + 1) * PER_RANK)
    ref, model = torch.nn.Linear(3, 1).double(), torch.nn.Linear(3, 1).double()
    model.load_state_dict(ref.state_dict())
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.01)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01), model.named_parameters(),
                                   op=hvd.Sum)

    def clipping_closure():
        opt.zero_grad()
        loss = F.mse_loss(model(x[shard]), y[shard])
        loss.backward()
        opt.synchronize()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)
        return loss

    def ref_closure():  # the sum of the ranks' mean losses
        ref_opt.zero_grad()
        loss = F.mse_loss(ref(x), y) * hvd.size()
        loss.backward()
        return loss
    for _ in range(3):
        with opt.skip_synchronize():
            opt.step(clipping_closure)
        ref_opt.step(ref_closure)
    torch.testing.assert_close(flat(model), flat(ref), rtol=1e-9, atol=1e-12)
    decaying = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, weight_decay=0.1),
                                        model.named_parameters())
    decaying.zero_grad()
    before = flat(model)
    loss = decaying.step(lambda: F.mse_loss(model(x[shard]), y[shard]).detach())
    assert torch.equal(flat(model), before)
    assert loss.item() == pytest.approx(F.mse_loss(model(x), y).item(), rel=1e-9)  # averaged all the same


def test_an_optimizer_dropped_in_the_middle_of_a_step_is_freed_at_once():
    """Its gradient hooks stay on the parameters, and held it in a cycle that only a collection freed, with
    its allreduces' handles; a new optimizer over the model then trains as usual."""
    model = cnn(1)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
    _, (x, y) = batch(0)
    F.cross_entropy(model(x), y).backward()  # the hooks start the allreduces
    dropped = weakref.ref(opt)
    gc.disable()
    try:
        del opt
        assert dropped() is None
    finally:
        gc.enable()
    hvd.barrier()  # after the dropped allreduces: their names are free again (as in Horovod, not before)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()
    assert same_on_every_rank(flat(model))


def test_what_the_optimizer_had_before_it_was_wrapped_stays_with_it():
    """A checkpoint's optimizer state loaded, a scheduler made, before hvd.DistributedOptimizer (Horovod's copy
    kept neither: Adam started its moments again, and the scheduler warned on every step that it stepped
    before the optimizer); and the defaults that groups added later take."""
    model = torch.nn.Linear(3, 2)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    model(torch.ones(1, 3)).sum().backward()
    opt.step()  # as if loaded from a checkpoint: one step's moments
    schedule = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    wrapped = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            wrapped.zero_grad()
            model(torch.ones(1, 3)).sum().backward()
            wrapped.step()
            schedule.step()
    assert [float(wrapped.state[p]["step"]) for p in model.parameters()] == [3.0, 3.0]
    assert wrapped.param_groups[0]["lr"] == pytest.approx(0.05 / 4)
    extra = torch.nn.Parameter(torch.zeros(1))
    wrapped.add_param_group({"params": [extra]})
    assert wrapped.param_groups[1]["lr"] == 0.05  # the wrapped optimizer's default, not Adam's 0.001
    with pytest.raises(TypeError, match="expected a torch.optim.Optimizer, got list"):
        hvd.DistributedOptimizer(list(model.parameters()))


def test_a_scheduler_made_before_wrapping_drives_every_ranks_rate_after_broadcast_optimizer_state():
    """Optimizer, scheduler, DistributedOptimizer, broadcast_optimizer_state: the order Horovod's examples and
    elastic's TorchState take. The broadcast loaded new parameter-group dicts into the wrapper on ranks other
    than the root, which the scheduler, made on what it wraps, never saw: their rate stayed 0.1 every epoch."""
    model = torch.nn.Linear(3, 1)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    inner = torch.optim.SGD(model.parameters(), lr=0.1 * (hvd.rank() + 1), momentum=0.9)
    schedule = torch.optim.lr_scheduler.StepLR(inner, step_size=1, gamma=0.5)
    opt = hvd.DistributedOptimizer(inner, named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    assert opt.param_groups[0] is inner.param_groups[0] and opt.state is inner.state
    rates = []
    for _ in range(3):
        opt.zero_grad()
        model(torch.ones(2, 3)).sum().backward()
        opt.step()
        schedule.step()
        rates.append(opt.param_groups[0]["lr"])
    assert rates == pytest.approx([0.05, 0.025, 0.0125])
    assert opt.state[model.weight]["momentum_buffer"] is inner.state[model.weight]["momentum_buffer"]
    assert same_on_every_rank(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))


@pytest.mark.parametrize("groups", [None, 1], ids=["hooks", "groups"])
def test_parameters_unfrozen_or_added_after_the_wrap_are_averaged_and_frozen_ones_left_alone(groups):
    """A backbone frozen when the optimizer was wrapped, then unfrozen (fine-tuning in a notebook), and a group
    added later: their gradients were never allreduced (as in Horovod), so each rank trained its own copy. And a
    layer frozen after the wrap got zero gradients, so weight decay still moved it, where one process leaves it."""
    torch.manual_seed(0)
    model, extra = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 1)), torch.nn.Parameter(torch.ones(1))
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    backbone, head = model
    backbone.requires_grad_(False)
    opt = hvd.DistributedOptimizer(torch.optim.SGD([*backbone.parameters(), *head.parameters()], lr=0.1,
                                                   weight_decay=0.1), groups=groups)

    def train(steps: int) -> None:
        for _ in range(steps):
            opt.zero_grad()
            x = torch.full((2, 3), float(hvd.rank() + 1))  # each rank's own batch
            (head(backbone(x)).sum() * extra).sum().backward()
            opt.step()

    train(2)
    backbone.requires_grad_(True)
    train(2)
    opt.add_param_group({"params": [extra]})
    train(2)
    everything = [*backbone.parameters(), *head.parameters(), extra]
    assert same_on_every_rank(torch.cat([p.detach().reshape(-1) for p in everything]))
    frozen = head.weight.detach().clone()
    head.requires_grad_(False)
    train(2)
    assert torch.equal(head.weight.detach(), frozen)
    assert same_on_every_rank(torch.cat([p.detach().reshape(-1) for p in everything]))


def test_a_distributed_optimizer_given_again_is_made_anew_over_what_it_wraps():
    """`opt = hvd.DistributedOptimizer(opt, ...)` in a notebook cell that runs again: Horovod's (and ours) raised
    "_DistributedOptimizer.__init__() missing 8 required positional arguments" for the second wrap."""
    model = torch.nn.Linear(3, 2)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.05), model.named_parameters())
    schedule = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)  # made on the first one
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for again in range(3):
            opt = hvd.DistributedOptimizer(opt, model.named_parameters()) if again else opt  # the cell runs again
            opt.zero_grad()
            (model(torch.ones(4, 3)) * (hvd.rank() + 1)).sum().backward()
            opt.step()
            schedule.step()
    assert type(opt).__mro__[1] is torch.optim.Adam and isinstance(opt, torch.optim.Adam)
    assert [float(opt.state[p]["step"]) for p in model.parameters()] == [3.0, 3.0]
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05 / 8)
    assert same_on_every_rank(torch.cat([p.detach().reshape(-1) for p in model.parameters()]))


@pytest.mark.skipif(not hasattr(torch.amp, "GradScaler"), reason="a GradScaler on the CPU came in torch 2.3")
def test_the_amp_pattern_with_a_grad_scaler_skips_the_same_steps_as_one_process():
    """Horovod's documented mixed-precision loop (synchronize, unscale_, clip, then step under skip_synchronize),
    on CPU with float16 autocast: an overflow on one rank reaches every rank through the allreduce, so all skip
    that step and halve the scale together, as one process with the whole batch does."""
    def loop(model, opt, shard, distributed):
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10)
        for step in range(STEPS):
            (x, y), _ = batch(step)
            x[-1, 0, 0, 0] = float("inf") if step == 2 else x[-1, 0, 0, 0]  # the last rank's shard overflows
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.float16):
                loss = F.cross_entropy(model(x[shard]), y[shard])
            scaler.scale(loss).backward()
            if distributed:
                opt.synchronize()
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            with opt.skip_synchronize() if distributed else contextlib.nullcontext():
                scaler.step(opt)
            scaler.update()
        return scaler.get_scale()

    ref, model = cnn(300), cnn(300)
    ref_scale = loop(ref, torch.optim.SGD(ref.parameters(), lr=0.1), slice(None), False)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
    scale = loop(model, opt, slice(hvd.rank() * PER_RANK, (hvd.rank() + 1) * PER_RANK), True)
    assert scale == ref_scale == 2.0 ** 9
    assert same_on_every_rank(flat(model))
    torch.testing.assert_close(flat(model), flat(ref), rtol=0, atol=2e-3)


def torch_batch_norm_takes(dtype: torch.dtype) -> bool:
    try:
        F.batch_norm(torch.ones(2, 1, dtype=dtype), None, None, training=True)
        return True
    except RuntimeError:
        return False


def test_sync_batch_norm_of_half_precision_input_keeps_its_statistics_in_float32():
    """autocast hands BatchNorm float16: a rank's count past 65504 (here 80,000 per channel) was inf in float16,
    and every output NaN. Torch's own batch norm keeps statistics in float32 too; the output is float16."""
    torch.manual_seed(6)
    x_all = torch.randn(2 * hvd.size(), 3, 200, 200) * 3 + 2
    shard = slice(hvd.rank() * 2, (hvd.rank() + 1) * 2)
    for dtype in (torch.float16, torch.bfloat16):
        if hvd.size() == 1 and not torch_batch_norm_takes(dtype):
            continue  # one rank is torch's own batch norm, which in torch 2.1 has no float16 kernel on the CPU
        sync = hvd.SyncBatchNorm(3)
        x = x_all[shard].to(dtype).requires_grad_()
        out = sync(x)
        assert out.dtype == dtype
        ref = torch.nn.functional.batch_norm(x_all.to(dtype).float(), None, None, None, None, True, 0.0, sync.eps)
        torch.testing.assert_close(out.float(), ref[shard], rtol=0.02, atol=0.02)
        assert torch.isfinite(sync.running_mean).all() and torch.isfinite(sync.running_var).all()
        out.float().sum().backward()
        assert x.grad.dtype == dtype and torch.isfinite(x.grad.float()).all()


def test_sync_batch_norm_matches_batch_norm_on_the_whole_batch():
    torch.manual_seed(5)
    x_all = torch.randn(PER_RANK * hvd.size(), 3, 4, 4) * 3 + 2
    ref = torch.nn.BatchNorm2d(3)
    sync = hvd.SyncBatchNorm(3)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
        sync.weight.copy_(ref.weight)
    g_all = torch.randn(x_all.shape)  # the loss's gradient with respect to the output
    x_ref = x_all.clone().requires_grad_()
    (ref(x_ref) * g_all).sum().backward()
    shard = slice(hvd.rank() * PER_RANK, (hvd.rank() + 1) * PER_RANK)
    x = x_all[shard].clone().requires_grad_()
    out = sync(x)
    (out * g_all[shard]).sum().backward()
    ref_out = torch.nn.functional.batch_norm(x_all, None, None, ref.weight, ref.bias, True, 0.0, ref.eps)
    torch.testing.assert_close(out.detach(), ref_out.detach()[shard], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(x.grad, x_ref.grad[shard], rtol=1e-4, atol=1e-5)
    weight_grad = hvd.allreduce(sync.weight.grad, op=hvd.Sum)  # each rank's share of the weight's gradient
    torch.testing.assert_close(weight_grad, ref.weight.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(sync.running_mean, ref.running_mean, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(sync.running_var, ref.running_var, rtol=1e-4, atol=1e-5)


def test_step_counts_samples_for_the_monitor():
    model = cnn(6)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters(),
                                   backward_passes_per_step=2)
    teacher = cnn(7)  # in training mode, and trained by no DistributedOptimizer: not counted
    origin = snapshot()
    for step in range(3):
        _, (xs, ys) = batch(step)
        teacher(xs[:3])
        model.eval()
        model(xs[:1])  # an evaluation pass is not a training sample
        model.train()
        for half in (xs[:PER_RANK // 2], xs[PER_RANK // 2:]):
            F.cross_entropy(model(half), ys[:len(half)]).backward()
        opt.step()
        opt.zero_grad()
    samples, steps = counted_since(origin)[:2]
    assert (samples, steps) == (3 * PER_RANK, 3)


@pytest.mark.parametrize("form", ["torch.compile(model)", "model.compile()"])
def test_a_compiled_model_trains_as_one_process_with_the_whole_batch(form):
    """TorchDynamo traces the model's calls, the monitor's forward pre-hook among them (on the eager backend:
    the tracing is what meets the hooks). The wrapper that torch.compile returns is counted; a model compiled
    in place runs its hooks inside the compiled code, where they count nothing."""
    ref, model = cnn(8), cnn(8)
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
    if form == "model.compile()":
        model.compile(backend="eager")
        run = model
    else:
        run = torch.compile(model, backend="eager")
    ref.eval()  # the same gradients (no dropout or batch norm), and not counted by the monitor
    for step in range(STEPS):
        (x, y), _ = batch(step)
        ref_opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        ref_opt.step()
    origin = snapshot()
    with warnings.catch_warnings(record=True) as seen:
        for step in range(STEPS):
            _, (xs, ys) = batch(step)
            opt.zero_grad()
            F.cross_entropy(run(xs), ys).backward()
            opt.step()
    torch.testing.assert_close(flat(model), flat(ref), rtol=1e-4, atol=1e-5)
    assert same_on_every_rank(flat(model))
    samples, steps = counted_since(origin)[:2]
    # Before torch 2.3 the hook cannot ask whether Dynamo traces it, so Dynamo breaks the graph there and runs it
    # eagerly, where it counts.
    counted = form == "torch.compile(model)" or not hasattr(torch.compiler, "is_compiling")
    assert (samples, steps) == (STEPS * PER_RANK if counted else 0, STEPS)
    assert not [w for w in seen if "global hooks" in str(w.message)]


def test_ranks_with_fewer_batches_join_and_the_others_train_on():
    """Horovod's join with uneven data: rank r runs 2 + r steps and joins; the ranks still stepping get the
    average of their gradients over every rank (the joined ones count as zeros), and join returns the rank
    that joined last. The loss is linear, so each step's gradient is known in advance."""
    torch.manual_seed(5)
    model = torch.nn.Linear(3, 1, bias=False)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    start = model.weight.detach().clone()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=model.named_parameters())

    def inputs(rank: int, step: int) -> torch.Tensor:
        return torch.full((4, 3), float(1 + rank + 10 * step))

    steps = [2 + r for r in range(hvd.size())]
    for step in range(steps[hvd.rank()]):
        opt.zero_grad()
        model(inputs(hvd.rank(), step)).sum().backward()
        opt.step()
    assert hvd.join() == hvd.size() - 1
    expected = start.clone()
    for step in range(steps[hvd.rank()]):
        grads = [inputs(r, step).sum(0) for r in range(hvd.size()) if steps[r] > step]
        expected -= 0.1 * torch.stack(grads).sum(0) / hvd.size()
    torch.testing.assert_close(model.weight.detach(), expected)
