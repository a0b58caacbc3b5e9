"""Every collective x dtype on CuPy arrays, against the numpy reference, on all ranks at once.

NCCL when each rank has its own GPU; host staging through MPI when ranks share one (or when
JUPYTER_HVD_GPU_STAGING=1). Results must be the same either way, fused or not.
"""
import os

import numpy as np
import pytest

import jupyter_hvd as hvd
from device_arrays import BUSY_SIDE, DLPackOnly, cupy
from refdata import (BOOL, INTS, alltoall_splits, data, expected_alltoall, expected_alltoallv,
                     expected_reduce, own_rows, reduce_cases, stacked)


FLOATS = [np.dtype(t) for t in (np.float16, np.float32, np.float64)]  # CuPy has no bfloat16
ALL = INTS + FLOATS + BOOL


@pytest.fixture(scope="module", autouse=True)
def pinned():
    """Each rank uses the GPU of its local rank (ranks share GPUs when there are fewer)."""
    cupy.cuda.Device(hvd.local_rank() % cupy.cuda.runtime.getDeviceCount()).use()


@pytest.fixture(scope="module")
def sets():
    """The global set, and with two or more ranks the even ranks (on one rank that would repeat it)."""
    extra = [] if hvd.size() == 1 else [hvd.add_process_set(list(range(0, hvd.size(), 2)))]
    yield [hvd.global_process_set] + extra
    for s in extra:
        assert hvd.remove_process_set(s)


def on_gpu(x: np.ndarray):
    return cupy.asarray(x)


def check(got, want, rtol=0.0):
    assert isinstance(got, cupy.ndarray), type(got)
    host = cupy.asnumpy(got)
    assert host.dtype == want.dtype and host.shape == want.shape, (host.dtype, host.shape, want.dtype, want.shape)
    if rtol:
        np.testing.assert_allclose(host.astype(np.float64), want.astype(np.float64), rtol=rtol)
    else:
        np.testing.assert_array_equal(host, want)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_allreduce_every_op_and_set(sets, dtype):
    for si, ps, op, high in reduce_cases(sets, dtype):
        for shape in [(5,), (3, 4), (0,), (1, 1, 7)]:
            seed = hash((si, op, shape)) % 10000
            x = on_gpu(data(hvd.rank(), dtype, shape, seed, high))
            got = hvd.allreduce(x, op=op, process_set=ps, name=f"g.ar.{dtype}.{si}.{op}.{shape}")
            want = expected_reduce(op, dtype, ps.ranks, shape, seed, high)
            check(got, want, rtol=1e-2 if dtype == np.float16 else 1e-6 if dtype in FLOATS else 0)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_allreduce_scaling_and_in_place(dtype):
    ranks = list(range(hvd.size()))
    x = on_gpu(data(hvd.rank(), dtype, (6,), 7))
    got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=2.0, name=f"g.scale.{dtype}")
    check(got, (stacked(ranks, dtype, (6,), 7).sum(0) * 0.5 * 2.0).astype(dtype), rtol=1e-2)
    got = hvd.allreduce(x, op=hvd.Average, prescale_factor=3.0, name=f"g.scaleavg.{dtype}")
    check(got, (stacked(ranks, dtype, (6,), 7).mean(0) * 3.0).astype(dtype), rtol=1e-2)
    y = x.copy()
    out = hvd.allreduce_(y, op=hvd.Average, name=f"g.inplace.{dtype}")
    assert out is y
    check(y, stacked(ranks, dtype, (6,), 7).mean(0).astype(dtype), rtol=1e-2)


# Byte sizes at the edges of the copy kernel's 16-byte loads and 8 KiB blocks.
EDGE_BYTES = [1, 3, 15, 16, 17, 4095, 8191, 8192, 8193, 65536, 200003, (1 << 20) + 5]
# Copies the copy kernel's parameter holds (JHVD_COPY_INLINE in engine/src/gpu/copy_kernel_args.h); a launch of more
# passes them in a table in device memory.
COPY_INLINE = 120


def edge_sizes() -> list:
    """Byte sizes of 300 tensors, more than the kernel's parameter holds: each stretch of COPY_INLINE starts with
    every edge size twice (at an even and an odd index, so once aligned and once not in the test below) and is
    filled up with the small ones; odd sizes end the last."""
    small = [b for b in EDGE_BYTES if b < 4096]
    sizes = []
    for n in (COPY_INLINE, COPY_INLINE, 300 - 2 * COPY_INLINE - 3):
        sizes += (EDGE_BYTES * 2 + small * n)[:n]
    return sizes + [7, 1, 33]


def fused_group(xs: list, name: str, in_place: bool) -> list:
    """Allreduces ``xs`` (sum) as one group. A first tensor whose producer stream is busy holds the engine (it
    waits for that stream), so the group is queued meanwhile and arrives ready together: fused even on one rank."""
    busy = cupy.cuda.Stream(non_blocking=True)
    with busy:
        a = cupy.ones((BUSY_SIDE, BUSY_SIDE), cupy.float32)
        for _ in range(30):
            a = (a @ a) / BUSY_SIDE
        first = hvd.allreduce_async(a[0], op=hvd.Sum, name=name + ".busy")
    group = (hvd.grouped_allreduce_async_ if in_place else hvd.grouped_allreduce_async)(xs, op=hvd.Sum, name=name)
    first.wait()
    return hvd.synchronize(group)


