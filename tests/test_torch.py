"""jupyter_hvd.torch as a drop-in for horovod.torch: API surface here, behaviour on real MPI ranks."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import jupyter_hvd.torch as hvd  # noqa: E402
from horovod_api import COMMON_EXPORTS, MPI_OPS_BASICS, check_signature, check_submodules  # noqa: E402
from multirank import ROOT, run_rank_tests, run_ranks  # noqa: E402

ENV = {"OMP_NUM_THREADS": "1"}  # one compute thread per rank: the test box has two cores for up to four ranks

# Horovod 0.28.1's horovod.torch signatures: (parameter, default) in order; a bare name has no default.
_ALLREDUCE = [("average", None), ("name", None), ("op", None), ("prescale_factor", 1.0), ("postscale_factor", 1.0),
              ("process_set", "global_process_set")]
_WITH_COMPRESSION = [("average", None), ("name", None), ("compression", "Compression.none"), ("op", None),
                     ("prescale_factor", 1.0), ("postscale_factor", 1.0), ("process_set", "global_process_set")]
_SCATTER = [("name", None), ("op", "Average"), ("process_set", "global_process_set"), ("prescale_factor", 1.0),
            ("postscale_factor", 1.0)]
HOROVOD_SIGNATURES = {
    "allreduce": ["tensor"] + _WITH_COMPRESSION,
    "allreduce_async": ["tensor"] + _ALLREDUCE,
    "allreduce_": ["tensor"] + _ALLREDUCE,
    "allreduce_async_": ["tensor"] + _ALLREDUCE,
    "grouped_allreduce": ["tensors"] + _WITH_COMPRESSION,
    "grouped_allreduce_async": ["tensors"] + _ALLREDUCE,
    "grouped_allreduce_": ["tensors"] + _ALLREDUCE,
    "grouped_allreduce_async_": ["tensors"] + _ALLREDUCE,
    "allgather": ["tensor", ("name", None), ("process_set", "global_process_set")],
    "allgather_async": ["tensor", ("name", None), ("process_set", "global_process_set")],
    "grouped_allgather": ["tensors", ("name", None), ("process_set", "global_process_set")],
    "grouped_allgather_async": ["tensors", ("name", None), ("process_set", "global_process_set")],
    "broadcast": ["tensor", "root_rank", ("name", None), ("process_set", "global_process_set")],
    "broadcast_async": ["tensor", "root_rank", ("name", None), ("process_set", "global_process_set")],
    "broadcast_": ["tensor", "root_rank", ("name", None), ("process_set", "global_process_set")],
    "broadcast_async_": ["tensor", "root_rank", ("name", None), ("process_set", "global_process_set")],
    "alltoall": ["tensor", ("splits", None), ("name", None), ("process_set", "global_process_set")],
    "alltoall_async": ["tensor", ("splits", None), ("name", None), ("process_set", "global_process_set")],
    "reducescatter": ["tensor", ("name", None), ("compression", "Compression.none")] + _SCATTER[1:],
    "reducescatter_async": ["tensor"] + _SCATTER,
    "grouped_reducescatter": ["tensors", ("name", None), ("compression", "Compression.none")] + _SCATTER[1:],
    "grouped_reducescatter_async": ["tensors"] + _SCATTER,
    "sparse_allreduce_async": ["tensor", "name", "op", ("process_set", "global_process_set")],
    "barrier": [("process_set", "global_process_set")],
    "join": [("device", -1)],
    "synchronize": ["handle"],
    "poll": ["handle"],
    "broadcast_parameters": ["params", "root_rank"],
    "broadcast_optimizer_state": ["optimizer", "root_rank", ("model", None)],
    "broadcast_object": ["obj", ("root_rank", 0), ("name", None), ("process_set", "global_process_set")],
    "allgather_object": ["obj", ("name", None), ("process_set", "global_process_set")],
    "DistributedOptimizer": ["optimizer", ("named_parameters", None), ("compression", "Compression.none"),
                             ("backward_passes_per_step", 1), ("op", "Average"), ("gradient_predivide_factor", 1.0),
                             ("num_groups", 0), ("groups", None), ("sparse_as_dense", False),
                             ("process_set", "global_process_set")],
    "SyncBatchNorm": ["num_features", ("eps", 1e-5), ("momentum", 0.1), ("affine", True),
                      ("track_running_stats", True)],
    "init": [("comm", None), ("process_sets", None)],
    "ProcessSet": ["ranks_or_comm"],
    "start_timeline": ["file_path", ("mark_cycles", False)],
    "elastic.run": ["func"],
    "mpi_ops.handle_average_backwards_compatibility": ["op", "average"],
    "mpi_ops.num_rank_is_power_2": ["num_rank"],
    "mpi_ops.gpu_available": ["ext_base_name", ("verbose", False)],
    "elastic.TorchState": [("model", None), ("optimizer", None), "kwargs"],
    "elastic.ElasticSampler": ["dataset", ("shuffle", True), ("seed", 0)],
}
EXPORTS = COMMON_EXPORTS + ["HorovodInternalError"]


@pytest.mark.parametrize("name", sorted(HOROVOD_SIGNATURES))
def test_signature_matches_horovod(name):
    """Same parameters, order and defaults; extras (like prefix on broadcast_parameters) only after them."""
    check_signature(hvd, name, HOROVOD_SIGNATURES[name])


# Horovod 0.28.1's horovod.torch submodules and what code imports from them.
SUBMODULES = {
    "mpi_ops": MPI_OPS_BASICS + ["HorovodInternalError", "Compression"] + (
        "allreduce allreduce_async allreduce_ allreduce_async_ grouped_allreduce grouped_allreduce_async "
        "grouped_allreduce_ grouped_allreduce_async_ sparse_allreduce_async allgather allgather_async "
        "grouped_allgather grouped_allgather_async broadcast broadcast_async broadcast_ broadcast_async_ alltoall "
        "alltoall_async reducescatter reducescatter_async grouped_reducescatter grouped_reducescatter_async join "
        "barrier poll synchronize HorovodAllreduce HorovodAllgather HorovodBroadcast HorovodAlltoall "
        "HorovodReducescatter is_homogeneous handle_average_backwards_compatibility gpu_available "
        "num_rank_is_power_2").split(),
    "functions": ["allgather_object", "broadcast_object", "broadcast_optimizer_state", "broadcast_parameters"],
    "compression": ["Compression", "Compressor", "NoneCompressor", "FP16Compressor"],
    "optimizer": ["DistributedOptimizer", "_DistributedOptimizer"],
    "sync_batch_norm": ["SyncBatchNorm"],
    "elastic": ["run", "TorchState", "ElasticSampler"],
}


def test_horovods_submodules_have_its_names():
    check_submodules("jupyter_hvd.torch", SUBMODULES)


def test_mpi_ops_helpers_answer_as_horovods():
    from jupyter_hvd.torch import mpi_ops

    assert [mpi_ops.num_rank_is_power_2(n) for n in range(9)] == [n in (1, 2, 4, 8) for n in range(9)]
    resolve = mpi_ops.handle_average_backwards_compatibility
    assert (resolve(None, None), resolve(hvd.Sum, None), resolve(hvd.Max, None)) == (hvd.Average, hvd.Sum, hvd.Max)
    with pytest.warns(DeprecationWarning):
        assert (resolve(None, True), resolve(None, False)) == (hvd.Average, hvd.Sum)
    with pytest.raises(ValueError):
        resolve(hvd.Sum, True)


def test_everything_else_horovod_exports_is_here():
    assert all(hasattr(hvd, n) for n in EXPORTS)
    assert set(hvd.__all__) <= set(dir(hvd))
    assert issubclass(hvd.SyncBatchNorm, torch.nn.modules.batchnorm._BatchNorm)


def test_mxnet_and_torch_load_in_one_process():
    """Both frameworks live in one environment (MXNet pins numpy < 1.24)."""
    mx = pytest.importorskip("mxnet")
    import numpy as np

    assert torch.from_numpy(mx.nd.ones(3).asnumpy()).sum().item() == 3.0 and np.__version__


def test_default_framework_is_the_one_the_kernel_imported(monkeypatch):
    mx = pytest.importorskip("mxnet")
    from jupyter_hvd.magic import frameworks

    monkeypatch.delitem(sys.modules, "mxnet", raising=False)
    assert frameworks.default_framework() == "torch"
    monkeypatch.setitem(sys.modules, "mxnet", mx)
    assert frameworks.default_framework() == "mxnet"  # both imported: MXNet, the older default
    monkeypatch.delitem(sys.modules, "torch")
    assert frameworks.default_framework() == "mxnet"
    assert frameworks.unavailable_reason("torch") == "" and frameworks.unavailable_reason("none") == ""


@pytest.mark.parametrize("cell, chosen", [
    ("import torch", "torch"), ("import numpy as np, torch.nn as nn", "torch"), ("  from torch import nn", "torch"),
    ("import mxnet as mx", "mxnet"), ("from mxnet import gluon", "mxnet"),
    ("import torch\nimport mxnet", "kernel's"), ("import torchvision", "kernel's"), ("x = 1  # import torch", "kernel's"),
    ("%time import torch", "kernel's"), ("", "kernel's"), ("x = 1; import torch", "torch"),
    ("if True:\n    from torch import nn", "torch"), ("%matplotlib inline\n!ls\nimport torch", "torch"),
    ('doc = """\nimport torch\n"""', "kernel's"), ("from . import torch", "kernel's"),
    ("import mxnet\nprint(", "kernel's")])
def test_the_cell_that_starts_the_ranks_chooses_by_its_imports_before_the_kernels(monkeypatch, cell, chosen):
    """What the cell imports, when just one of them; else the rule of the kernel's imports (here: torch)."""
    pytest.importorskip("mxnet")
    from jupyter_hvd.magic import frameworks

    monkeypatch.delitem(sys.modules, "mxnet", raising=False)
    assert frameworks.default_framework(cell) == (chosen if chosen != "kernel's" else "torch")


