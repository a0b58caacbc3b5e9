"""hvd.join, Horovod's semantics: a rank that has joined stands in for the others' allreduces (zeros for Sum
and Average, the op's identity for Min, Max and Product) and barriers; their other ops raise; every join
returns the rank that joined last. Seeded data, checked against numpy; any rank may join first."""
import numpy as np
import pytest

import jupyter_hvd as hvd

OPS = {hvd.Sum: np.sum, hvd.Min: np.min, hvd.Max: np.max, hvd.Product: np.prod}
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.float16]


def data(rank, dtype, seed, shape=(7, 3)):
    rng = np.random.default_rng([seed, rank])
    if np.dtype(dtype).kind == "f":
        return rng.uniform(-4, 4, shape).astype(dtype)
    lo = 0 if np.dtype(dtype).kind == "u" else -3
    return rng.integers(lo, 4, shape).astype(dtype)


def expected(op, dtype, seed, present):
    """What the ranks in ``present`` reduce to with the others joined (numpy, in float64 for floats)."""
    stack = np.stack([data(r, dtype, seed) for r in present])
    if op == hvd.Average:
        total = stack.astype(np.float64 if stack.dtype.kind == "f" else stack.dtype).sum(0)
        if stack.dtype.kind == "f":
            return (total / hvd.size()).astype(dtype)
        return (np.trunc(total / hvd.size())).astype(dtype)  # every rank counts, joined or not (Horovod)
    work = stack.astype(np.float64) if stack.dtype.kind == "f" else stack
    return OPS[op](work, axis=0).astype(dtype)


def agreed(value):
    """``value`` on every rank, checked to be the same everywhere."""
    seen = hvd.allgather_object(value)
    assert all(v == seen[0] for v in seen), seen
    return seen[0]


@pytest.mark.parametrize("first", range(4))
def test_joined_ranks_stand_in_for_every_reduction(first):
    if first >= hvd.size():
        pytest.skip("fewer ranks")
    present = [r for r in range(hvd.size()) if r != first]
    if hvd.rank() == first:
        last = hvd.join()
    else:
        for i, dtype in enumerate(DTYPES):
            for op in (hvd.Average, hvd.Sum, hvd.Min, hvd.Max, hvd.Product):
                seed = 100 * first + 10 * i + op
                got = hvd.allreduce(data(hvd.rank(), dtype, seed), op=op, name=f"stand.{first}.{i}.{op}")
                tol = 1e-2 if dtype == np.float16 else 1e-5
                want = expected(op, dtype, seed, present).astype(np.float64)
                np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol,
                                           err_msg=f"{np.dtype(dtype).name} op {op}")
        last = hvd.join()
    assert agreed(last) in present if hvd.size() > 1 else last == first


def test_groups_in_flight_ops_and_barriers_while_a_rank_has_joined():
    first = hvd.size() - 1
    present = [r for r in range(hvd.size()) if r != first]
    if hvd.rank() == first:
        # An op submitted before joining runs with the others' as usual; the join then waits.
        early = hvd.allreduce_async(data(first, np.float32, 7), op=hvd.Sum, name="early")
        hvd.join()
        np.testing.assert_allclose(early.wait(), expected(hvd.Sum, np.float32, 7, range(hvd.size())), rtol=1e-5)
        return
    early = hvd.allreduce(data(hvd.rank(), np.float32, 7), op=hvd.Sum, name="early")
    np.testing.assert_allclose(early, expected(hvd.Sum, np.float32, 7, range(hvd.size())), rtol=1e-5)
    got = hvd.grouped_allreduce([data(hvd.rank(), np.float64, s) for s in (8, 9, 10)], op=hvd.Sum, name="fused")
    for s, g in zip((8, 9, 10), got):
        np.testing.assert_allclose(g, expected(hvd.Sum, np.float64, s, present), rtol=1e-12)
    hvd.barrier()
    handles = [hvd.allreduce_async(np.full(5, 2.0, np.float32), op=hvd.Average, name=f"async.{k}") for k in range(6)]
    for h in handles:
        np.testing.assert_allclose(h.wait(), np.full(5, 2.0 * len(present) / hvd.size(), np.float32))
    hvd.join()


def test_other_ops_raise_on_the_ranks_that_submit_them_and_the_engine_goes_on():
    first = 0
    if hvd.rank() == first:
        assert agreed(hvd.join()) != first or hvd.size() == 1
    elif hvd.size() > 1:
        x = np.ones((hvd.size(), 2), np.float32)
        calls = [lambda: hvd.allgather(x, name="j.ag"), lambda: hvd.broadcast(x, root_rank=1, name="j.bc"),
                 lambda: hvd.alltoall(x, name="j.a2a"), lambda: hvd.reducescatter(x, name="j.rs")]
        for call, what in zip(calls, ["allgather", "broadcast", "alltoall", "reducescatter"]):
            with pytest.raises(hvd.TensorMismatchError, match=f"{what}.*rank 0 has joined.*only allreduces"):
                call()
        with pytest.raises(hvd.TensorMismatchError, match="Min with a prescale factor"):
            hvd.allreduce(x, op=hvd.Min, prescale_factor=2.0, name="j.min")
        assert agreed(hvd.join()) != first
    # Afterwards every rank takes part again, and unnamed ops agree although the ranks ran different numbers.
    np.testing.assert_array_equal(hvd.allreduce(np.ones(3, np.float32), op=hvd.Sum), np.full(3, hvd.size()))
    rows = np.repeat(np.arange(hvd.size()), 2).reshape(-1, 2)
    np.testing.assert_array_equal(hvd.allgather(np.full((1, 2), hvd.rank())), rows)


def test_uneven_steps_then_join_every_round():
    """Each rank runs its own number of unnamed steps and joins: sums count only the ranks still stepping."""
    for round_ in range(3):
        steps = 2 + (hvd.rank() + round_) % hvd.size()
        for step in range(steps):
            got = hvd.allreduce(np.ones(4, np.float32), op=hvd.Sum)
            stepping = sum(1 for r in range(hvd.size()) if 2 + (r + round_) % hvd.size() > step)
            np.testing.assert_array_equal(got, np.full(4, stepping, np.float32))
        last = agreed(hvd.join())
        assert 2 + (last + round_) % hvd.size() == 1 + hvd.size()  # a rank with the most steps joined last


def test_join_in_a_process_set():
    if hvd.size() < 3:
        pytest.skip("needs a set smaller than the job")
    ps = hvd.add_process_set([0, 2])
    try:
        if hvd.rank() == 2:
            assert hvd.join(process_set=ps) == 0
        elif hvd.rank() == 0:
            got = hvd.allreduce(np.full(3, 5, np.int32), op=hvd.Sum, name="in.set", process_set=ps)
            np.testing.assert_array_equal(got, np.full(3, 5, np.int32))
            assert hvd.join(process_set=ps) == 0
        hvd.barrier()
    finally:
        hvd.remove_process_set(ps)
