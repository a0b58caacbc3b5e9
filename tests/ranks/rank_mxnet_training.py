"""Gluon training with jupyter_hvd.mxnet: broadcast_parameters, DistributedTrainer/Optimizer equivalence with
single-process training on the whole batch, and identical parameters on every rank after every step."""
import os
import time
import warnings

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon
from mxnet.gluon import nn

import jupyter_hvd
import jupyter_hvd.mxnet as hvd
from jupyter_hvd.magic.engine_restart import restart_engine
from jupyter_hvd.monitor.samples import counted_since, snapshot
from told import check_first_step_warning, check_replaced, runtime_warnings

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:mxnet.*")

PER_RANK = 6  # samples per rank and step
FEATURES, CLASSES = 8, 4


def mlp(seed: int, deferred: bool = False) -> nn.HybridSequential:
    mx.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu", in_units=0 if deferred else FEATURES),
            nn.Dense(CLASSES, in_units=0 if deferred else 16))
    net.initialize(mx.init.Xavier())
    return net


def batch(step: int):
    """The whole job's batch for ``step`` (every rank can build it) and this rank's shard of it."""
    rng = np.random.default_rng(step)
    x = rng.normal(size=(PER_RANK * hvd.size(), FEATURES)).astype(np.float32)
    y = rng.integers(0, CLASSES, size=PER_RANK * hvd.size()).astype(np.float32)
    shard = slice(hvd.rank() * PER_RANK, (hvd.rank() + 1) * PER_RANK)
    return (mx.nd.array(x), mx.nd.array(y)), (mx.nd.array(x[shard]), mx.nd.array(y[shard]))


def train_step(net, trainer, x, y, batch_size):
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    with autograd.record():
        loss = loss_fn(net(x), y)
    loss.backward()
    trainer.step(batch_size)


def flat(net) -> np.ndarray:
    return np.concatenate([p.data().asnumpy().ravel() for p in net.collect_params().values()])


def same_on_every_rank(values: np.ndarray) -> bool:
    everyone = hvd.allgather(mx.nd.array(values[None], dtype=values.dtype), name="check.same").asnumpy()
    return all(np.array_equal(everyone[0], row) for row in everyone)


def test_broadcast_parameters_including_deferred():
    net = mlp(seed=100 + hvd.rank())
    net.add(nn.Dense(3))  # deferred: its shape is known only at the first forward pass
    net[-1].initialize(mx.init.Normal(1.0 + hvd.rank()))
    root = hvd.size() - 1
    root_first = hvd.broadcast_object(net[0].weight.data().asnumpy(), root_rank=root, name="root.first")
    hvd.broadcast_parameters(net.collect_params(), root_rank=root)
    np.testing.assert_array_equal(net[0].weight.data().asnumpy(), root_first)
    net(mx.nd.ones((2, FEATURES))).wait_to_read()  # initialises and broadcasts the deferred layer
    assert same_on_every_rank(flat(net))


def conv_net_after_inference(seed: int) -> nn.HybridSequential:
    """Hybridized conv layers after an inference pass: MKLDNN may now hold the weights in its own layout."""
    mx.random.seed(seed)
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3), nn.Conv2D(8, 3))
    net.initialize()
    net.hybridize()
    net(mx.nd.ones((2, 3, 12, 12))).wait_to_read()
    return net


def test_broadcast_parameters_after_an_inference_pass():
    net = conv_net_after_inference(seed=hvd.rank())
    hvd.broadcast_parameters(net.collect_params())
    assert same_on_every_rank(flat(net))
    weight = net[1].weight.data()
    total = hvd.allreduce(weight, op=hvd.Sum, name="mkldnn.out_of_place")  # reads the weight where it is
    try:
        np.testing.assert_allclose(total.asnumpy(), weight.asnumpy() * hvd.size(), rtol=1e-6)  # plain layout
    except mx.base.MXNetError as e:
        assert "MKLDNN" in str(e) and "mkldnn.out_of_place" in str(e)
        mx.nd.waitall()
    assert net(mx.nd.ones((2, 3, 12, 12))).shape == (2, 8, 8, 8)