def test_a_cell_that_imports_only_the_other_framework_gets_a_note():
    from jupyter_hvd.magic.frameworks import other_framework_note

    assert "imports torch, but hvd on the ranks is jupyter_hvd.mxnet" in other_framework_note("mxnet", "import torch")
    assert "run it with --framework mxnet" in other_framework_note("torch", "from mxnet import nd")
    for framework, cell in (("mxnet", "import torch, mxnet"), ("torch", "import torch"), ("none", "import torch"),
                            ("mxnet", "print(1)")):
        assert other_framework_note(framework, cell) == "", (framework, cell)


def test_the_engine_reads_cpu_tensors_by_pointer_only_where_that_is_safe():
    """torch.Tensor is registered with _C: submit reads a tensor's data pointer and shape, and refuses one
    that is not contiguous or not in host memory (a meta tensor stands in for a device torch did not
    hand over as such), input or output, and an output of another size, before anything is queued. No
    engine runs here."""
    import numpy as np

    from jupyter_hvd import _C

    def submit(x, out=None):
        _C.submit(int(_C.OpType.allreduce), "allreduce", [x], [out], ["x"], 0, int(hvd.Sum), -1, 1.0, 1.0, [])

    where = "must be a contiguous tensor in host memory"
    with pytest.raises(ValueError, match=f"tensor 'x': the input array {where}"):
        submit(torch.ones(2, device="meta"))
    with pytest.raises(ValueError, match=f"tensor 'x': the input array {where}"):
        submit(torch.ones(3, 2).t())
    with pytest.raises(ValueError, match=f"tensor 'x': the output array {where}"):
        submit(torch.ones(2, 4), torch.ones(4, 2).t())
    with pytest.raises(ValueError, match=f"tensor 'x': the array written in place {where}"):
        x = torch.ones(3, 2).t()
        submit(x, x)
    with pytest.raises(ValueError, match="tensor 'x': the output array has 12 bytes, the input 16"):
        submit(torch.ones(4), torch.empty(3))
    with pytest.raises(TypeError, match="allreduce: unsupported dtype torch.complex64"):
        submit(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(ValueError, match="has not been initialized"):  # readable: it got as far as the engine
        submit(torch.ones(0, 3), np.empty((0, 3), np.float32))


RANK_MODULES = ["rank_torch_ops.py", "rank_torch_training.py", "rank_torch_optimizer_cases.py", "rank_torch_cells.py",
                "rank_torch_elastic.py"]


@pytest.mark.parametrize("np_", [2, 4])
@pytest.mark.timeout(280 * len(RANK_MODULES) + 60)
def test_on_ranks(np_):
    """The modules in one job (torch is imported once per rank), with each module's 280 s in its timeout."""
    run_rank_tests(np_, RANK_MODULES, timeout=280 * len(RANK_MODULES), env=ENV)


def test_under_torch_compile_on_ranks():
    """Compiled functions that call the collectives, a compiled training step and a compiled SyncBatchNorm model."""
    run_rank_tests(2, "rank_torch_compile.py", timeout=240, env=ENV)


def test_bad_input_on_ranks():
    """Every rank gets the error (the core's tests cover error paths at 4 ranks and more)."""
    run_rank_tests(2, "rank_torch_errors.py", timeout=200, env=ENV)


def test_ops_on_three_ranks():
    """A rank count no power of two: an Average's 1 / n is inexact there, and a ring's shares are uneven."""
    run_rank_tests(3, "rank_torch_ops.py", timeout=200, env=ENV)


def test_training_on_one_rank():
    """One rank reduces nothing; results must still match plain torch."""
    run_rank_tests(1, ["rank_torch_training.py", "rank_torch_cells.py", "rank_torch_elastic.py"], timeout=120, env=ENV)


def test_digits_example_reaches_90_percent_on_two_ranks():
    out = run_ranks(2, ["examples/torch_mnist.py"], timeout=180, env=ENV).stdout
    accuracy = float(re.search(r"final test accuracy: ([0-9.]+) on 2 rank", out).group(1))
    assert accuracy >= 0.90, out[-3000:]
    assert len(re.findall(r"\[rank 1\] epoch \d+/\d+: .* samples/s", out)) >= 1


def test_digits_example_starts_its_own_ranks_with_num_proc_as_horovods_examples_do():
    """``python examples/torch_mnist.py --num-proc 2``: no hvdrun; the script calls jupyter_hvd.run(train, ...)."""
    proc = subprocess.run([sys.executable, "examples/torch_mnist.py", "--num-proc", "2"], cwd=ROOT, timeout=180,
                          env=dict(os.environ, **ENV), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout[-6000:]
    accuracies = re.search(r"the ranks' test accuracies: ([0-9.]+), ([0-9.]+)\n", proc.stdout)
    assert accuracies and accuracies.group(1) == accuracies.group(2), proc.stdout[-3000:]
    assert float(accuracies.group(1)) >= 0.90, proc.stdout[-3000:]


HOROVOD_SCRIPT = '''
"""A horovod.torch training script in Horovod's own style (its pytorch_mnist example's structure)."""
import torch
import torch.nn.functional as F
import horovod.torch as hvd

hvd.init()
torch.manual_seed(42)
torch.set_num_threads(1)
true_w = torch.randn(10, 3)
x = torch.randn(512, 10)
y = (x @ true_w).argmax(dim=1)
x, y = x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()]
model = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05 * hvd.size(), momentum=0.9)
hvd.broadcast_parameters(model.state_dict(), root_rank=0)
hvd.broadcast_optimizer_state(optimizer, root_rank=0)
compression = hvd.Compression.fp16
optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                     compression=compression, op=hvd.Average)
for epoch in range(20):
    for i in range(0, len(x), 16):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x[i:i + 16]), y[i:i + 16])
        loss.backward()
        optimizer.step()
    acc = (model(x).argmax(dim=1) == y).float().mean()
    acc = hvd.allreduce(acc, name="avg_accuracy")
first = next(model.parameters()).detach()
same = hvd.allgather(first[None])
assert all(torch.equal(same[0], s) for s in same), "parameters differ between ranks"
print("accuracy %.3f" % acc.item())
print("rank", hvd.rank(), "of", hvd.size(), "done")
'''


def test_horovod_torch_script_runs_with_only_its_import_changed(tmp_path):
    script = tmp_path / "train_hvd.py"
    source = textwrap.dedent(HOROVOD_SCRIPT)
    assert source.count("import horovod.torch as hvd") == 1
    script.write_text(source.replace("import horovod.torch as hvd", "import jupyter_hvd.torch as hvd"))
    out = run_ranks(2, [str(script)], timeout=150, env=dict(ENV, PYTHONPATH=str(ROOT))).stdout
    assert "rank 0 of 2 done" in out and "rank 1 of 2 done" in out, out[-3000:]
    assert float(re.search(r"accuracy ([0-9.]+)", out).group(1)) > 0.8, out[-3000:]


HOLDS_ENGINE_OUTPUTS_AT_EXIT = """
import gc
import torch
import jupyter_hvd.torch as hvd
hvd.init()
t = torch.ones(2 * hvd.size(), requires_grad=True)
out = hvd.alltoall(t)  # its autograd node keeps the rows received, engine memory
out.backward(torch.ones_like(out))  # t.grad: the engine's output of the alltoall back
x = torch.zeros(2, requires_grad=True)
x.grad = gathered = hvd.allgather(torch.full((1,), float(hvd.rank())))
handle = hvd.allgather_async(torch.full((2,), 7.0))
kept = hvd.synchronize(handle)
del handle
gc.collect()
assert t.grad.tolist() == [1.0] * len(t) and kept.tolist() == [7.0] * 2 * hvd.size(), (t.grad, kept)
print("rank", hvd.rank(), "exits holding", gathered.tolist())
"""


def test_engine_outputs_torch_still_holds_at_exit_are_not_reported_leaked():
    """A tensor whose memory the engine allocated (an allgather's or alltoall's result) may still be held by torch
    when Python exits, as a leaf's `.grad` or in an autograd node, where the interpreter does not free it; each
    such result used to keep its Python handle, which nanobind then reported as leaked by the binding. A result
    also outlives the handle it came from."""
    out = run_ranks(2, ["-c", HOLDS_ENGINE_OUTPUTS_AT_EXIT], timeout=120, env=ENV)
    assert out.stdout.count("exits holding [0.0, 1.0]") == 2, out.stdout[-3000:]
    assert "leaked" not in out.stdout, out.stdout[-3000:]


FAILS_IN_BACKWARD = """
import torch
import jupyter_hvd.torch as hvd
hvd.init()
model = torch.nn.Linear(4, 2)
opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
model(torch.ones(3, 4)).sum().backward()
model(torch.ones(3, 4)).sum().backward()  # a second pass before step(): the hooks raise
"""


def test_a_script_that_fails_in_backward_ends_with_its_traceback_alone():
    """The ranks' in-flight allreduces were held to the end by the optimizer's hooks, and nanobind printed a
    report of 'leaked' handles, types and functions after each traceback."""
    out = run_ranks(2, ["-c", FAILS_IN_BACKWARD], timeout=120, env=ENV, check=False)
    assert out.returncode != 0
    assert out.stdout.count("AssertionError: Gradients were computed more than") == 2, out.stdout[-3000:]
    assert "leaked" not in out.stdout, out.stdout[-3000:]
