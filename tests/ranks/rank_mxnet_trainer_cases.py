"""Generated cases for MXNet's DistributedTrainer: seeded random Gluon models of dense layers and embeddings, which
each rank uses or leaves out at random at each backward pass, under random arguments (optimizer, compression,
gradient_predivide_factor, num_groups, prefix) and random ways of stepping (grad_req 'write', or 'add' over one or
two passes, step() or allreduce_grads() then update(), layers frozen at some steps on every rank). Each case checks
that every rank holds the same parameters, to the bit, and that they match one process that ran every rank's
passes with gluon.Trainer's ``ignore_stale_grad=True``. Some cases wrap the optimizer in DistributedOptimizer under a
plain gluon.Trainer instead, where every rank uses every layer: that optimizer sees one parameter at a time, so a
layer one rank leaves out would leave the others waiting for its allreduce (as in Horovod; see the README).

A failing case names its seed: JUPYTER_HVD_TRAINER_SEED=<seed> runs that case alone, at the same rank count.
"""
import os

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon

import jupyter_hvd.mxnet as hvd

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:mxnet.*")

SEED_VAR = "JUPYTER_HVD_TRAINER_SEED"
CASES = 30
STEPS = 3
WIDTH = 4
ROWS = 3
VOCABULARY = 12
OPTIMIZERS = {"sgd": {}, "momentum": {"momentum": 0.9, "wd": 1e-3}, "nag": {"momentum": 0.9}, "adam": {},
              "rmsprop": {}}
# Adam and RMSProp divide by a gradient's size, so a last-bit difference in a near-zero sum (the ranks add in another
# order than one process) moves a parameter by up to 1e-5, and float16's rounding of one by up to its whole step.
SCALE_FREE = ("adam", "rmsprop")


def seeds() -> list:
    given = os.environ.get(SEED_VAR)
    return [int(given)] if given else list(range(2000, 2000 + CASES))


def draw_layers(rng: np.random.Generator) -> dict:
    """name -> kind ("dense" or "embedding"), in the order the forward pass uses them."""
    return {f"l{i}": str(rng.choice(["dense", "embedding"])) for i in range(int(rng.integers(1, 5)))}


def build(layers: dict, seed: int, grad_req: str) -> dict:
    mx.random.seed(seed)
    model = {name: gluon.nn.Dense(WIDTH, in_units=WIDTH) if kind == "dense" else gluon.nn.Embedding(VOCABULARY, WIDTH)
             for name, kind in layers.items()}
    for block in model.values():
        block.initialize(mx.init.Uniform(0.5))
        block.collect_params().setattr("grad_req", grad_req)
    return model


def parameters(model: dict) -> dict:
    return {f"{name}.{key}": p for name, block in model.items() for key, p in block.collect_params().items()}


def draw_arguments(rng: np.random.Generator, wrapper: str, optimizer: str) -> dict:
    if wrapper == "optimizer":
        return {"gradient_predivide_factor": 2.0 if rng.random() < 0.3 else 1.0, "num_groups": int(rng.choice([0, 2]))}
    fp16 = rng.random() < 0.2 and optimizer not in SCALE_FREE
    return {"compression": hvd.Compression.fp16 if fp16 else hvd.Compression.none,
            "gradient_predivide_factor": 2.0 if rng.random() < 0.3 else 1.0,
            "num_groups": int(rng.choice([0, 0, 1, 2, 3])), "prefix": "t." if rng.random() < 0.3 else None}


def draw_steps(rng: np.random.Generator, layers: dict, passes: int, share: float) -> list:
    """For each step: the layers frozen in it, whether it steps by allreduce_grads() then update(), and for each
    pass and rank the layers that rank uses (each with probability ``share``) and its inputs."""
    return [{"frozen": [name for name in layers if rng.random() < 0.15], "split": bool(rng.random() < 0.3),
             "passes": [[{"used": [name for name in layers if rng.random() < share],
                          "x": rng.standard_normal((ROWS, WIDTH)).astype(np.float32),
                          "ids": rng.integers(0, VOCABULARY, ROWS).astype(np.float32)}
                         for _ in range(hvd.size())] for _ in range(passes)]}
            for _ in range(STEPS)]