def test_in_place_on_an_mkldnn_layout_is_a_clear_error():
    net = conv_net_after_inference(seed=3)
    weight = net[0].weight.data()
    expected = weight.asnumpy() * hvd.size()
    hvd.allreduce_(weight, op=hvd.Sum, name="mkldnn.in_place")
    try:
        np.testing.assert_allclose(weight.asnumpy(), expected, rtol=1e-6)  # plain layout on this CPU
    except mx.base.MXNetError as e:
        assert "MKLDNN" in str(e) and "mkldnn.in_place" in str(e)
        mx.nd.waitall()  # MXNet raises an operation's error once: it is not reported again


def test_broadcast_parameters_dict_of_ndarrays_with_prefix():
    arg_params = {"w": mx.nd.full((3, 2), float(hvd.rank())), "b": mx.nd.full((2,), 10.0 + hvd.rank())}
    hvd.broadcast_parameters(arg_params, root_rank=0, prefix="module.")
    np.testing.assert_array_equal(arg_params["w"].asnumpy(), np.zeros((3, 2), np.float32))
    np.testing.assert_array_equal(arg_params["b"].asnumpy(), np.full(2, 10.0, np.float32))
    with pytest.raises(ValueError):
        hvd.broadcast_parameters([mx.nd.ones((1,))])


def single_process_reference(seed, steps, optimizer_params):
    """Plain gluon.Trainer on the whole batch (no ranks involved)."""
    net = mlp(seed)
    trainer = gluon.Trainer(net.collect_params(), "sgd", dict(optimizer_params), kvstore=None)
    for step in range(steps):
        (x, y), _ = batch(step)
        train_step(net, trainer, x, y, PER_RANK * hvd.size())
    return flat(net)


OPT = {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3}


@pytest.mark.parametrize("kwargs,atol", [
    ({}, 1e-6),
    ({"gradient_predivide_factor": 2.0}, 1e-6),
    ({"num_groups": 2}, 1e-6),
    ({"compression": hvd.Compression.fp16}, 2e-3),
], ids=["plain", "predivide", "groups", "fp16"])
def test_distributed_trainer_matches_one_process_on_the_whole_batch(kwargs, atol):
    net = mlp(seed=7)
    hvd.broadcast_parameters(net.collect_params())
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", dict(OPT), **kwargs)
    for step in range(2):
        _, (x, y) = batch(step)
        train_step(net, trainer, x, y, PER_RANK)
    np.testing.assert_allclose(flat(net), single_process_reference(7, 2, OPT), rtol=0, atol=atol)


def test_distributed_optimizer_matches_one_process_on_the_whole_batch():
    """As in horovod.mxnet, the wrapped optimizer's own rescale_grad (not the Trainer's) scales the gradient."""
    net = mlp(seed=8)
    opt = mx.optimizer.SGD(rescale_grad=1.0 / PER_RANK, **OPT)
    trainer = gluon.Trainer(net.collect_params(), hvd.DistributedOptimizer(opt), kvstore=None)
    for step in range(2):
        _, (x, y) = batch(step)
        train_step(net, trainer, x, y, PER_RANK)
    np.testing.assert_allclose(flat(net), single_process_reference(8, 2, OPT), rtol=0, atol=1e-6)


def test_distributed_optimizer_groups_and_unwrapping():
    net = mlp(seed=9)
    opt = hvd.DistributedOptimizer(mx.optimizer.SGD(**OPT), num_groups=3)
    with pytest.warns(UserWarning, match="unwrapped"):
        trainer = hvd.DistributedTrainer(net.collect_params(), opt)
    assert trainer._optimizer is opt._optimizer and opt._optimizer.rescale_grad == 1.0
    grouped = hvd.DistributedOptimizer(mx.optimizer.SGD(rescale_grad=1.0 / PER_RANK, **OPT), num_groups=3)
    net = mlp(seed=8)
    trainer = gluon.Trainer(net.collect_params(), grouped, kvstore=None)
    for step in range(2):
        _, (x, y) = batch(step)
        train_step(net, trainer, x, y, PER_RANK)
    np.testing.assert_allclose(flat(net), single_process_reference(8, 2, OPT), rtol=0, atol=1e-6)


