"""GPU collectives on CuPy arrays on real ranks: NCCL at one rank, host staging when ranks share a GPU.

Skipped, with the reason, unless CuPy imports, a CUDA device is visible, and jupyter_hvd can load
the CUDA runtime and NCCL (hvd.gpu_status() says what is missing).
"""
import json

import pytest

import jupyter_hvd as hvd
from multirank import run_rank_tests, run_ranks


def _gpu_skip_reason() -> str:
    try:
        import cupy
    except ImportError as e:
        return f"CuPy is not installed ({e})"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device visible"
    except Exception as e:  # no driver: CuPy raises its CUDARuntimeError
        return f"no CUDA device: {e}"
    status = hvd.gpu_status()
    if not status["nccl_available"]:
        return f"jupyter_hvd cannot use NCCL here: {status['reason']}"
    return ""


REASON = _gpu_skip_reason()
pytestmark = [pytest.mark.gpu, pytest.mark.timeout(900), pytest.mark.skipif(bool(REASON), reason=REASON)]


def _gpu_count() -> int:
    import cupy

    return cupy.cuda.runtime.getDeviceCount()


def test_one_rank_nccl_every_op_and_dtype():
    run_rank_tests(1, "rank_gpu_ops.py", timeout=600)


def test_one_rank_fusion_off_gives_the_same_results():
    run_rank_tests(1, "rank_gpu_ops.py", timeout=600, env={"HOROVOD_FUSION_THRESHOLD": "0"})


def test_one_rank_fusion_of_large_tensors_too():
    run_rank_tests(1, "rank_gpu_ops.py", timeout=600, env={"JUPYTER_HVD_FUSION_MAX_TENSOR": str(64 << 20)})


def test_one_rank_forced_host_staging():
    run_rank_tests(1, "rank_gpu_ops.py", timeout=600, env={"JUPYTER_HVD_GPU_STAGING": "1"})


def test_two_ranks():
    """Two ranks: NCCL with two GPUs; with one, host staging and exactly one warning line."""
    out = run_rank_tests(2, "rank_gpu_ops.py", timeout=900, show_output=True)
    warnings = [line for line in out.splitlines() if "share one GPU" in line]
    if _gpu_count() >= 2:
        assert not warnings, warnings
    else:
        assert len(warnings) == 1 and "go through host memory and MPI" in warnings[0], out[-3000:]


def test_two_ranks_fusion_off():
    run_rank_tests(2, "rank_gpu_ops.py", timeout=900, env={"HOROVOD_FUSION_THRESHOLD": "0"})


@pytest.mark.parametrize("np_", [1, 2])
def test_error_paths(np_):
    run_rank_tests(np_, "rank_gpu_errors.py", timeout=300)


def test_timeline_has_the_gpu_phases(tmp_path):
    path = tmp_path / "timeline.json"
    script = tmp_path / "tl.py"
    script.write_text(
        "import cupy, jupyter_hvd as hvd\n"
        "hvd.init()\n"
        "s = cupy.cuda.Stream(non_blocking=True)\n"
        "with s:\n"
        "    a = cupy.ones((2048, 2048), cupy.float32)\n"
        "    for _ in range(30):\n"
        "        a = (a @ a) / 2048\n"  # keeps s busy: the engine waits for it while the rest queue up
        "    xs = [a[0] + i for i in range(8)]\n"
        "    hs = [hvd.allreduce_async(x, op=hvd.Sum, name=f't.{i}') for i, x in enumerate(xs)]\n"
        "[h.wait() for h in hs]\n"
        "hvd.allgather(cupy.ones((2, 2)), name='t.ag')\n"
        "hvd.shutdown()\n")
    run_ranks(1, [str(script)], timeout=300, env={"HOROVOD_TIMELINE": str(path)})
    names = {e["name"] for e in json.loads(path.read_text())["traceEvents"]}
    assert {"NCCL_ALLREDUCE", "NCCL_ALLGATHER", "WAIT_FOR_DATA", "MEMCPY_IN_FUSION_BUFFER",
            "MEMCPY_OUT_FUSION_BUFFER"} <= names, names


def test_hierarchical_one_rank_is_flat():
    run_rank_tests(1, "rank_gpu_hierarchical.py", timeout=600)


def test_hierarchical_two_ranks():
    """One rank per pretended host: with two GPUs the hierarchical steps run; with one, ranks stage."""
    run_rank_tests(2, "rank_gpu_hierarchical.py", timeout=900, env={"JUPYTER_HVD_TEST_RANKS_PER_HOST": "1"})


@pytest.mark.skipif(bool(REASON) or _gpu_count() < 4, reason=REASON or "needs 4 GPUs")
def test_hierarchical_four_ranks_two_per_host():
    run_rank_tests(4, "rank_gpu_hierarchical.py", timeout=900, env={"JUPYTER_HVD_TEST_RANKS_PER_HOST": "2"})


@pytest.mark.skipif(bool(REASON) or _gpu_count() < 3, reason=REASON or "needs 3 GPUs")
def test_hierarchical_uneven_hosts_fall_back_with_one_warning():
    out = run_rank_tests(3, "rank_gpu_hierarchical.py", timeout=900, show_output=True,
                         env={"JUPYTER_HVD_TEST_RANKS_PER_HOST": "2"})
    warnings = [line for line in out.splitlines() if "different numbers of ranks" in line]
    assert len(warnings) == 1 and "flat NCCL" in warnings[0], out[-3000:]


@pytest.mark.skipif(bool(REASON) or _gpu_count() < 2, reason=REASON or "needs 2 GPUs")
def test_timeline_has_the_hierarchical_phases(tmp_path):
    path = tmp_path / "timeline.json"
    script = tmp_path / "hier.py"
    script.write_text(
        "import cupy, jupyter_hvd as hvd\n"
        "hvd.init()\n"
        "cupy.cuda.Device(hvd.local_rank()).use()\n"
        "x = hvd.allreduce(cupy.ones(1001, cupy.float32), op=hvd.Sum, name='t.h')\n"
        "assert float(x.sum()) == 1001 * hvd.size()\n"
        "hvd.shutdown()\n")
    run_ranks(2, [str(script)], timeout=300, env={"HOROVOD_TIMELINE": str(path), "HOROVOD_HIERARCHICAL_ALLREDUCE": "1",
                                                   "JUPYTER_HVD_TEST_RANKS_PER_HOST": "1"})
    names = {e["name"] for e in json.loads(path.read_text())["traceEvents"]}
    assert {"NCCL_REDUCESCATTER", "MPI_ALLREDUCE", "NCCL_ALLGATHER"} <= names, names
    assert "NCCL_ALLREDUCE" not in names, names
