"""GPU collectives on real ranks, on two kinds of device:

- ``cuda``: CuPy arrays on real GPUs, with the CUDA runtime and NCCL. Skipped, with the reason,
  unless CuPy imports, a device is visible and jupyter_hvd loads NCCL (hvd.gpu_status() says why).
- ``sim``: the simulated device of engine/sim (host memory, a thread per stream, NCCL over MPI),
  with tests/ranks/simcupy.py in place of CuPy. It runs everywhere, so CI runs the engine's whole
  GPU path: NCCL at one and more ranks, host staging, fusion, hierarchical allreduce, error paths.

Each test asks for a number of devices: the simulator makes that many; on real GPUs the test uses
the first ones (CUDA_VISIBLE_DEVICES) and is skipped where there are fewer.
"""
import json
import os

import pytest

import jupyter_hvd as hvd
from multirank import ROOT, run_rank_tests, run_ranks

SIM_DIR = os.environ.get("JUPYTER_HVD_SIM_GPU_DIR", str(ROOT / "build" / "engine"))
SIM_LIBS = {"JUPYTER_HVD_CUDART_LIB": "libjhvd_sim_cudart.so", "JUPYTER_HVD_NCCL_LIB": "libjhvd_sim_nccl.so",
            "JUPYTER_HVD_CUDA_DRIVER_LIB": "libjhvd_sim_cuda.so"}
pytestmark = [pytest.mark.timeout(900)]


def _cuda_skip_reason() -> str:
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


class Device:
    """How the rank processes of a test get their GPUs."""

    def __init__(self, kind: str):
        self.simulated = kind == "sim"

    def env(self, devices: int = 1, **extra: str) -> dict:
        """Environment for ranks that see exactly ``devices`` GPUs."""
        env = {"PYTHONPATH": str(ROOT / "tests" / "ranks"), **extra}
        if self.simulated:
            env.update({var: os.path.join(SIM_DIR, lib) for var, lib in SIM_LIBS.items()})
            env.update(JUPYTER_HVD_TEST_SIM_GPU="1", JUPYTER_HVD_SIM_DEVICES=str(devices))
            ids = [str(i) for i in range(devices)]
        else:
            import cupy

            have = cupy.cuda.runtime.getDeviceCount()
            if have < devices:
                pytest.skip(f"needs {devices} GPUs, {have} visible")
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
            ids = [d.strip() for d in visible.split(",")] if visible else [str(i) for i in range(have)]
        env["CUDA_VISIBLE_DEVICES"] = ",".join(ids[:devices])  # also what %%hvd pins ranks by
        return env


@pytest.fixture(params=[pytest.param("cuda", marks=pytest.mark.gpu), "sim"])
def gpu(request) -> Device:
    if request.param == "cuda":
        reason = _cuda_skip_reason()
        if reason:
            pytest.skip(reason)
    else:
        missing = [lib for lib in SIM_LIBS.values() if not os.path.isfile(os.path.join(SIM_DIR, lib))]
        if missing:
            pytest.skip(f"the simulated GPU is not built ({', '.join(missing)} not in {SIM_DIR}; make sim-gpu)")
    return Device(request.param)


def _staging_warnings(out: str) -> list:
    return [line for line in out.splitlines() if "share one GPU" in line]


def test_one_rank_nccl_every_op_and_dtype(gpu):
    run_rank_tests(1, "rank_gpu_ops.py", timeout=600, env=gpu.env())


def test_one_rank_fusion_off_gives_the_same_results(gpu):
    run_rank_tests(1, "rank_gpu_ops.py", timeout=600, env=gpu.env(HOROVOD_FUSION_THRESHOLD="0"))


def test_one_rank_fusion_of_large_tensors_too(gpu):
    run_rank_tests(1, "rank_gpu_ops.py", timeout=600, env=gpu.env(JUPYTER_HVD_FUSION_MAX_TENSOR=str(64 << 20)))


def test_one_rank_fusion_copies_one_by_one(gpu):
    run_rank_tests(1, "rank_gpu_ops.py", timeout=600, env=gpu.env(HOROVOD_BATCH_D2D_MEMCOPIES="0"))