def test_parameters_identical_after_every_step_and_samples_counted():
    origin = snapshot()
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, activation="relu"), nn.MaxPool2D(), nn.Flatten(), nn.Dense(CLASSES))
    ctx = mx.cpu(hvd.local_rank())  # Horovod's per-rank context idiom
    net.initialize(mx.init.Xavier(), ctx=ctx)  # shapes deferred: broadcast at the first forward pass
    net.hybridize()
    hvd.broadcast_parameters(net.collect_params())
    trainer = hvd.DistributedTrainer(net.collect_params(), "adam", {"learning_rate": 0.01}, prefix="conv.")
    rng = np.random.default_rng(hvd.rank())
    for step in range(4):
        x = mx.nd.array(rng.normal(size=(PER_RANK, 1, 10, 10)), ctx=ctx)
        y = mx.nd.array(rng.integers(0, CLASSES, size=PER_RANK), ctx=ctx)
        train_step(net, trainer, x, y, PER_RANK)
        assert same_on_every_rank(flat(net)), f"parameters differ after step {step}"
    assert counted_since(origin)[:2] == (PER_RANK * 4, 4)


def test_allreduce_grads_then_update():
    """The clipping pattern: reduce the gradients explicitly, inspect them, then update."""
    net = mlp(seed=11)
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    _, (x, y) = batch(0)
    with autograd.record():
        loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y)
    loss.backward()
    trainer.allreduce_grads()
    grads = np.concatenate([p.grad().asnumpy().ravel() for p in net.collect_params().values()])
    assert same_on_every_rank(grads)
    trainer.update(PER_RANK)
    assert same_on_every_rank(flat(net))


def test_a_layer_only_some_ranks_use_needs_no_ignore_stale_grad_and_one_no_rank_uses_is_stale_everywhere():
    """A head that only the first rank's pass uses: its gradient is fresh on some rank, so every rank updates it, as
    one process on the whole batch would, without ignore_stale_grad. A head no rank uses is stale everywhere: every
    rank raises Gluon's UserWarning (none waits for another), or with ignore_stale_grad=True every rank skips it."""
    net, head = mlp(seed=12), nn.Dense(CLASSES, in_units=CLASSES)
    head.initialize(mx.init.Xavier())
    params = {**net.collect_params(), **{f"head.{k}": v for k, v in head.collect_params().items()}}
    trainer = hvd.DistributedTrainer(params, "sgd", {"learning_rate": 0.1})
    _, (x, y) = batch(0)

    def step(use_head: bool, **kwargs):
        with autograd.record():
            out = net(x)
            loss = gluon.loss.SoftmaxCrossEntropyLoss()(head(out) if use_head else out, y)
        loss.backward()
        trainer.step(PER_RANK, **kwargs)
        return np.concatenate([p.data().asnumpy().ravel() for p in params.values()])

    before = head.weight.data().asnumpy()
    assert same_on_every_rank(step(use_head=hvd.rank() == 0))
    assert not np.array_equal(before, head.weight.data().asnumpy())
    with pytest.raises(UserWarning, match="stale"):
        step(use_head=False)
    after = head.weight.data().asnumpy()
    assert same_on_every_rank(step(use_head=False, ignore_stale_grad=True))
    np.testing.assert_array_equal(after, head.weight.data().asnumpy())


def states(trainer, net) -> np.ndarray:
    """Every parameter's optimizer state (SGD's momentum; Adam's mean and variance), in flat(net)'s order (the
    trainer indexes its parameters by name)."""
    index = {p.name: i for i, p in enumerate(trainer._params)}
    held = (trainer._updaters[0].states[index[name]] for name in net.collect_params())
    return np.concatenate([a.asnumpy().ravel() for s in held for a in (s if isinstance(s, tuple) else (s,))])