def test_grouped_allreduce_fuses_and_matches():
    before = hvd.metrics()["fused_tensors"]
    ranks = list(range(hvd.size()))
    xs = [on_gpu(data(hvd.rank(), np.float32, (i + 1, 3), i)) for i in range(20)]
    got = fused_group(xs, "g.grp", in_place=False)
    for i, g in enumerate(got):
        check(g, stacked(ranks, np.float32, (i + 1, 3), i).sum(0).astype(np.float32))
    ys = [x.copy() for x in xs]
    out = hvd.grouped_allreduce_(ys, op=hvd.Sum, name="g.grp_")
    assert all(o is y for o, y in zip(out, ys))
    for g, y in zip(got, ys):
        check(y, cupy.asnumpy(g))
    if hvd.metrics()["fused_tensors"] == before:
        assert os.environ.get("HOROVOD_FUSION_THRESHOLD") == "0", "ready GPU tensors were never fused"


@pytest.mark.parametrize("in_place", [False, True], ids=["out_of_place", "in_place"])
def test_fused_copies_of_every_size_and_alignment(in_place):
    """A group of as many tensors as the copy kernel's parameter holds, and one of 300 (their copies in a table):
    sizes at its edges, and views that start 1 byte (uint8) or 4 bytes (float32) past an aligned address, which
    take its unaligned path."""
    ranks = list(range(hvd.size()))
    for dtype, count in ((np.dtype(np.uint8), COPY_INLINE), (np.dtype(np.uint8), 300), (np.dtype(np.float32), 300)):
        shapes = [(max(b // dtype.itemsize, 1),) for b in edge_sizes()[:count]]
        xs, wants = [], []
        for i, shape in enumerate(shapes):
            x = data(hvd.rank(), dtype, shape, i)
            # Every other one: the same values, one element past an aligned start.
            xs.append(on_gpu(np.concatenate([x[:1], x]))[1:] if i % 2 else on_gpu(x))
            wants.append(stacked(ranks, dtype, shape, i).sum(0).astype(dtype))
        got = fused_group(xs, f"g.edges.{dtype}.{count}.{in_place}", in_place)
        for i, (g, want) in enumerate(zip(got, wants)):
            assert (g is xs[i]) == in_place
            check(g, want)
    status = hvd.gpu_status()["copy_kernel"]
    driver = os.environ.get("JUPYTER_HVD_CUDA_DRIVER_LIB")
    if os.environ.get("HOROVOD_BATCH_D2D_MEMCOPIES") == "0":
        assert status == "", status  # never tried
    elif driver and not os.path.exists(driver):
        assert status.startswith(f"no CUDA driver library ({driver}: cannot open"), status
    else:
        assert status == "loaded", status


def test_producer_stream_is_waited_for():
    """A tensor still being computed on another stream is reduced only once it is ready."""
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        x = cupy.ones((1 << 22,), cupy.float32)
        for _ in range(20):  # keep the stream busy for a while
            x = x * 1.0 + 0.0
        got = hvd.allreduce(x, op=hvd.Sum, name="g.stream")
    check(got, np.full(1 << 22, hvd.size(), np.float32))


def test_a_blocking_op_leaves_the_callers_current_device():
    """The thread that waits runs the op's GPU work itself (no hand-off to the engine thread), and its current
    device is its own again afterwards, even when that is not the device of the rank's tensors."""
    count = cupy.cuda.runtime.getDeviceCount()
    if count < 2:
        pytest.skip("needs a second GPU to make current")
    mine = cupy.cuda.Device().id
    x = on_gpu(np.full(5, hvd.rank() + 1, np.float32))
    other = (mine + 1) % count
    cupy.cuda.Device(other).use()
    try:
        got = hvd.allreduce(x, op=hvd.Sum, name="g.other_device")
        assert cupy.cuda.Device().id == other
        hvd.allreduce_(x, op=hvd.Sum, name="g.other_device_")
        assert cupy.cuda.Device().id == other
    finally:
        cupy.cuda.Device(mine).use()
    total = hvd.size() * (hvd.size() + 1) / 2
    check(got, np.full(5, total, np.float32))
    check(x, np.full(5, total, np.float32))


def test_tensor_with_only_dlpack():
    """Without __cuda_array_interface__ the tensor comes in through DLPack, and results go out through it."""
    ranks = list(range(hvd.size()))
    x = DLPackOnly(on_gpu(data(hvd.rank(), np.float32, (5, 3), 11)))
    check(hvd.allreduce(x, op=hvd.Sum, name="g.dl.ar"), stacked(ranks, np.float32, (5, 3), 11).sum(0).astype(np.float32))
    check(hvd.allgather(x, name="g.dl.ag"), np.concatenate([data(r, np.float32, (5, 3), 11) for r in ranks]))
    y = DLPackOnly(x.array.copy())
    assert hvd.allreduce_(y, op=hvd.Max, name="g.dl.ar_") is y
    check(y.array, stacked(ranks, np.float32, (5, 3), 11).max(0).astype(np.float32))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_allgather_varying_first_dim(sets, dtype):
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        x = on_gpu(data(hvd.rank(), dtype, (hvd.rank() % 3, 2, 3), si))
        got = hvd.allgather(x, process_set=ps, name=f"g.ag.{dtype}.{si}")
        check(got, np.concatenate([data(r, dtype, (r % 3, 2, 3), si) for r in ps.ranks]))
        same = on_gpu(data(hvd.rank(), dtype, (2, 3), si))  # equal blocks: one ncclAllGather
        got = hvd.allgather(same, process_set=ps, name=f"g.ag.eq.{dtype}.{si}")
        check(got, np.concatenate([data(r, dtype, (2, 3), si) for r in ps.ranks]))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_broadcast_from_every_root(sets, dtype):
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        for root in ps.ranks:
            x = on_gpu(data(hvd.rank(), dtype, (4, 3), root))
            check(hvd.broadcast(x, root_rank=root, process_set=ps, name=f"g.bc.{dtype}.{si}.{root}"),
                  data(root, dtype, (4, 3), root))
            y = x.copy()
            assert hvd.broadcast_(y, root, process_set=ps, name=f"g.bc_.{dtype}.{si}.{root}") is y
            check(y, data(root, dtype, (4, 3), root))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_alltoall_equal_and_explicit_splits(sets, dtype):
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        n = ps.size()
        x = on_gpu(data(hvd.rank(), dtype, (2 * n, 3), si))
        got = hvd.alltoall(x, process_set=ps, name=f"g.a2a.{dtype}.{si}")
        check(got, expected_alltoall(ps, dtype, si))
        splits = alltoall_splits(ps.rank(), n)
        x = on_gpu(data(hvd.rank(), dtype, (sum(splits), 2), si + 50))
        out, recv = hvd.alltoall(x, splits=splits, process_set=ps, name=f"g.a2av.{dtype}.{si}")
        parts = expected_alltoallv(ps, dtype, si + 50)
        check(out, np.concatenate(parts))
        assert list(recv) == [len(p) for p in parts]


@pytest.mark.parametrize("dtype", [d for d in ALL if d != np.bool_], ids=str)
def test_reducescatter_even_and_uneven_rows(sets, dtype):
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        n = ps.size()
        for rows in (2 * n, 2 * n + 1):
            for op in (hvd.Average, hvd.Sum):
                x = on_gpu(data(hvd.rank(), dtype, (rows, 2), si))
                got = hvd.reducescatter(x, op=op, process_set=ps, name=f"g.rs.{dtype}.{si}.{rows}.{op}")
                full = expected_reduce(op, dtype, ps.ranks, (rows, 2), si, 4)
                check(got, own_rows(full, ps), rtol=1e-2 if dtype in FLOATS else 0)


def test_gpu_flags():
    assert hvd.cuda_built() and hvd.nccl_built(), hvd.gpu_status()


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.float16)], ids=str)
def test_a_joined_rank_stands_in_on_its_gpu(dtype):
    """The last rank joins; the others' GPU allreduces, alone and fused, count it as each op's identity (zeros
    for Sum and Average, which still divides by every rank). It stands in on the GPU its own ops ran on."""
    check(hvd.allreduce(on_gpu(np.ones(2, dtype)), op=hvd.Sum), np.full(2, hvd.size(), dtype))
    if hvd.size() == 1:
        pytest.skip("nobody is left to stand in for")
    first = hvd.size() - 1
    present = [r for r in range(hvd.size()) if r != first]
    values = {r: np.random.default_rng([r, dtype.num]).integers(1, 4, (3, 5)).astype(dtype) for r in present}
    stack = np.stack(list(values.values()))
    wants = {hvd.Sum: stack.sum(0).astype(dtype), hvd.Min: stack.min(0), hvd.Max: stack.max(0),
             hvd.Product: stack.prod(0).astype(dtype),
             hvd.Average: (stack.sum(0) / hvd.size() if dtype.kind == "f" else stack.sum(0) // hvd.size()).astype(dtype)}
    if hvd.rank() == first:
        last = hvd.join()
    else:
        for op, want in wants.items():
            check(hvd.allreduce(on_gpu(values[hvd.rank()]), op=op, name=f"g.join.{dtype}.{op}"), want,
                  rtol=1e-3 if dtype == np.float16 else 0)
        got = hvd.grouped_allreduce([on_gpu(values[hvd.rank()])] * 3, op=hvd.Sum, name=f"g.join.group.{dtype}")
        for g in got:
            check(g, wants[hvd.Sum], rtol=1e-3 if dtype == np.float16 else 0)
        last = hvd.join()
    assert last in present
