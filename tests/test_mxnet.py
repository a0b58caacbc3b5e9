"""jupyter_hvd.mxnet as a drop-in for horovod.mxnet: API surface here, behaviour on real MPI ranks."""
import pickle
import re
import textwrap

import numpy as np
import pytest

mx = pytest.importorskip("mxnet")

import jupyter_hvd.mxnet as hvd  # noqa: E402
from jupyter_hvd import _C  # noqa: E402
from jupyter_hvd.mxnet.optimizer import split_list  # noqa: E402
from horovod_api import COMMON_EXPORTS, MPI_OPS_BASICS, check_signature, check_submodules  # noqa: E402
from multirank import ROOT, run_rank_tests, run_ranks  # noqa: E402

# One compute thread per rank: the test box has two cores for up to four ranks.
ENV = {"OMP_NUM_THREADS": "1", "MXNET_CPU_WORKER_NTHREADS": "1", "PYTHONWARNINGS": "ignore::DeprecationWarning"}

# Horovod 0.28.1's horovod.mxnet signatures: (parameter, default) in order; None marks "no default".
HOROVOD_SIGNATURES = {
    "allreduce": ["tensor", ("average", None), ("name", None), ("priority", 0), ("prescale_factor", 1.0),
                  ("postscale_factor", 1.0), ("process_set", "global_process_set"), ("op", None)],
    "broadcast": ["tensor", "root_rank", ("name", None), ("priority", 0), ("process_set", "global_process_set")],
    "allgather": ["tensor", ("name", None), ("priority", 0), ("process_set", "global_process_set")],
    "alltoall": ["tensor", ("splits", None), ("name", None), ("priority", 0), ("process_set", "global_process_set")],
    "reducescatter": ["tensor", ("op", "Average"), ("name", None), ("priority", 0),
                      ("process_set", "global_process_set"), ("prescale_factor", 1.0), ("postscale_factor", 1.0)],
    "broadcast_parameters": ["params", ("root_rank", 0), ("prefix", None)],
    "broadcast_object": ["obj", ("root_rank", 0), ("name", None)],
    "allgather_object": ["obj", ("name", None)],
    "DistributedOptimizer": ["optimizer", ("gradient_predivide_factor", 1.0), ("num_groups", 0),
                             ("process_set", "global_process_set")],
    "DistributedTrainer": ["params", "optimizer", ("optimizer_params", None), ("compression", "Compression.none"),
                           ("gradient_predivide_factor", 1.0), ("prefix", None), ("num_groups", 0),
                           ("process_set", "global_process_set")],
    "init": [("comm", None), ("process_sets", None)],
    "ProcessSet": ["ranks_or_comm"],
    "start_timeline": ["file_path", ("mark_cycles", False)],
}
HOROVOD_SIGNATURES.update({
    "allreduce_": HOROVOD_SIGNATURES["allreduce"],
    "grouped_allreduce": ["tensors"] + HOROVOD_SIGNATURES["allreduce"][1:],
    "grouped_allreduce_": ["tensors"] + HOROVOD_SIGNATURES["allreduce"][1:],
    "broadcast_": HOROVOD_SIGNATURES["broadcast"],
    "grouped_allgather": ["tensors"] + HOROVOD_SIGNATURES["allgather"][1:],
    "grouped_reducescatter": ["tensors"] + HOROVOD_SIGNATURES["reducescatter"][1:],
})
@pytest.mark.parametrize("name", sorted(HOROVOD_SIGNATURES))
def test_signature_matches_horovod(name):
    """Same parameters, order and defaults; extras (like process_set on the object collectives) only after them."""
    check_signature(hvd, name, HOROVOD_SIGNATURES[name])


# Horovod 0.28.1's horovod.mxnet submodules and what code imports from them.
SUBMODULES = {
    "mpi_ops": MPI_OPS_BASICS + ("allreduce allreduce_ grouped_allreduce grouped_allreduce_ allgather "
                                 "grouped_allgather broadcast broadcast_ alltoall reducescatter "
                                 "grouped_reducescatter").split(),
    "functions": ["allgather_object", "broadcast_object"],
    "compression": ["Compression"],
}


def test_horovods_submodules_have_its_names():
    check_submodules("jupyter_hvd.mxnet", SUBMODULES)


def test_everything_else_horovod_exports_is_here():
    assert all(hasattr(hvd, n) for n in COMMON_EXPORTS)
    assert len({hvd.Average, hvd.Sum, hvd.Adasum, hvd.Min, hvd.Max, hvd.Product}) == 6
    assert hasattr(_C, "mxnet_push"), "the extension was built without its MXNet bridge"


def test_ops_before_init_raise_a_clear_error():
    if hvd.is_initialized():
        pytest.skip("another test initialised the engine in this process")
    with pytest.raises(ValueError, match="init"):
        hvd.allreduce_(mx.nd.ones((2,)))
    with pytest.raises(ValueError, match="init"):
        hvd.allgather(mx.nd.ones((2,)))