def a_step_apart_then_on(net, trainer, update_alone) -> tuple:
    """A step on every rank, then an update of the last rank's alone (``update_alone``, with its own gradients:
    the failure landed after it updated and before the others did), the engine's restart that %%hvd makes
    after a failed cell, and the next step: it tells the last rank only, and leaves every rank with the same
    parameters and states. Returns rank 0's parameters and states from before that step."""
    _, (x, y) = batch(0)
    train_step(net, trainer, x, y, PER_RANK)
    if hvd.rank() == hvd.size() - 1:
        with autograd.record():
            loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y)
        loss.backward()
        update_alone()
    mx.nd.waitall()
    restart_engine(jupyter_hvd)
    before = tuple(hvd.broadcast(mx.nd.array(a), 0, name=f"check.before.{i}").asnumpy()
                   for i, a in enumerate((flat(net), states(trainer, net))))
    with runtime_warnings() as told:
        _, (x, y) = batch(1)
        train_step(net, trainer, x, y, PER_RANK)
        mx.nd.waitall()
    check_replaced(told, hvd.rank(), hvd.size() - 1)
    assert same_on_every_rank(flat(net)) and same_on_every_rank(states(trainer, net))
    assert not np.allclose(states(trainer, net), before[1])
    return before


def test_ranks_a_failed_cell_left_a_step_apart_take_the_first_ranks_parameters_and_state():
    """A failure between one rank's update and another's leaves them a step apart, silently; the first step
    after the engine's restart (what %%hvd does after a failed cell) gives every rank rank 0's parameters and
    momentum before it updates. (The torch frontend's counterpart is in rank_torch_cells.py.)"""
    if hvd.size() == 1:
        pytest.skip("one rank cannot disagree with itself")
    net = mlp(seed=13)
    hvd.broadcast_parameters(net.collect_params())
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", dict(OPT), prefix="apart.")
    w0, _ = a_step_apart_then_on(net, trainer, lambda: trainer.update(PER_RANK))
    # SGD with momentum: w = w0 + m, so rank 0's w0 is the base every rank updated from.
    np.testing.assert_allclose(flat(net) - states(trainer, net), w0, rtol=0, atol=1e-6)


@pytest.mark.parametrize("optimizer,aggregate", [("sgd", None), ("sgd", 0), ("adam", None)],
                         ids=["sgd-aggregated", "sgd-one-at-a-time", "adam"])
def test_a_distributed_optimizers_ranks_left_a_step_apart_take_the_first_ranks_values(optimizer, aggregate):
    """The same for a plain gluon.Trainer over hvd.DistributedOptimizer, which sees one update call at a time
    (MXNet's aggregated calls of a few parameters, or one at a time): each parameter is mended at its first
    update of the run, update counts included (Adam's bias correction reads them: the weights would differ)."""
    if hvd.size() == 1:
        pytest.skip("one rank cannot disagree with itself")
    net = mlp(seed=14)
    hvd.broadcast_parameters(net.collect_params())
    params = dict(OPT) if optimizer == "sgd" else {"learning_rate": 0.01}
    opt = mx.optimizer.create(optimizer, rescale_grad=1.0 / PER_RANK, **params)
    if aggregate is not None:
        opt.aggregate_num = aggregate
    wrapper = hvd.DistributedOptimizer(opt)
    trainer = gluon.Trainer(net.collect_params(), wrapper, kvstore=None)

    def update_alone():  # through the wrapped optimizer: no allreduce
        trainer._updaters[0].optimizer = opt
        trainer.update(PER_RANK)
        trainer._updaters[0].optimizer = wrapper

    w0, _ = a_step_apart_then_on(net, trainer, update_alone)
    if optimizer == "sgd":
        np.testing.assert_allclose(flat(net) - states(trainer, net), w0, rtol=0, atol=1e-6)
    assert same_on_every_rank(np.array([opt.num_update, *opt._index_update_count.values()]))


@pytest.mark.parametrize("kind", ["DistributedTrainer", "DistributedOptimizer", "DistributedOptimizer-one-at-a-time"])
def test_ranks_that_made_their_own_models_are_warned_once_at_the_first_step(kind):
    """Each rank initialised its own model and nothing broadcast it: told once, at the first step (MXNet's
    DistributedOptimizer sees that step as several update calls, aggregated or one per parameter)."""
    if hvd.size() == 1:
        pytest.skip("one rank cannot disagree with itself")
    net = mlp(seed=400 + hvd.rank())
    if kind == "DistributedTrainer":
        trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", dict(OPT), prefix="own.")
    else:
        opt = mx.optimizer.SGD(rescale_grad=1.0 / PER_RANK, **OPT)
        opt.aggregate_num = 0 if kind.endswith("one-at-a-time") else opt.aggregate_num
        trainer = gluon.Trainer(net.collect_params(), hvd.DistributedOptimizer(opt), kvstore=None)
    with runtime_warnings() as told:
        for step in range(2):
            _, (x, y) = batch(step)
            train_step(net, trainer, x, y, PER_RANK)
        mx.nd.waitall()
    check_first_step_warning(told, "hvd.broadcast_parameters(net.collect_params(), root_rank=0)")
    assert not same_on_every_rank(flat(net))