def loss(model: dict, layers: dict, work: dict) -> mx.nd.NDArray:
    h = mx.nd.array(work["x"])
    h.attach_grad()  # so that a pass that uses no layer still has a backward
    for name in work["used"]:
        h = model[name](h) if layers[name] == "dense" else h + model[name](mx.nd.array(work["ids"]))
    return h.square().sum()


def flat(model: dict) -> np.ndarray:
    return np.concatenate([p.data().asnumpy().ravel() for p in parameters(model).values()])


def describe(seed: int, layers: dict, arguments: dict, plan: list) -> str:
    named = dict(arguments, compression=getattr(arguments.get("compression"), "__name__", None))
    steps = [{"frozen": step["frozen"], "split": step["split"],
              "used by pass and rank": [[work["used"] for work in ranks] for ranks in step["passes"]]}
             for step in plan]
    return f"{SEED_VAR}={seed} at {hvd.size()} ranks: layers {layers}, arguments {named}; {steps}"


def step_both(trainers: tuple, split: bool, batch_size: int) -> None:
    """Step the distributed trainer (this rank's batch) and the one-process one (every rank's)."""
    for trainer, size in zip(trainers, (batch_size, batch_size * hvd.size())):
        if split:
            trainer.allreduce_grads()
            trainer.update(size, ignore_stale_grad=True)
        else:
            trainer.step(size, ignore_stale_grad=True)


@pytest.mark.parametrize("seed", seeds())
def test_a_generated_case_trains_alike_on_every_rank_and_as_one_process(seed):
    rng = np.random.default_rng(seed)
    layers = draw_layers(rng)
    optimizer = str(rng.choice(list(OPTIMIZERS)))
    passes = int(rng.integers(1, 3))
    grad_req = "add" if passes == 2 or rng.random() < 0.3 else "write"
    model, reference = build(layers, seed, grad_req), build(layers, seed, grad_req)
    wrapper = "optimizer" if rng.random() < 0.25 else "trainer"
    arguments = draw_arguments(rng, wrapper, optimizer)
    plan = draw_steps(rng, layers, passes, 1.0 if wrapper == "optimizer" else 0.6)
    case = describe(seed, layers, dict(arguments, optimizer=optimizer, grad_req=grad_req, wrapper=wrapper), plan)
    options = dict(OPTIMIZERS[optimizer], learning_rate=0.1)
    name = "sgd" if optimizer == "momentum" else optimizer
    if wrapper == "optimizer":
        # gluon.Trainer's batch-size scaling lands on the wrapper, which the wrapped optimizer never reads (see the
        # README): the batch size goes in rescale_grad.
        wrapped = hvd.DistributedOptimizer(mx.optimizer.create(name, rescale_grad=1.0 / (ROWS * passes), **options),
                                           **arguments)
        trainer = gluon.Trainer(parameters(model), wrapped, kvstore=None)
    else:
        trainer = hvd.DistributedTrainer(parameters(model), name, dict(options), **arguments)
    one = gluon.Trainer(parameters(reference), name, dict(options), kvstore=None)
    for step in plan:
        for m in (model, reference):
            for layer, block in m.items():
                block.collect_params().setattr("grad_req", "null" if layer in step["frozen"] else grad_req)
        for ranks in step["passes"]:
            with autograd.record():
                mine = loss(model, layers, ranks[hvd.rank()])
                everyone = mx.nd.add_n(*[loss(reference, layers, work) for work in ranks])
            mine.backward()
            everyone.backward()
        step_both((trainer, one), step["split"], ROWS * passes)
        if grad_req == "add":
            for m in (model, reference):
                for p in parameters(m).values():
                    p.zero_grad()
        values = flat(model)
        all_values = hvd.allgather(mx.nd.array(values[None]), name="check.same").asnumpy()
        assert all(np.array_equal(all_values[0], row) for row in all_values), f"the ranks differ: {case}"
    atol = 1e-4 if optimizer in SCALE_FREE else 1e-6
    rtol, atol = (1e-2, 1e-3) if arguments.get("compression") == hvd.Compression.fp16 else (1e-5, atol)
    np.testing.assert_allclose(flat(model), flat(reference), rtol=rtol, atol=atol, err_msg=case)