def test_one_rank_without_the_copy_kernel(gpu):
    """No driver library to load the copy kernel with: the runtime's copies fill the fusion buffer."""
    env = gpu.env(JUPYTER_HVD_CUDA_DRIVER_LIB="/nonexistent/libcuda.so.1")
    run_rank_tests(1, "rank_gpu_ops.py", timeout=600, env=env)


def test_one_rank_forced_host_staging(gpu):
    run_rank_tests(1, "rank_gpu_ops.py", timeout=600, env=gpu.env(JUPYTER_HVD_GPU_STAGING="1"))


def test_two_ranks_with_a_gpu_each_use_nccl(gpu):
    out = run_rank_tests(2, "rank_gpu_ops.py", timeout=900, show_output=True, env=gpu.env(2))
    assert not _staging_warnings(out), out[-3000:]


def test_two_ranks_with_a_gpu_each_fusion_off(gpu):
    run_rank_tests(2, "rank_gpu_ops.py", timeout=900, env=gpu.env(2, HOROVOD_FUSION_THRESHOLD="0"))


def test_two_ranks_sharing_one_gpu_stage_through_the_host_with_one_warning(gpu):
    out = run_rank_tests(2, "rank_gpu_ops.py", timeout=900, show_output=True, env=gpu.env(1))
    warnings = _staging_warnings(out)
    assert len(warnings) == 1 and "go through host memory and MPI" in warnings[0], out[-3000:]


def test_two_ranks_sharing_one_gpu_stage_through_the_host_allreduce_ring(gpu):
    run_rank_tests(2, "rank_gpu_ops.py", timeout=900, env=gpu.env(1, JUPYTER_HVD_RING_ALLREDUCE_BYTES="1"))


@pytest.mark.parametrize("np_, devices", [(1, 1), (2, 1), (2, 2)])
def test_error_paths(gpu, np_, devices):
    run_rank_tests(np_, "rank_gpu_errors.py", timeout=300, env=gpu.env(devices))


def test_an_abort_reaches_a_rank_waiting_inside_a_gpu_collective(gpu):
    if not gpu.simulated:
        pytest.skip("keeping a stream busy for seconds takes the simulator (simcupy.busy)")
    run_rank_tests(2, "rank_gpu_abort.py", timeout=120, env=gpu.env(2))


