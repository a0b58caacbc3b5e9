"""Every collective x dtype x process set against a numpy reference, on all ranks at once."""
import gc
import os
import time

import numpy as np
import pytest

import jupyter_hvd as hvd
from jupyter_hvd.basics import is_homogeneous
from memory_maps import HUGE_PAGES, huge_page_advised, inner_huge_page
from refdata import (ALL, BF16, FLOATS, alltoall_splits, data, expected_alltoall, expected_alltoallv,
                     expected_reduce, own_rows, reduce_cases, stacked)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_allreduce_every_op_and_set(sets, dtype):
    for si, ps, op, high in reduce_cases(sets, dtype):
        for shape in [(5,), (3, 4), (0,), (1, 1, 7)]:
            seed = hash((si, op, shape)) % 10000
            x = data(hvd.rank(), dtype, shape, seed, high)
            before = x.copy()
            got = hvd.allreduce(x, op=op, process_set=ps, name=f"ar.{dtype}.{si}.{op}.{shape}")
            np.testing.assert_array_equal(x, before)  # out of place: the input is only read
            want = expected_reduce(op, dtype, ps.ranks, shape, seed, high)
            assert got.dtype == dtype and got.shape == shape
            rtol = 1e-2 if dtype in (np.float16,) + tuple(BF16) else 1e-6  # Average divides
            np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol)


def carry_limit() -> int:
    return int(os.environ.get("JUPYTER_HVD_CARRY_BYTES", 256))


def test_small_allreduces_carry_their_inputs_unless_turned_off():
    """A small allreduce's inputs travel with the requests and every rank reduces them alike, with no collective:
    the same bits on every rank, counted in the metrics; JUPYTER_HVD_CARRY_BYTES bounds it (0: never)."""
    limit = carry_limit()
    x = np.random.default_rng(100 + hvd.rank()).standard_normal(7).astype(np.float32)  # 28 bytes
    before = hvd.metrics()["carried_allreduces"]
    got = hvd.allreduce(x, op=hvd.Sum, name="carried.bits")
    assert hvd.metrics()["carried_allreduces"] - before == (1 if 28 * hvd.size() <= limit else 0)
    every = hvd.allgather(got[None], name="carried.bits.all")
    assert (every == every[0]).all()
    np.testing.assert_allclose(got, sum(np.random.default_rng(100 + r).standard_normal(7).astype(np.float32)
                                        for r in range(hvd.size())), rtol=1e-5)


def test_a_small_allreduce_is_not_carried_while_another_is_in_flight():
    """Rank 0 queues 'small' while its 'held' cannot finish (the others queue 'held' only after 'small'), so it
    sends 'small' without its input; the others carry theirs, and 'small' runs as a collective on every rank."""
    x = np.full(3, float(hvd.rank() + 1), np.float32)
    before = hvd.metrics()["carried_allreduces"]
    if hvd.rank() == 0:
        held = hvd.allreduce_async(x, op=hvd.Sum, name="carry.held")
        hvd.barrier()  # queued after 'held': once it is done, so is the submission of 'held'
        small = hvd.allreduce(x, op=hvd.Sum, name="carry.small")
        got_held = held.wait()
    else:
        hvd.barrier()
        small = hvd.allreduce(x, op=hvd.Sum, name="carry.small")
        got_held = hvd.allreduce(x, op=hvd.Sum, name="carry.held")
    total = sum(range(1, hvd.size() + 1))
    np.testing.assert_array_equal(small, np.full(3, total, np.float32))
    np.testing.assert_array_equal(got_held, np.full(3, total, np.float32))
    # 'held', queued with nothing else in flight everywhere, is carried; 'small' is not, on any rank
    assert hvd.metrics()["carried_allreduces"] - before == (1 if 12 * hvd.size() <= carry_limit() else 0)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_allreduce_scaling_and_in_place(dtype):
    x = data(hvd.rank(), dtype, (6,), 7)
    want = stacked(list(range(hvd.size())), dtype, (6,), 7).sum(0) * 0.5 * 2.0
    got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=2.0)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-2)
    y = x.copy()
    out = hvd.allreduce_(y, op=hvd.Average)
    assert out is y
    np.testing.assert_allclose(y.astype(np.float64), stacked(list(range(hvd.size())), dtype, (6,), 7).mean(0),
                               rtol=1e-2)