@pytest.mark.parametrize("kind", ["DistributedTrainer", "DistributedOptimizer"])
def test_batch_norms_running_statistics_differing_between_ranks_are_not_told(kind):
    """BatchNorm's running mean and variance (grad_req 'null') follow each rank's own batches, so after a step
    they differ between ranks, as they do under Horovod: the first step's check compares the trained parameters
    only, and says nothing."""
    if hvd.size() == 1:
        pytest.skip("one rank cannot disagree with itself")
    mx.random.seed(7)
    net = nn.HybridSequential()
    net.add(nn.Dense(16, in_units=FEATURES), nn.BatchNorm(in_channels=16), nn.Dense(CLASSES, in_units=16))
    net.initialize(mx.init.Xavier())
    params = net.collect_params()
    hvd.broadcast_parameters(params)
    if kind == "DistributedTrainer":
        trainer = hvd.DistributedTrainer(params, "sgd", dict(OPT), prefix="batchnorm.")
    else:
        trainer = gluon.Trainer(params, hvd.DistributedOptimizer(mx.optimizer.SGD(rescale_grad=1.0 / PER_RANK, **OPT)),
                                kvstore=None)
    with runtime_warnings() as told:
        for step in range(2):
            _, (x, y) = batch(step)
            train_step(net, trainer, x, y, PER_RANK)
        mx.nd.waitall()
    assert not told, told
    trained = np.concatenate([p.data().asnumpy().ravel() for p in params.values() if p.grad_req != "null"])
    running = np.concatenate([p.data().asnumpy().ravel() for p in params.values() if p.grad_req == "null"])
    assert same_on_every_rank(trained)
    assert not same_on_every_rank(running)


@pytest.mark.parametrize("seed", [21, 22, 23])
def test_seeded_failures_cut_a_distributed_optimizers_steps_short_anywhere(seed):
    """Random sequences (replay one with its seed): a few steps, then a failure that lands anywhere in a step, a
    random set of ranks having updated the first k parameters alone, the restart, and the next step. Every
    rank then holds the same weights, states and counts; SGD's w - m is rank 0's weight from before that step;
    exactly the ranks whose parameters differed from rank 0's are warned (a rank that updated alone did so with
    its own gradients, so it differs from every other rank)."""
    if hvd.size() == 1:
        pytest.skip("one rank cannot disagree with itself")
    rng = np.random.default_rng(seed)
    net = mlp(seed=seed)
    hvd.broadcast_parameters(net.collect_params(), prefix=f"seeded{seed}.")
    opt = mx.optimizer.SGD(rescale_grad=1.0 / PER_RANK, **OPT)
    opt.aggregate_num = int(rng.choice([0, 2, 4]))
    wrapper = hvd.DistributedOptimizer(opt)
    trainer = gluon.Trainer(net.collect_params(), wrapper, kvstore=None)
    updater, n = trainer._updaters[0], len(trainer._params)
    for round_ in range(3):
        for step in range(int(rng.integers(1, 3))):
            _, (x, y) = batch(10 * round_ + step)
            train_step(net, trainer, x, y, PER_RANK)
        alone, k = rng.random(hvd.size()) < 0.5, int(rng.integers(1, n + 1))
        if alone[hvd.rank()]:  # these ranks updated the first k parameters before the failure stopped them
            with autograd.record():
                loss = gluon.loss.SoftmaxCrossEntropyLoss()(net(x), y)
            loss.backward()
            updater.optimizer = opt
            updater(list(range(k)), [p.grad() for p in trainer._params[:k]], [p.data() for p in trainer._params[:k]])
            updater.optimizer = wrapper
        mx.nd.waitall()
        restart_engine(jupyter_hvd)
        w0 = hvd.broadcast(mx.nd.array(flat(net)), 0, name=f"check.w0.{seed}.{round_}").asnumpy()
        with runtime_warnings() as told:
            _, (x, y) = batch(10 * round_ + 9)
            train_step(net, trainer, x, y, PER_RANK)
            mx.nd.waitall()
        replay = f"seed {seed}, round {round_}: alone {alone.tolist()}, k {k}, aggregate {opt.aggregate_num}"
        # a rank that updated alone used its own gradients: it differs from rank 0 if either of them did
        assert len(told) == int(hvd.rank() != 0 and (alone[hvd.rank()] or alone[0])), (replay, told)
        assert same_on_every_rank(flat(net)) and same_on_every_rank(states(trainer, net)), replay
        assert same_on_every_rank(np.array([opt.num_update, *opt._index_update_count.values()])), replay
        np.testing.assert_allclose(flat(net) - states(trainer, net), w0, rtol=0, atol=1e-6, err_msg=replay)