def test_timeline_has_the_gpu_phases(gpu, tmp_path):
    path = tmp_path / "timeline.json"
    script = tmp_path / "tl.py"
    script.write_text(
        "import jupyter_hvd as hvd\n"
        "from device_arrays import BUSY_SIDE, cupy\n"
        "hvd.init()\n"
        # NCCL, the copy kernel, cuBLAS and CuPy's kernels are set up here, so that none of it delays what follows:
        # on a GPU, a CuPy kernel's first call compiles it, long enough for the stream below to finish meanwhile.
        "w = cupy.ones((BUSY_SIDE, BUSY_SIDE), cupy.float32)\n"
        "hvd.allreduce(((w @ w) / BUSY_SIDE)[0] + 1, name='t.first')\n"
        "s = cupy.cuda.Stream(non_blocking=True)\n"
        "with s:\n"
        "    a = cupy.ones((BUSY_SIDE, BUSY_SIDE), cupy.float32)\n"
        "    for _ in range(30):\n"
        "        a = (a @ a) / BUSY_SIDE\n"  # keeps s busy: the engine waits for it while the rest queue up
        "    xs = [a[0] + i for i in range(8)]\n"
        "    hs = [hvd.allreduce_async(x, op=hvd.Sum, name=f't.{i}') for i, x in enumerate(xs)]\n"
        "other = cupy.cuda.Stream(non_blocking=True)\n"
        "with other:\n"
        "    done = cupy.ones((4,), cupy.float64)\n"
        "other.synchronize()\n"
        "with other:\n"  # runs after the ops above, which wait for s: its own producer is long done
        "    hs.append(hvd.allreduce_async(done, op=hvd.Sum, name='t.done'))\n"
        "[h.wait() for h in hs]\n"
        "hvd.allgather(cupy.ones((2, 2)), name='t.ag')\n"
        "hvd.shutdown()\n")
    run_ranks(1, [str(script)], timeout=300, env=gpu.env(HOROVOD_TIMELINE=str(path)))
    events = [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") != "M"]
    names = {e["name"] for e in events}
    # Small ops whose producers are done are timed on the host, the others by device events: spans either way.
    assert all(e.get("dur", 0) >= 0 for e in events), [e for e in events if e.get("dur", 0) < 0]
    assert {"NCCL_ALLREDUCE", "NCCL_ALLGATHER", "WAIT_FOR_DATA", "MEMCPY_IN_FUSION_BUFFER",
            "MEMCPY_OUT_FUSION_BUFFER"} <= names, names
    # A tensor whose producer is done when its op starts: no wait for data.
    done = {e["name"] for e in events if e["args"]["tensor"] == "t.done"}
    assert "NCCL_ALLREDUCE" in done and "WAIT_FOR_DATA" not in done, done


def test_hierarchical_one_rank_is_flat(gpu):
    run_rank_tests(1, "rank_gpu_hierarchical.py", timeout=600, env=gpu.env())


def test_hierarchical_two_ranks_one_per_host(gpu):
    run_rank_tests(2, "rank_gpu_hierarchical.py", timeout=900, env=gpu.env(2, JUPYTER_HVD_TEST_RANKS_PER_HOST="1"))


def test_hierarchical_four_ranks_two_per_host(gpu):
    run_rank_tests(4, "rank_gpu_hierarchical.py", timeout=900, env=gpu.env(4, JUPYTER_HVD_TEST_RANKS_PER_HOST="2"))


def test_hierarchical_uneven_hosts_fall_back_with_one_warning(gpu):
    out = run_rank_tests(3, "rank_gpu_hierarchical.py", timeout=900, show_output=True,
                         env=gpu.env(3, JUPYTER_HVD_TEST_RANKS_PER_HOST="2"))
    warnings = [line for line in out.splitlines() if "different numbers of ranks" in line]
    assert len(warnings) == 1 and "flat NCCL" in warnings[0], out[-3000:]


def test_timeline_has_the_hierarchical_phases(gpu, tmp_path):
    path = tmp_path / "timeline.json"
    script = tmp_path / "hier.py"
    script.write_text(
        "import jupyter_hvd as hvd\n"
        "from device_arrays import cupy\n"
        "hvd.init()\n"
        "cupy.cuda.Device(hvd.local_rank()).use()\n"
        "x = hvd.allreduce(cupy.ones(1001, cupy.float32), op=hvd.Sum, name='t.h')\n"
        "assert float(x.sum()) == 1001 * hvd.size()\n"
        "hvd.shutdown()\n")
    run_ranks(2, [str(script)], timeout=300, env=gpu.env(2, HOROVOD_TIMELINE=str(path),
                                                            HOROVOD_HIERARCHICAL_ALLREDUCE="1",
                                                            JUPYTER_HVD_TEST_RANKS_PER_HOST="1"))
    names = {e["name"] for e in json.loads(path.read_text())["traceEvents"]}
    assert {"NCCL_REDUCESCATTER", "MPI_ALLREDUCE", "NCCL_ALLGATHER"} <= names, names
    assert "NCCL_ALLREDUCE" not in names, names


def test_hvd_cells_run_on_the_gpu_of_their_local_rank(gpu, ip, monkeypatch):
    for var, value in gpu.env(2).items():
        monkeypatch.setenv(var, value)  # the ranks inherit this environment
    try:
        cell = "%%hvd -np 2 --framework none --restart -o devices\nfrom device_arrays import cupy\ncupy.cuda.Device().id"
        assert ip.run_cell(cell).success
        assert ip.user_ns["devices"] == [0, 1]
    finally:
        ip.run_line_magic("hvd", "stop")