def test_allreduce_into_out_arrays_the_caller_keeps():
    ranks = list(range(hvd.size()))
    x = data(hvd.rank(), np.float32, (4, 3), 11)
    out = np.full((4, 3), -1.0, np.float32)
    for step in range(3):  # the same buffers every step, as a training loop keeps them
        got = hvd.allreduce(x, op=hvd.Sum, name="out.one", out=out)
        assert got is out
        np.testing.assert_array_equal(out, stacked(ranks, np.float32, (4, 3), 11).sum(0))
    xs = [data(hvd.rank(), np.int32, (i + 2,), i) for i in range(3)]
    outs = [np.empty(i + 2, np.int32) for i in range(3)]
    got = hvd.grouped_allreduce_async(xs, op=hvd.Max, name="out.group", out=outs).wait()
    assert all(g is o for g, o in zip(got, outs))
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o, stacked(ranks, np.int32, (i + 2,), i).max(0))


@pytest.mark.parametrize("op", [hvd.Average, hvd.Sum])
def test_ranks_may_mix_in_place_and_out_of_place_forms_of_one_allreduce(op):
    """Each rank picks its own form, so how the engine reduces must not depend on it: sizes either side of
    the ring's threshold (1 MiB by default) and past it, with and without a prescale factor."""
    ranks = list(range(hvd.size()))
    for count in (3, (1 << 20) // 4 - 1, (1 << 20) // 4, 700_001):
        for pre in (1.0, 0.5):
            x = data(hvd.rank(), np.float32, (count,), count)
            want = stacked(ranks, np.float32, (count,), count).astype(np.float64).sum(0) * pre
            want /= hvd.size() if op == hvd.Average else 1
            name = f"mixed.{op}.{count}.{pre}"
            if hvd.rank() % 2:
                got = hvd.allreduce_(x, op=op, name=name, prescale_factor=pre)
                assert got is x
            else:
                before = x.copy()
                got = hvd.allreduce(x, op=op, name=name, prescale_factor=pre)
                np.testing.assert_array_equal(x, before)
            np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("bad, match", [
    (np.empty((4, 2), np.float32), "shape"), (np.empty((4, 3), np.float64), "float32"),
    (np.empty((3, 4), np.float32).T, "contiguous"), ("frozen", "read-only"),
    ([np.empty((4, 3), np.float32)] * 2, "one array per tensor")])
def test_a_bad_out_array_is_refused_on_the_rank_that_passes_it(bad, match):
    x = np.ones((4, 3), np.float32)
    if isinstance(bad, str):
        bad = np.empty((4, 3), np.float32)
        bad.flags.writeable = False
    with pytest.raises(ValueError, match=match):
        if isinstance(bad, list):
            hvd.grouped_allreduce([x], name="out.bad.group", out=bad)
        else:
            hvd.allreduce(x, name="out.bad", out=bad)
    np.testing.assert_array_equal(hvd.allreduce(x, op=hvd.Sum, name="out.after"), x * hvd.size())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_average_is_the_sum_divided_by_the_rank_count_rounded_once(dtype, sets):
    """As numpy's mean: Horovod multiplies by float(1/n), which at 3 ranks put about half of
    these a bit off (its own join test expects the division). Either side of the ring's threshold, in place
    and out of place, in each of the module's process sets."""
    for count in (201, 700_001):
        ints = np.arange(count) % 201 - 100
        for pset in sets:
            if pset.included():
                name = f"avg.{np.dtype(dtype)}.{count}.{pset.process_set_id}"
                mine = (ints + (hvd.rank() == pset.ranks[0])).astype(dtype)  # sums n * ints + 1: no multiple of n
                want = (ints * pset.size() + 1).astype(dtype) / dtype(pset.size())
                got = hvd.allreduce(mine, op=hvd.Average, name=name, process_set=pset)
                np.testing.assert_array_equal(got, want)
                np.testing.assert_array_equal(hvd.allreduce_(mine, name=name + ".in", process_set=pset), want)


def test_default_op_is_average_and_average_kwarg_warns():
    x = np.full(3, float(hvd.rank()), dtype=np.float32)
    mean = sum(range(hvd.size())) / hvd.size()
    np.testing.assert_allclose(hvd.allreduce(x), mean)
    with pytest.warns(DeprecationWarning):
        np.testing.assert_allclose(hvd.allreduce(x, average=False), mean * hvd.size())


def test_grouped_allreduce_fuses_and_matches():
    before = hvd.metrics()["fused_tensors"]
    xs = [data(hvd.rank(), np.float32, (i + 1, 3), i) for i in range(20)]
    got = hvd.grouped_allreduce(xs, op=hvd.Sum, name="grp")
    for i, g in enumerate(got):
        np.testing.assert_array_equal(g, stacked(list(range(hvd.size())), np.float32, (i + 1, 3), i).sum(0))
    ys = [x.copy() for x in xs]
    hvd.grouped_allreduce_(ys, op=hvd.Sum, name="grp_")
    for g, y in zip(got, ys):
        np.testing.assert_array_equal(g, y)
    if hvd.metrics()["fused_tensors"] == before:
        assert os.environ.get("HOROVOD_FUSION_THRESHOLD") == "0", "ready tensors were never fused"


def test_grouped_async_calls_return_one_handle_for_the_group():
    """Horovod's grouped *_async calls return one handle; synchronize() gives the results in order."""
    n = hvd.size()
    xs = [np.full((2, 3), i, np.float32) for i in range(4)]
    group = hvd.grouped_allreduce_async(xs, op=hvd.Sum, name="ga")
    got = hvd.synchronize(group)
    assert hvd.poll(group) and group.wait() is got
    assert [g.tolist() for g in got] == [np.full((2, 3), i * n).tolist() for i in range(4)]
    ys = [x.copy() for x in xs]
    got_ = hvd.grouped_allreduce_async_(ys, op=hvd.Sum, name="ga_").wait()
    assert all(a is b for a, b in zip(got_, ys)) and all((y == g).all() for y, g in zip(ys, got))
    rows = [np.full((hvd.rank() + 1, 2), i, np.int64) for i in range(3)]
    for i, g in enumerate(hvd.grouped_allgather_async(rows, name="gag").wait()):
        assert g.shape == (n * (n + 1) // 2, 2) and (g == i).all()
    blocks = [np.full((2 * n, 3), i + 1, np.float64) for i in range(3)]
    for i, g in enumerate(hvd.grouped_reducescatter_async(blocks, op=hvd.Sum, name="grs").wait()):
        np.testing.assert_array_equal(g, np.full((2, 3), (i + 1) * n))
    assert hvd.grouped_allreduce_async([]).wait() == []


def test_a_dropped_handle_keeps_its_arrays_until_the_operation_ends():
    """The engine writes into the result array whether or not anyone waits: dropping the handle must
    not free it (64 MiB goes back to the OS at once, so a write after the free is a crash)."""
    if hvd.rank() == 1:
        time.sleep(0.3)  # rank 0's copy is queued but cannot run yet
    hvd.allreduce_async(np.ones(1 << 24, np.float32), name="dropped")
    hvd.grouped_allreduce_async([np.ones(1 << 24, np.float32)], name="dropped.group")
    gc.collect()
    np.testing.assert_array_equal(hvd.allreduce(np.ones(2, np.float32), op=hvd.Sum), np.full(2, hvd.size()))


def test_ranks_enqueue_in_different_orders():
    names = [f"order.{i}" for i in range(30)]
    order = list(np.random.default_rng(hvd.rank()).permutation(len(names)))
    handles = {}
    for i in order:
        handles[i] = hvd.allreduce_async(data(hvd.rank(), np.float64, (4,), i), op=hvd.Sum, name=names[i])
    for i in range(len(names)):
        np.testing.assert_array_equal(handles[i].wait(),
                                      stacked(list(range(hvd.size())), np.float64, (4,), i).sum(0))


def test_repeated_names_use_the_response_cache():
    for step in range(5):
        for i in range(4):
            x = np.full(8, float(step + i), dtype=np.float32)
            np.testing.assert_array_equal(hvd.allreduce(x, op=hvd.Sum, name=f"cached.{i}"), x * hvd.size())
    if hvd.rank() != 0 and os.environ.get("HOROVOD_CACHE_CAPACITY") != "0":
        assert hvd.metrics()["cached_requests"] > 0


def test_unnamed_ops_leave_the_response_cache_to_names_that_repeat():
    """More unnamed ops than the cache holds (each has a new automatic name), then a named one: it is still
    cached from its third time on, where a cache full of names used once used to refuse it for good."""
    capacity = int(os.environ.get("HOROVOD_CACHE_CAPACITY", "1024"))
    x = np.ones(1, dtype=np.float32)
    for _ in range(capacity + 10):
        hvd.allreduce_(x.copy(), op=hvd.Sum)
    before = hvd.metrics()["cached_requests"]
    for _ in range(5):
        np.testing.assert_array_equal(hvd.allreduce(x, op=hvd.Sum, name="after.unnamed"), x * hvd.size())
    if hvd.rank() != 0:
        assert hvd.metrics()["cached_requests"] - before == (3 if capacity else 0)


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_allgather_varying_first_dim(sets, dtype):
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        rows = hvd.rank() % 3  # includes ranks that send nothing
        x = data(hvd.rank(), dtype, (rows, 2, 3), si)
        got = hvd.allgather(x, process_set=ps, name=f"ag.{dtype}.{si}")
        want = np.concatenate([data(r, dtype, (r % 3, 2, 3), si) for r in ps.ranks])
        assert got.shape == want.shape and got.dtype == dtype
        np.testing.assert_array_equal(got, want)


def test_allgather_repeated_under_one_name_with_rows_that_differ_per_rank():
    """Each rank's own first dimension, every step: a cached repeat must not stand for rank 0's rows."""
    n = hvd.size()
    for step in range(4):
        x = np.full((1 if hvd.rank() == 0 else 3, 2), step, np.int32)
        got = hvd.allgather(x, name="ag.rows")
        assert got.shape == (1 + 3 * (n - 1), 2) and (got == step).all(), (step, got.shape)


@pytest.mark.skipif(int(os.environ.get("HOROVOD_FUSION_THRESHOLD", 1 << 27)) < 1024, reason="the group does not fit")
def test_a_group_is_one_collective_however_the_ranks_are_timed():
    """A group's tensors reach the engine at once, so they negotiate and run as one collective."""
    xs = [np.full(3, i, np.float32) for i in range(20)]
    for late in range(hvd.size()):
        if hvd.rank() == late:
            time.sleep(0.05)
        before = hvd.metrics()["responses"]
        got = hvd.grouped_allreduce(xs, op=hvd.Sum, name=f"together.{late}")
        assert hvd.metrics()["responses"] - before == 1
        np.testing.assert_array_equal(got[7], np.full(3, 7 * hvd.size(), np.float32))


@pytest.mark.skipif(not HUGE_PAGES, reason="no transparent huge pages")
def test_a_large_result_the_engine_allocates_is_on_huge_pages():
    """The engine's own results of 4 MiB and more (allgather's, alltoall's, reducescatter's) are asked for huge
    pages before it writes them: one past glibc's 32 MiB mmap threshold was faulted in 4 KiB at a time."""
    rows = np.full((hvd.rank() + 1, 1 << 20), hvd.rank(), np.float32)  # 4 MiB a row
    got = hvd.allgather(rows, name="huge.allgather")
    assert got.shape == (hvd.size() * (hvd.size() + 1) // 2, 1 << 20)
    assert huge_page_advised(inner_huge_page(got.ctypes.data))


def test_grouped_allgather():
    xs = [np.full((hvd.rank() + 1, 2), i, dtype=np.int32) for i in range(3)]
    for i, g in enumerate(hvd.grouped_allgather(xs)):
        assert g.shape == (sum(r + 1 for r in range(hvd.size())), 2) and (g == i).all()


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_broadcast_from_every_root(sets, dtype):
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        for root in ps.ranks:
            x = data(hvd.rank(), dtype, (4, 3), root)
            got = hvd.broadcast(x, root_rank=root, process_set=ps, name=f"bc.{dtype}.{si}.{root}")
            np.testing.assert_array_equal(got, data(root, dtype, (4, 3), root))
            y = x.copy()
            assert hvd.broadcast_(y, root, process_set=ps, name=f"bc_.{dtype}.{si}.{root}") is y
            np.testing.assert_array_equal(y, data(root, dtype, (4, 3), root))


@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_alltoall_equal_and_explicit_splits(sets, dtype):
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        n = ps.size()
        x = data(hvd.rank(), dtype, (2 * n, 3), si)
        got = hvd.alltoall(x, process_set=ps, name=f"a2a.{dtype}.{si}")
        np.testing.assert_array_equal(got, expected_alltoall(ps, dtype, si))
        splits = alltoall_splits(ps.rank(), n)
        x = data(hvd.rank(), dtype, (sum(splits), 2), si + 50)
        out, recv = hvd.alltoall(x, splits=splits, process_set=ps, name=f"a2av.{dtype}.{si}")
        parts = expected_alltoallv(ps, dtype, si + 50)
        np.testing.assert_array_equal(out, np.concatenate(parts))
        assert list(recv) == [len(p) for p in parts]


@pytest.mark.parametrize("dtype", [d for d in ALL if d != np.bool_], ids=str)
def test_reducescatter_uneven_rows(sets, dtype):
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        n = ps.size()
        # uneven blocks; fewer rows than ranks (some blocks empty); blocks of many KiB
        for shape in [(2 * n + 1, 2), (n - 1, 3), (1, 4), (64 * n + 3, 257)]:
            for op in (hvd.Average, hvd.Sum):
                x = data(hvd.rank(), dtype, shape, si)
                got = hvd.reducescatter(x, op=op, process_set=ps, name=f"rs.{dtype}.{si}.{op}.{shape}")
                full = expected_reduce(op, dtype, ps.ranks, shape, si, 4)
                want = own_rows(full, ps)
                assert got.shape == want.shape and got.dtype == dtype
                np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-2)
    g = hvd.grouped_reducescatter([np.ones((hvd.size(), 2), np.float32)] * 2, op=hvd.Sum)
    assert all(x.shape == (1, 2) and (x == hvd.size()).all() for x in g)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_reducescatter_scaling_leaves_the_input_untouched(dtype):
    x = data(hvd.rank(), dtype, (3 * hvd.size(), 5), 11)
    before = x.copy()
    got = hvd.reducescatter(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=4.0, name=f"rs.scaled.{dtype}")
    full = stacked(list(range(hvd.size())), dtype, x.shape, 11).sum(0) * 2.0
    np.testing.assert_allclose(got.astype(np.float64), full[3 * hvd.rank():3 * hvd.rank() + 3], rtol=1e-2)
    np.testing.assert_array_equal(x, before)


def test_barrier_and_objects(sets):
    for ps in sets:
        if ps.included():
            hvd.barrier(process_set=ps)
    obj = {"rank": hvd.rank(), "payload": list(range(hvd.rank()))}
    assert hvd.allgather_object(obj) == [{"rank": r, "payload": list(range(r))} for r in range(hvd.size())]
    assert hvd.broadcast_object(obj, root_rank=hvd.size() - 1) == {
        "rank": hvd.size() - 1, "payload": list(range(hvd.size() - 1))}
    offset = hvd.rank()
    assert hvd.broadcast_object(lambda x: x + offset, root_rank=0)(1) == 1  # cloudpickle: closures travel
    for ps in sets:  # default names are per set, so sets do not collide
        if ps.included():
            assert hvd.allgather_object(hvd.rank(), process_set=ps) == ps.ranks


def test_dlpack_input_and_async_poll():
    class DLPackOnly:  # any CPU DLPack producer crosses without a copy
        def __init__(self, a):
            self._a = a

        def __dlpack__(self, **kw):
            return self._a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self._a.__dlpack_device__()

    h = hvd.allreduce_async(DLPackOnly(np.ones(4, np.float32)), op=hvd.Sum)
    np.testing.assert_array_equal(hvd.synchronize(h), np.full(4, hvd.size(), np.float32))
    assert hvd.poll(h)
    # In place: the producer's own memory is written, although numpy marks DLPack imports read-only.
    for dtype in (np.float32, np.int64):
        mine = np.ones(3, dtype)
        hvd.allreduce_(DLPackOnly(mine), op=hvd.Sum, name=f"dlpack_.{np.dtype(dtype).name}")
        hvd.grouped_allreduce_([DLPackOnly(mine)], op=hvd.Sum, name=f"dlpack_grp.{np.dtype(dtype).name}")
        np.testing.assert_array_equal(mine.astype(np.float32), np.full(3, hvd.size() ** 2, np.float32))
    root_value = np.full(2, hvd.rank(), np.int32)
    hvd.broadcast_(DLPackOnly(root_value), root_rank=0, name="dlpack.bcast_")
    np.testing.assert_array_equal(root_value, np.zeros(2, np.int32))


def test_ops_that_only_read_take_any_layout():
    n, me = hvd.size(), hvd.rank()
    base = np.arange(24, dtype=np.float32).reshape(4, 6) + me
    for view in (base[:, ::2], base.T, np.asfortranarray(base)):
        assert not view.flags.c_contiguous
        np.testing.assert_array_equal(hvd.allreduce(view, op=hvd.Sum),
                                      sum(view - me + r for r in range(n)))
        np.testing.assert_array_equal(hvd.allgather(view), np.concatenate([view - me + r for r in range(n)]))
        np.testing.assert_array_equal(hvd.broadcast(view, root_rank=0), view - me)
    np.testing.assert_array_equal(base, np.arange(24, dtype=np.float32).reshape(4, 6) + me)  # inputs untouched
    rows = np.arange(2 * n * 3, dtype=np.float32).reshape(3, 2 * n).T  # 2n rows, not contiguous
    np.testing.assert_array_equal(hvd.alltoall(rows), np.concatenate([rows[2 * me:2 * me + 2]] * n))


def test_an_op_submitted_before_rank_0_has_registered_its_set(monkeypatch):
    """A member may use a new set before rank 0 (the coordinator) has registered it: the request waits for the
    set, and must run once it is known even if nothing else is ever submitted (it waited for ever)."""
    from mpi4py import MPI

    from jupyter_hvd import process_sets

    world, member = MPI.COMM_WORLD, hvd.size() - 1
    late_start = member != 0  # on one rank there is no one to be early
    if hvd.rank() == 0 and late_start:
        register = process_sets._C.add_process_set

        def late(ranks):  # once the member has submitted, and its request has had time to reach rank 0
            world.recv(source=member, tag=77)
            time.sleep(0.2)
            return register(ranks)

        monkeypatch.setattr(process_sets._C, "add_process_set", late)
    last = hvd.add_process_set([member])
    if last.included():
        handle = hvd.allreduce_async(np.ones(2, np.float32), op=hvd.Sum, process_set=last, name="early")
        if late_start:
            world.send("submitted", dest=0, tag=77)
        np.testing.assert_array_equal(handle.wait(timeout=60), np.ones(2, np.float32))
    assert hvd.remove_process_set(last)


@pytest.mark.parametrize("dtype,value", [(np.int8, 100), (np.uint8, 100), (np.int16, 20000), (np.uint16, 40000)],
                         ids=str)
def test_small_integer_sums_wrap_around_at_every_size(dtype, value):
    """An 8- or 16-bit sum that overflows wraps, as in numpy, torch and NCCL, however long the tensor (Open
    MPI's vectorised MPI_SUM saturated from 32 elements on: 100 + 100 gave 127 in int8, 20000 + 20000
    32767 in int16)."""
    for count in (5, 31, 32, 33, 64, 1000, 100003):
        x = np.full(count, value, dtype)
        want = np.full(count, value * hvd.size(), np.int64).astype(dtype)
        np.testing.assert_array_equal(hvd.allreduce(x, op=hvd.Sum, name=f"wrap.{count}"), want)
        np.testing.assert_array_equal(hvd.allreduce(x, op=hvd.Average, name=f"wrap.avg.{count}"),
                                      want.astype(np.int64) // hvd.size() if np.dtype(dtype).kind == "u" else
                                      np.trunc(want.astype(np.float64) / hvd.size()).astype(dtype))
        rows = np.full((hvd.size(), count), value, dtype)
        np.testing.assert_array_equal(hvd.reducescatter(rows, op=hvd.Sum, name=f"wrap.rs.{count}"), want[None])


def test_topology():
    assert 0 <= hvd.rank() < hvd.size()
    assert hvd.local_size() == hvd.size() and hvd.local_rank() == hvd.rank()  # one host
    assert hvd.cross_size() == 1 and hvd.cross_rank() == 0
    assert is_homogeneous()  # one host has every rank
    assert hvd.mpi_built() and hvd.mpi_enabled() and hvd.mpi_threads_supported()
    assert not hvd.gloo_built() and hvd.nccl_built() <= hvd.cuda_built()  # True only on GPU hosts


def test_the_engine_runs_on_one_thread_named_hvd_engine():
    names = []
    for t in os.listdir("/proc/self/task"):
        try:  # short-lived threads of MPI may end meanwhile
            names.append(open(f"/proc/self/task/{t}/comm").read().strip())
        except FileNotFoundError:
            pass
    hvd.barrier()  # a rank that finishes shuts the engines down: not before every rank has looked
    assert names.count("hvd-engine") == 1, names