def test_compression():
    x = mx.nd.array([1.5, -2.25], dtype="float32")
    sent, ctx = hvd.Compression.fp16.compress(x)
    assert sent.dtype == np.float16 and hvd.Compression.fp16.decompress(sent, ctx).dtype == x.dtype
    ints = mx.nd.array([1, 2], dtype="int32")
    assert hvd.Compression.fp16.compress(ints)[0] is ints
    assert hvd.Compression.none.compress(x) == (x, None) and hvd.Compression.none.decompress(x, None) is x


def test_split_list_matches_horovods_grouping():
    assert split_list(list(range(7)), 3) == [[0, 1, 2], [3, 4], [5, 6]]
    assert split_list([1, 2], 3) == [[1], [2], []]


def test_each_failing_status_is_an_mxnet_error_of_the_cores_class():
    """The text the bridge gives MXNet for a failed op, and a synchronous op's core error, both become an
    MXNetError that is also the class, message (and abort origin) the other APIs raise for that status."""
    from mxnet.base import MXNetError, error_types  # the classes MXNet raises, by the text's first word
    from jupyter_hvd import errors
    from jupyter_hvd.mxnet.errors import CLASS_NAMES, CLASSES, as_mxnet_error

    assert len(CLASS_NAMES) == len(_C.StatusCode) and CLASS_NAMES[int(_C.StatusCode.Invalid)] == ""
    for code in _C.StatusCode:
        if code in (_C.StatusCode.Ok, _C.StatusCode.Invalid):
            continue
        with pytest.raises(errors.HorovodInternalError) as core:
            errors.raise_for_status((int(code), f"why {code.name}", 3 if code == _C.StatusCode.Aborted else -1))
        name = CLASS_NAMES[int(code)]
        made = error_types[name](f"{name}: {getattr(core.value, 'origin_rank', -1)}: why {code.name}")
        for e in (made, as_mxnet_error(core.value), pickle.loads(pickle.dumps(made))):
            assert type(e) is CLASSES[int(code)] and isinstance(e, (MXNetError, type(core.value)))
            assert type(e).__name__ == type(core.value).__name__ and str(e) == str(core.value)
            assert getattr(e, "origin_rank", None) == getattr(core.value, "origin_rank", None)
    assert str(CLASSES[int(_C.StatusCode.Mismatch)]("not in the bridge's form")) == "not in the bridge's form"
    after_a_traceback = "Traceback (most recent call last):\n  File x\nEngineAbortedError: 2: why"
    assert CLASSES[int(_C.StatusCode.Aborted)](after_a_traceback).origin_rank == 2
    assert type(as_mxnet_error(ValueError("bad splits"))) is MXNetError


RANK_MODULES = ["rank_mxnet_ops.py", "rank_mxnet_errors.py", "rank_mxnet_training.py",
                "rank_mxnet_trainer_cases.py"]


@pytest.mark.parametrize("np_", [2, 4])
@pytest.mark.timeout(150 * len(RANK_MODULES) + 60)
def test_on_ranks(np_):
    """The modules in one job (MXNet is imported once per rank), with each module's 150 s in its timeout.
    Unbulked backward, so the overlap test sees gradients appear one by one."""
    run_rank_tests(np_, RANK_MODULES, timeout=150 * len(RANK_MODULES), env=dict(ENV, MXNET_EXEC_BULK_EXEC_TRAIN="0"))


def test_training_on_one_rank():
    """One rank skips the allreduce; results must still match plain Gluon (gradient_predivide_factor too)."""
    run_rank_tests(1, "rank_mxnet_training.py", timeout=120, env=ENV)


def test_a_burst_of_failing_operations_does_not_crash_mxnet():
    """MXNet 1.9 files failed operations' errors in a list its threads share without a lock: 5,000 allreduces
    refused at once on 8 MXNet worker threads crashed the rank in about every other run of 6 rounds until the
    bridge completed failures one at a time. One rank: refused ops of one name cannot pair up across ranks."""
    run_rank_tests(1, "rank_mxnet_failure_burst.py", timeout=120, env=dict(ENV, MXNET_CPU_PRIORITY_NTHREADS="8"))


@pytest.mark.parametrize("np_", [2, 4])
def test_name_mismatch_stall_shutdown_on_ranks(np_):
    env = dict(ENV, HOROVOD_STALL_CHECK_TIME_SECONDS="0.5", HOROVOD_STALL_SHUTDOWN_TIME_SECONDS="1")
    run_rank_tests(np_, "rank_mxnet_stall.py", timeout=120, env=env)


def test_digits_example_reaches_90_percent_on_two_ranks():
    out = run_ranks(2, ["examples/mxnet_mnist.py"], timeout=120, env=ENV).stdout
    accuracy = float(re.search(r"final test accuracy: ([0-9.]+) on 2 rank", out).group(1))
    assert accuracy >= 0.90, out[-3000:]
    assert len(re.findall(r"\[rank 1\] epoch \d+/\d+: .* samples/s", out)) >= 1


