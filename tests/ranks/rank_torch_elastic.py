"""hvd.elastic of jupyter_hvd.torch on a job of fixed ranks, in the pattern of Horovod's elastic examples: a
function under @hvd.elastic.run, a TorchState holding the model, the DistributedOptimizer, a learning-rate
scheduler, an ElasticSampler and plain values, commit() after every batch. It must train as one process with
the whole batch; a HorovodInternalError must restore the last commit on every rank and be raised, and running the
function again (the next cell of a notebook) must go on from that commit to the same parameters."""
import math
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

import jupyter_hvd
import jupyter_hvd.torch as hvd
from jupyter_hvd.elastic import RESTORED_NOTE
from jupyter_hvd.magic.engine_restart import restart_engine
from rank_torch_training import flat, same_on_every_rank
from told import runtime_warnings

SAMPLES, PER_RANK, EPOCHS, SEED = 48, 4, 2, 7


def dataset() -> TensorDataset:
    g = torch.Generator().manual_seed(3)
    return TensorDataset(torch.randn(SAMPLES, 6, generator=g), torch.randint(0, 3, (SAMPLES,), generator=g))


def mlp(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))


def sgd(params) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=0.2, momentum=0.9)


def halving(opt: torch.optim.Optimizer) -> torch.optim.lr_scheduler.LRScheduler:
    return torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)


def reference() -> torch.nn.Module:
    """One process, rank 0's first model, the job's whole batch per step: each epoch's samples in the order
    Horovod 0.28's ElasticSampler shuffles them (random.Random(seed + epoch)), PER_RANK * size at a time. A run
    restored from a commit goes on in that order, so it ends here too."""
    data, model = dataset(), mlp(100)
    opt = sgd(model.parameters())
    scheduler = halving(opt)
    step = PER_RANK * hvd.size()
    for epoch in range(EPOCHS):
        order = list(range(SAMPLES))
        random.Random(SEED + epoch).shuffle(order)
        for start in range(0, SAMPLES, step):
            x, y = data[order[start:start + step]]
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        scheduler.step()
    return model


def elastic_state(**plain) -> hvd.elastic.TorchState:
    """Every rank builds its own model (a seed of its own): the run's first sync gives every rank rank 0's."""
    model = mlp(100 + hvd.rank())
    opt = hvd.DistributedOptimizer(sgd(model.parameters()), named_parameters=model.named_parameters())
    return hvd.elastic.TorchState(model, opt, scheduler=halving(opt),
                                  sampler=hvd.elastic.ElasticSampler(dataset(), seed=SEED), epoch=0, batch=0,
                                  **plain)


def a_mismatch() -> None:
    """A HorovodInternalError on every rank (TensorMismatchError): the engine goes on."""
    hvd.allreduce(torch.zeros(hvd.rank() + 1), name="elastic.mismatch")


def an_abort() -> None:
    """A HorovodInternalError on every rank (EngineAbortedError), as when a rank's cell fails under %%hvd: the
    engine is restarted before the function runs again, as %%hvd does at the next cell."""
    if hvd.rank() == 0:
        hvd.abort("a rank failed")
    hvd.allreduce(torch.zeros(1), name="elastic.after_abort")


@hvd.elastic.run
def train(state: hvd.elastic.TorchState, fail_after=None, failure=None) -> None:
    """The loop of Horovod's elastic ImageNet example (examples/elastic/pytorch), with a ``failure`` after this
    run's step ``fail_after`` (counted from 1), before that batch is committed. The epoch's end is committed with
    the next epoch's number, so a run resumed from there starts it."""
    steps = 0
    while state.epoch < EPOCHS:
        loader = DataLoader(state.sampler.dataset, batch_size=PER_RANK, sampler=state.sampler)
        for state.batch, (x, y) in enumerate(loader):
            state.optimizer.zero_grad()
            F.cross_entropy(state.model(x), y).backward()
            state.optimizer.step()
            steps += 1
            if steps == fail_after:
                failure()
            state.sampler.record_batch(state.batch, PER_RANK)
            state.commit()
        state.scheduler.step()
        state.epoch += 1
        state.batch = 0
        state.sampler.set_epoch(state.epoch)
        state.commit()


def steps_per_epoch() -> int:
    return SAMPLES // (PER_RANK * hvd.size())


def check(state: hvd.elastic.TorchState) -> None:
    assert same_on_every_rank(flat(state.model))
    np.testing.assert_allclose(flat(state.model).numpy(), flat(reference()).numpy(), rtol=1e-5, atol=1e-6)
    assert state.epoch == EPOCHS and state.scheduler.last_epoch == EPOCHS


def test_an_elastic_run_trains_as_one_process_with_the_whole_batch():
    state = elastic_state(owner=f"rank {hvd.rank()}")
    with runtime_warnings() as told:
        train(state)
    assert not told, told  # the first sync made the ranks' models one: no first-step warning
    assert state.owner == "rank 0"  # plain values are rank 0's too
    check(state)


@pytest.mark.parametrize("failure", [a_mismatch, an_abort], ids=["a mismatch", "an abort"])
def test_a_failure_restores_the_last_commit_and_the_next_run_goes_on_from_it(failure):
    if failure is a_mismatch and hvd.size() == 1:
        pytest.skip("one rank cannot disagree with itself")
    state = elastic_state()
    with pytest.raises(hvd.HorovodInternalError) as raised:
        train(state, fail_after=steps_per_epoch() + 3, failure=failure)  # at batch 2 of epoch 1
    assert RESTORED_NOTE in raised.value.__notes__
    assert (state.epoch, state.batch) == (1, 1)  # the last commit: batch 1 of epoch 1 done
    assert state.sampler.processed_num == 2 * PER_RANK * hvd.size()  # batches 0 and 1 on every rank, not 2
    if failure is an_abort:
        restart_engine(jupyter_hvd)
    with runtime_warnings() as told:
        train(state)
    assert not told, told
    check(state)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_failures_at_steps_drawn_from_a_seed_each_resumed_end_where_one_run_does(seed):
    """Three failures in a row, each a mismatch or an abort at a step drawn from ``seed`` (alike on every rank),
    each followed by the next run from the last commit; then a run to the end."""
    draw = random.Random(seed)
    state = elastic_state()
    left = EPOCHS * steps_per_epoch()
    for _ in range(3):
        fail_after = draw.randint(1, left)
        failure = draw.choice([a_mismatch, an_abort] if hvd.size() > 1 else [an_abort])
        with pytest.raises(hvd.HorovodInternalError):
            train(state, fail_after=fail_after, failure=failure)
        left -= fail_after - 1  # the failed step is undone
        if failure is an_abort:
            restart_engine(jupyter_hvd)
    train(state)
    check(state)


def test_the_sampler_shares_what_is_left_however_little():
    sampler = hvd.elastic.ElasticSampler(list(range(10)), shuffle=False)
    sampler.load_state_dict({"epoch": 0, "processed_num": 9})
    assert list(sampler) == [9] and len(sampler) == 1  # fewer samples left than ranks: each rank gets one
    sampler.load_state_dict({"epoch": 0, "processed_num": 10})
    assert list(sampler) == [] and len(sampler) == 0
    sampler.set_epoch(1)
    mine = list(sampler)
    assert len(mine) == math.ceil(10 / hvd.size()) == len(sampler)
    assert set().union(*hvd.allgather_object(mine)) == set(range(10))