def test_deprecated_average_in_a_training_step_still_works():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = hvd.allreduce(mx.nd.ones((2,)) * hvd.rank(), average=True, name="deprecated.avg.train")
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    np.testing.assert_allclose(out.asnumpy(), np.full(2, (hvd.size() - 1) / 2))


class _Gate(mx.operator.CustomOp):
    """Passes data through; its backward, which the first layer's gradient waits for, first waits until the
    last layer's allreduce has begun on this rank (or 60 s), and records whether it did. NEGOTIATE ends, per
    tensor, where its collective begins; fused collectives are named after their first tensor only."""

    seen: list = []

    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], in_data[0])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        deadline = time.monotonic() + 60
        reduced = False
        while not reduced and time.monotonic() < deadline:
            reduced = any(e.phase == "NEGOTIATE" and e.name == f"allreduce.overlap.{_Gate.later}"
                          for e in jupyter_hvd.drain_events(_Gate.since)[0])
            time.sleep(0.01)
        _Gate.seen.append(reduced)
        self.assign(in_grad[0], req[0], out_grad[0])


@mx.operator.register("overlap_gate")
class _GateProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=True)

    def create_operator(self, ctx, shapes, dtypes):
        return _Gate()


class GateBlock(nn.HybridBlock):
    def hybrid_forward(self, F, x):
        return F.Custom(x, op_type="overlap_gate")


def test_gradient_allreduce_overlaps_backward():
    """The last layer's gradient is reduced before backward has produced the first layer's.

    A gate between the first and second layer holds the first layer's gradient back until the last layer's
    allreduce has run (60 s at most), however busy the machine: the allreduce must start as soon as its own
    gradient exists, not once backward is over. MXNet runs a small backward pass as one bulked engine
    operation (all gradients at once), so this needs MXNET_EXEC_BULK_EXEC_TRAIN=0; large models are split
    into bulks and overlap between them.
    """
    if os.environ.get("MXNET_EXEC_BULK_EXEC_TRAIN") != "0" or hvd.size() == 1:
        pytest.skip("needs MXNET_EXEC_BULK_EXEC_TRAIN=0 and several ranks")
    net = nn.HybridSequential()
    net.add(nn.Conv2D(8, 3, in_channels=4), GateBlock(), nn.Conv2D(8, 3, in_channels=8), nn.Flatten(),
            nn.Dense(CLASSES))
    net.initialize(mx.init.Xavier())
    x, y = mx.nd.ones((4, 4, 12, 12)), mx.nd.zeros((4,))
    with autograd.train_mode():
        net(x)  # fixes the Dense layer's input size
    hvd.broadcast_parameters(net.collect_params(), prefix="overlap.")
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.01}, prefix="overlap.")
    index = {p.name: i for i, p in enumerate(trainer._params)}
    _Gate.later = index[net[-1].weight.name]
    _Gate.seen.clear()
    for _ in range(2):
        events, _ = jupyter_hvd.drain_events()
        _Gate.since = events[-1].seq + 1 if events else 0
        train_step(net, trainer, x, y, 4)
        mx.nd.waitall()
    assert _Gate.seen == [True, True], "the last layer's allreduce waited for the whole backward pass"