@pytest.mark.parametrize("end", ["shutdown", "at-exit"])
def test_shutdown_runs_the_steps_still_queued_in_mxnet(end):
    """At exit too: a script that ended on trainer.step() failed its last steps, and MXNet's exit handler
    printed 'Exception ignored ... MXNetError: rank 1 shut the engine down' on every rank."""
    out = run_ranks(2, ["tests/ranks/mxnet_queued_steps.py", "40", end], timeout=120, env=ENV).stdout
    assert "Exception ignored" not in out and "Error" not in out, out[-3000:]
    sums = dict(re.findall(r"checksum (\d) ([0-9.e+-]+)", out))
    assert set(sums) == {"0", "1"}, out[-3000:]
    assert float(sums["0"]) == pytest.approx(float(sums["1"]), rel=1e-6)  # every rank ran every step


HOROVOD_SCRIPT = '''
"""A horovod.mxnet training script in Horovod's own style: Gluon with DistributedTrainer, then the
Module API with DistributedOptimizer."""
import numpy as np
import mxnet as mx
from mxnet import autograd, gluon
import horovod.mxnet as hvd

hvd.init()
context = mx.cpu(hvd.local_rank())
rng = np.random.RandomState(1234)
true_w = rng.normal(size=(10, 3))
x = rng.normal(size=(256, 10)).astype("float32")
y = (x @ true_w).argmax(axis=1).astype("float32")
x, y = x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()]

net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(32, activation="relu"), gluon.nn.Dense(3))
net.hybridize()
net.initialize(mx.init.Xavier(magnitude=2.24), ctx=context)
params = net.collect_params()
if params is not None:
    hvd.broadcast_parameters(params, root_rank=0)
opt = mx.optimizer.create("sgd", learning_rate=0.05 * hvd.size(), momentum=0.9)
trainer = hvd.DistributedTrainer(params, opt, gradient_predivide_factor=1.0)
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
metric = mx.metric.Accuracy()
data = mx.io.NDArrayIter(x, y, batch_size=16, shuffle=True)
for epoch in range(15):
    data.reset()
    metric.reset()
    for batch in data:
        d, l = batch.data[0].as_in_context(context), batch.label[0].as_in_context(context)
        with autograd.record():
            out = net(d)
            loss = loss_fn(out, l)
        loss.backward()
        trainer.step(16)
        metric.update([l], [out])
    name, acc = metric.get()
    acc = hvd.allreduce(mx.nd.array([acc]), name="acc", op=hvd.Average).asscalar()
first = params[list(params.keys())[0]].data().asnumpy()
same = hvd.allgather(mx.nd.array(first[None])).asnumpy()
assert all(np.array_equal(same[0], s) for s in same), "parameters differ between ranks"
print("gluon accuracy %.3f" % acc)

sym = mx.sym.SoftmaxOutput(mx.sym.FullyConnected(mx.sym.var("data"), num_hidden=3), name="softmax")
mod = mx.mod.Module(sym, context=context)
mod.bind(data_shapes=[("data", (16, 10))], label_shapes=[("softmax_label", (16,))])
mod.init_params(mx.init.Xavier())
arg_params, aux_params = mod.get_params()
hvd.broadcast_parameters(arg_params, root_rank=0)
hvd.broadcast_parameters(aux_params, root_rank=0, prefix="aux.")
mod.set_params(arg_params, aux_params)
module_opt = hvd.DistributedOptimizer(mx.optimizer.create("sgd", learning_rate=0.1, rescale_grad=1.0 / 16))
mod.fit(mx.io.NDArrayIter(x, y, batch_size=16), num_epoch=5, kvstore=None, optimizer=module_opt)
weights = mod.get_params()[0]["fullyconnected0_weight"].asnumpy()
same = hvd.allgather(mx.nd.array(weights[None])).asnumpy()
assert all(np.array_equal(same[0], s) for s in same), "module parameters differ between ranks"
print("module score %.3f" % mod.score(mx.io.NDArrayIter(x, y, batch_size=16), "acc")[0][1])
print("rank", hvd.rank(), "of", hvd.size(), "done")
'''


def test_horovod_mxnet_script_runs_with_only_its_import_changed(tmp_path):
    script = tmp_path / "train_hvd.py"
    source = textwrap.dedent(HOROVOD_SCRIPT)
    assert source.count("import horovod.mxnet as hvd") == 1
    script.write_text(source.replace("import horovod.mxnet as hvd", "import jupyter_hvd.mxnet as hvd"))
    out = run_ranks(2, [str(script)], timeout=120, env=dict(ENV, PYTHONPATH=str(ROOT))).stdout
    assert "rank 0 of 2 done" in out and "rank 1 of 2 done" in out, out[-3000:]
    assert float(re.search(r"gluon accuracy ([0-9.]+)", out).group(1)) > 0.8, out[-3000:]
