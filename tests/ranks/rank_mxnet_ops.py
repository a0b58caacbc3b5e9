"""jupyter_hvd.mxnet's collectives on NDArrays against a numpy reference, on all ranks at once."""
import os
import time
import warnings

import mxnet as mx
import numpy as np
import pytest
from mpi4py import MPI
from refdata import data, expected_alltoall, expected_reduce, reduce_cases, stacked
import jupyter_hvd.mxnet as hvd

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:mxnet.*")

DTYPES = [np.dtype(t) for t in (np.uint8, np.int8, np.int32, np.int64, np.float16, np.float32, np.float64,
                                np.bool_)]
FLOATS = [np.dtype(t) for t in (np.float16, np.float32, np.float64)]


def nd(x: np.ndarray) -> mx.nd.NDArray:
    return mx.nd.array(x, dtype=x.dtype)


def assert_equal(got: mx.nd.NDArray, want: np.ndarray, rtol: float = 0.0):
    assert isinstance(got, mx.nd.NDArray)
    out = got.asnumpy()
    assert out.dtype == want.dtype and out.shape == want.shape
    np.testing.assert_allclose(out.astype(np.float64), want.astype(np.float64), rtol=rtol)


def test_topology_and_build_flags():
    comm = MPI.COMM_WORLD
    assert (hvd.rank(), hvd.size()) == (comm.Get_rank(), comm.Get_size())
    assert 0 <= hvd.local_rank() < hvd.local_size() and 0 <= hvd.cross_rank() < hvd.cross_size()
    assert hvd.is_initialized() and hvd.mpi_threads_supported() and hvd.mpi_enabled() and hvd.mpi_built()
    assert not any(f() for f in (hvd.gloo_enabled, hvd.gloo_built, hvd.nccl_built, hvd.ddl_built,
                                 hvd.ccl_built, hvd.cuda_built, hvd.rocm_built))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allreduce_every_op_set_and_form(sets, dtype):
    """allreduce, allreduce_, grouped_allreduce and grouped_allreduce_ for each op and process set."""
    for si, ps, op, high in reduce_cases(sets, dtype):
        shapes = [(5,), (3, 4), (1, 1, 7)]
        seeds = [hash((si, op, s)) % 10000 for s in shapes]
        xs = [data(hvd.rank(), dtype, s, seed, high) for s, seed in zip(shapes, seeds)]
        wants = [expected_reduce(op, dtype, ps.ranks, s, seed, high) for s, seed in zip(shapes, seeds)]
        tag = f"{dtype}.{si}.{op}"
        inputs = [nd(x) for x in xs]
        outs = [hvd.allreduce(t, op=op, process_set=ps, name=f"ar.{tag}.{i}") for i, t in enumerate(inputs)]
        rtol = 1e-3 if op == hvd.Average and dtype in FLOATS else 0.0  # sum * (1/n) rounds
        for t, x, got, want in zip(inputs, xs, outs, wants):
            assert_equal(got, want, rtol)
            assert_equal(t, x)  # out of place: the input is untouched
        in_place = [nd(x) for x in xs]
        for i, t in enumerate(in_place):
            assert hvd.allreduce_(t, op=op, process_set=ps, name=f"ar_.{tag}.{i}") is t
        grouped = hvd.grouped_allreduce([nd(x) for x in xs], op=op, process_set=ps, name=f"gar.{tag}")
        grouped_in = [nd(x) for x in xs]
        assert hvd.grouped_allreduce_(grouped_in, op=op, process_set=ps) is grouped_in
        for want, a, b, c in zip(wants, in_place, grouped, grouped_in):
            assert_equal(a, want, rtol)
            assert_equal(b, want, rtol)
            assert_equal(c, want, rtol)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_allreduce_default_average_and_scaling(dtype):
    ranks = list(range(hvd.size()))
    x = data(hvd.rank(), dtype, (6,), 7)
    total = stacked(ranks, dtype, (6,), 7).sum(0)
    np.testing.assert_allclose(hvd.allreduce(nd(x)).asnumpy().astype(np.float64), total / len(ranks), rtol=1e-3)
    got = hvd.allreduce(nd(x), op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
    np.testing.assert_allclose(got.asnumpy().astype(np.float64), total * 1.5, rtol=1e-2)
    t = nd(x)
    hvd.grouped_allreduce_([t], op=hvd.Average, postscale_factor=2.0)
    np.testing.assert_allclose(t.asnumpy().astype(np.float64), total / len(ranks) * 2.0, rtol=1e-2)


def test_deprecated_average_and_op_errors():
    x = data(hvd.rank(), np.dtype(np.float32), (4,), 3)
    total = stacked(list(range(hvd.size())), np.dtype(np.float32), (4,), 3).sum(0)
    with pytest.warns(DeprecationWarning):
        summed = hvd.allreduce(nd(x), average=False, name="deprecated.sum")
    with pytest.warns(DeprecationWarning):
        averaged = hvd.allreduce_(nd(x), average=True, name="deprecated.avg")
    np.testing.assert_allclose(summed.asnumpy(), total, rtol=1e-6)
    np.testing.assert_allclose(averaged.asnumpy(), total / hvd.size(), rtol=1e-6)
    with pytest.raises(ValueError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hvd.allreduce(nd(x), average=True, op=hvd.Sum)
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.allreduce_(nd(x), op=hvd.Adasum)
    with pytest.raises(TypeError, match="Average"):
        hvd.allreduce(mx.nd.array([1, 0], dtype=np.bool_))
    with pytest.raises(TypeError, match="NDArray"):
        hvd.allreduce_(x)


def test_empty_groups_and_priorities():
    assert hvd.grouped_allreduce([]) == [] and hvd.grouped_allreduce_([]) == []
    ts = [mx.nd.full((50,), float(hvd.rank() + i)) for i in range(20)]
    for i, t in enumerate(ts):  # mixed priorities change the order MXNet starts them in, not the results
        hvd.allreduce_(t, op=hvd.Sum, name=f"prio.{i}", priority=(i * 7) % 5 - 2)
    base = sum(range(hvd.size()))
    for i, t in enumerate(ts):
        np.testing.assert_array_equal(t.asnumpy(), np.full(50, base + hvd.size() * i, np.float32))


def test_async_push_returns_before_peers_join():
    """Rank 0 pushes first and only then lets the others push: a blocking push would deadlock here."""
    comm = MPI.COMM_WORLD
    t = mx.nd.full((8,), float(hvd.rank() + 1))
    if hvd.rank() == 0:
        hvd.allreduce_(t, op=hvd.Sum, name="async.first")
        later = t * 2  # a reader pushed behind the collective: it waits for the result
        for r in range(1, hvd.size()):
            comm.send("pushed", dest=r, tag=77)
    else:
        assert comm.recv(source=0, tag=77) == "pushed"
        hvd.allreduce_(t, op=hvd.Sum, name="async.first")
        later = t * 2
    total = hvd.size() * (hvd.size() + 1) / 2
    np.testing.assert_array_equal(later.asnumpy(), np.full(8, 2 * total, np.float32))


def test_out_of_place_reads_the_input_before_a_later_write():
    """The input is the collective's read dependency: a write pushed right after waits for it, and the result
    holds the values from before the write, every round."""
    x = mx.nd.full((64,), float(hvd.rank() + 1))
    total = hvd.size() * (hvd.size() + 1) / 2
    outs = []
    for i in range(20):
        outs.append(hvd.allreduce(x, op=hvd.Sum, name=f"ooo.{i}"))
        x += 1  # every rank adds 1: round i reduces rank values + i
    for i, out in enumerate(outs):
        np.testing.assert_array_equal(out.asnumpy(), np.full(64, total + hvd.size() * i, np.float32))
    np.testing.assert_array_equal(x.asnumpy(), np.full(64, hvd.rank() + 21.0, np.float32))


@pytest.mark.parametrize("n", [1, 1024, 1025])  # up to 1,024 elements MXNet runs the op in the pushing thread
def test_a_collective_pushed_while_its_input_is_being_written_reads_the_written_values(n):
    """The input's writer (a product of two large matrices) still runs when the collective is pushed: small
    ops then wait in MXNet's worker queue, larger ones in its prioritised pool; both see the written values."""
    a, b = mx.nd.ones((256, 600)), mx.nd.ones((600, 1100))
    for i in range(3):
        x = mx.nd.dot(a, b)[0, :n] / 600 + hvd.rank() + i  # rank + i + 1 once written
        out = hvd.allreduce(x, op=hvd.Sum, name=f"pending.{n}.{i}")
        hvd.allreduce_(x, op=hvd.Sum, name=f"pending.{n}.{i}.in")
        want = np.full(n, sum(r + i + 1 for r in range(hvd.size())), np.float32)
        np.testing.assert_array_equal(out.asnumpy(), want)
        np.testing.assert_array_equal(x.asnumpy(), want)


def test_pending_collective_does_not_block_independent_ones():
    """MXNet schedules by dependency: B completes while A still waits for its peers."""
    comm = MPI.COMM_WORLD
    a = mx.nd.ones((4,))
    b = mx.nd.ones((4,))
    if hvd.rank() == 0:
        hvd.allreduce_(a, op=hvd.Sum, name="dep.a")
        hvd.allreduce_(b, op=hvd.Sum, name="dep.b")
        assert b.asnumpy()[0] == hvd.size()
        for r in range(1, hvd.size()):
            comm.send("b done", dest=r, tag=78)
    else:
        hvd.allreduce_(b, op=hvd.Sum, name="dep.b")
        assert comm.recv(source=0, tag=78) == "b done"
        hvd.allreduce_(a, op=hvd.Sum, name="dep.a")
    assert a.asnumpy()[0] == hvd.size()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_broadcast_every_root_and_set(sets, dtype):
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        for root in ps.ranks:
            x = data(hvd.rank(), dtype, (3, 5), si * 10 + root)
            want = data(root, dtype, (3, 5), si * 10 + root)
            t = nd(x)
            got = hvd.broadcast(t, root, name=f"bc.{dtype}.{si}.{root}", process_set=ps)
            assert_equal(got, want)
            assert_equal(t, x)
            assert hvd.broadcast_(t, root_rank=root, process_set=ps) is t
            assert_equal(t, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allgather_and_grouped(sets, dtype):
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        rows = lambda r: r % 3 + 1  # noqa: E731 - the first dimension differs per rank
        x = data(hvd.rank(), dtype, (rows(hvd.rank()), 2), si)
        want = np.concatenate([data(r, dtype, (rows(r), 2), si) for r in ps.ranks])
        assert_equal(hvd.allgather(nd(x), process_set=ps), want)
        y = data(hvd.rank(), dtype, (1, 3), si + 50)
        want_y = np.concatenate([data(r, dtype, (1, 3), si + 50) for r in ps.ranks])
        got = hvd.grouped_allgather([nd(x), nd(y)], name=f"gag.{dtype}.{si}", process_set=ps)
        assert_equal(got[0], want)
        assert_equal(got[1], want_y)


@pytest.mark.parametrize("dtype", [np.dtype(np.float32), np.dtype(np.int64), np.dtype(np.uint8)], ids=str)
def test_alltoall_even_and_with_splits(sets, dtype):
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        n, me = ps.size(), ps.rank()
        x = data(hvd.rank(), dtype, (2 * n, 3), si)
        assert_equal(hvd.alltoall(nd(x), process_set=ps, name=f"a2a.{dtype}.{si}"), expected_alltoall(ps, dtype, si))
        # rank r sends (j + r) % 3 rows to member j; splits as a list and as an NDArray
        splits_of = lambda r: [(j + r) % 3 for j in range(n)]  # noqa: E731
        rows = sum(splits_of(hvd.rank()))
        y = data(hvd.rank(), dtype, (rows, 2), si + 9)
        pieces = []
        for r in ps.ranks:
            s = splits_of(r)
            start = sum(s[:me])
            pieces.append(data(r, dtype, (sum(s), 2), si + 9)[start:start + s[me]])
        for splits in (splits_of(hvd.rank()), mx.nd.array(splits_of(hvd.rank()), dtype=np.int32)):
            out, received = hvd.alltoall(nd(y), splits=splits, process_set=ps)
            assert_equal(out, np.concatenate(pieces))
            assert_equal(received, np.array([splits_of(r)[me] for r in ps.ranks], dtype=np.int32))


@pytest.mark.parametrize("dtype", FLOATS + [np.dtype(np.int32)], ids=str)
def test_reducescatter_and_grouped(sets, dtype):
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        n, me = ps.size(), ps.rank()
        shape = (2 * n + 1, 3)  # uneven: the first members get one more row
        x = data(hvd.rank(), dtype, shape, si)
        total = stacked(ps.ranks, dtype, shape, si).sum(0)
        bounds = np.cumsum([0] + [shape[0] // n + (1 if i < shape[0] % n else 0) for i in range(n)])
        mine = total[bounds[me]:bounds[me + 1]]
        assert_equal(hvd.reducescatter(nd(x), op=hvd.Sum, process_set=ps), mine.astype(dtype))
        if dtype in FLOATS:
            got = hvd.reducescatter(nd(x), process_set=ps, name=f"rs.avg.{dtype}.{si}")
            np.testing.assert_allclose(got.asnumpy().astype(np.float64), mine / n, rtol=1e-3)
            g = hvd.grouped_reducescatter([nd(x), nd(x)], op=hvd.Sum, process_set=ps, prescale_factor=2.0)
            for out in g:
                np.testing.assert_allclose(out.asnumpy().astype(np.float64), mine * 2, rtol=1e-3)


def test_objects(sets):
    assert hvd.broadcast_object(hvd.rank() * 10, root_rank=hvd.size() - 1) == (hvd.size() - 1) * 10
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        got = hvd.allgather_object({"rank": hvd.rank(), "pad": "x" * hvd.rank()}, name=f"ago.{si}", process_set=ps)
        assert got == [{"rank": r, "pad": "x" * r} for r in ps.ranks]
        root = ps.ranks[-1]
        obj = {"weights": np.arange(3), "from": hvd.rank()} if hvd.rank() == root else None
        got = hvd.broadcast_object(obj, root_rank=root, name=f"bco.{si}", process_set=ps)
        assert got["from"] == root and list(got["weights"]) == [0, 1, 2]


def test_barrier_waits_for_every_rank_of_the_set(sets, tmp_path_factory):
    """What a rank wrote before the barrier, every rank of the set sees after it (whatever the ranks' speeds)."""
    folder = MPI.COMM_WORLD.bcast(str(tmp_path_factory.mktemp("barrier")) if hvd.rank() == 0 else None)
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        if hvd.rank() == ps.ranks[-1]:
            time.sleep(0.2)  # the last to arrive (without the barrier the others would look too early)
        with open(f"{folder}/{si}.{hvd.rank()}", "w"):
            pass
        hvd.barrier(process_set=ps)
        assert all(os.path.exists(f"{folder}/{si}.{r}") for r in ps.ranks)


def test_timeline_round_trip(tmp_path_factory):
    path = MPI.COMM_WORLD.bcast(str(tmp_path_factory.mktemp("tl") / "timeline.json") if hvd.rank() == 0 else None)
    hvd.start_timeline(path)
    hvd.allreduce(mx.nd.ones((16,)), name="timeline.x").wait_to_read()
    hvd.stop_timeline()


def test_horovod_semantics_of_scaling_zero_dim_tensors_and_splits():
    """As horovod.mxnet 0.28: integers are scaled (in float64, cast back), a 0-d reducescatter is a ValueError,
    and splits that are not integers fail."""
    n = hvd.size()
    got = hvd.allreduce(mx.nd.array([3, -5], dtype=np.int32), op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0,
                        name="mx.int.scaled")
    assert_equal(got, np.trunc(np.trunc(np.array([1.5, -2.5]) * 1) * n * 3.0).astype(np.int32))
    grouped = hvd.grouped_allreduce([mx.nd.array([7], dtype=np.int64)] * 2, op=hvd.Average, postscale_factor=2.0,
                                    name="mx.int.avg")
    for g in grouped:
        assert_equal(g, np.array([14], np.int64))
    rs = hvd.reducescatter(mx.nd.array(np.full((n, 2), 5), dtype=np.int32), op=hvd.Sum, prescale_factor=0.5,
                           name="mx.int.rs")
    assert_equal(rs, np.full((1, 2), 2 * n, np.int32))
    zero_d = mx.nd.array(np.float32(3.0))
    assert zero_d.ndim == 0
    for call in (lambda: hvd.reducescatter(zero_d), lambda: hvd.grouped_reducescatter([zero_d])):
        with pytest.raises(ValueError, match="at least one dimension"):
            call()
    with pytest.raises(mx.base.MXNetError, match="splits must be integers"):
        hvd.alltoall(mx.nd.ones((n, 2)), splits=mx.nd.ones((n,), dtype=np.float32))
    out, received = hvd.alltoall(mx.nd.ones((n, 2)), splits=mx.nd.ones((n,), dtype=np.int32), name="mx.splits")
    assert out.shape == (n, 2) and received.dtype == np.int32
