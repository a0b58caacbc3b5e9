"""Tensor names are scoped by process set, as in Horovod: the same name may be in flight in several sets at
once, in any layout of sets, and a set removed under a pending operation fails that operation clearly."""
import numpy as np
import pytest

import jupyter_hvd as hvd

DTYPES = [np.float32, np.int32, np.float64, np.int64, np.float16]


def test_a_set_removed_under_a_pending_operation_fails_it_clearly():
    """Rank 1 never submits 'orphan' in [0, 1]; once every rank removes the set, rank 0's wait raises."""
    if hvd.size() < 3:
        pytest.skip("needs a set of two ranks that is not the global set")
    doomed = hvd.add_process_set([0, 1])
    pending = hvd.allreduce_async(np.ones(2, np.float32), name="orphan", process_set=doomed) \
        if hvd.rank() == 0 else None
    assert hvd.remove_process_set(doomed)
    if pending is not None:
        with pytest.raises(ValueError, match="process set .* was removed while this operation was pending"):
            pending.wait(timeout=60)
    np.testing.assert_array_equal(hvd.allreduce(np.ones(2, np.float32), op=hvd.Sum, name="orphan"),
                                  np.full(2, hvd.size()))


@pytest.fixture(scope="module")
def layouts():
    """Every rank's own single-member set; two halves; the ends [0, n-1] (non-contiguous from 3 ranks)."""
    n = hvd.size()
    made: dict = {(tuple(range(n))): hvd.global_process_set}  # a layout's sets may coincide (at 2 ranks)

    def get(ranks: list) -> hvd.ProcessSet:
        if tuple(ranks) not in made:
            made[tuple(ranks)] = hvd.add_process_set(ranks)
        return made[tuple(ranks)]

    half = max(1, n // 2)
    yield {"singles": [get([r]) for r in range(n)], "halves": [get(list(range(half))), get(list(range(half, n)))],
           "ends": get([0, n - 1])}
    for s in made.values():
        if s is not hvd.global_process_set:
            assert hvd.remove_process_set(s)


def my_set(sets: list) -> hvd.ProcessSet:
    return next(s for s in sets if hvd.rank() in s.ranks)


@pytest.mark.parametrize("layout", ["singles", "halves"])
@pytest.mark.parametrize("group", range(1, 9))
def test_grouped_names_reused_across_sets(layouts, layout, group):
    """Each rank reduces a group named after the step in its own set, the same names in every set."""
    ps = my_set(layouts[layout])
    for step in range(6):
        ts = [np.full((17, 17), hvd.rank() + 1, DTYPES[i % len(DTYPES)]) for i in range(group)]
        out = hvd.grouped_allreduce(ts, op=hvd.Sum, name=str(step), process_set=ps)
        want = sum(r + 1 for r in ps.ranks)
        for t, o in zip(ts, out):
            assert o.dtype == t.dtype
            np.testing.assert_array_equal(o, np.full((17, 17), want, t.dtype))
    hvd.barrier()


def test_the_same_name_in_overlapping_sets_at_once(layouts):
    """'x' in flight in the global set and in [0, n-1] on the same ranks, waited in either order."""
    ends = layouts["ends"]
    if ends is hvd.global_process_set:
        pytest.skip("at 2 ranks [0, n-1] is the global set")
    for step in range(5):
        outer = hvd.allreduce_async(np.full(3, 1.0, np.float32), op=hvd.Sum, name="x")
        inner = hvd.allreduce_async(np.full(3, 2.0, np.float32), op=hvd.Sum, name="x",
                                    process_set=ends) if hvd.rank() in ends.ranks else None
        handles = [h for h in (outer, inner) if h is not None]
        if step % 2:
            handles.reverse()
        results = {id(h): h.wait() for h in handles}
        np.testing.assert_array_equal(results[id(outer)], np.full(3, hvd.size()))
        if inner is not None:
            np.testing.assert_array_equal(results[id(inner)], np.full(3, 2.0 * ends.size()))


def test_every_op_under_one_name_in_two_sets(layouts):
    lo, hi = layouts["halves"]
    ps = my_set([lo, hi])
    me = ps.ranks.index(hvd.rank())
    n = ps.size()
    got = hvd.allgather(np.full((me + 1, 2), hvd.rank(), np.int32), name="op", process_set=ps)
    assert got.shape == (n * (n + 1) // 2, 2)
    b = hvd.broadcast(np.full(4, hvd.rank(), np.int64), root_rank=ps.ranks[-1], name="op", process_set=ps)
    np.testing.assert_array_equal(b, np.full(4, ps.ranks[-1]))
    a2a = hvd.alltoall(np.full((n, 3), hvd.rank(), np.float32), name="op", process_set=ps)
    np.testing.assert_array_equal(a2a[:, 0], np.array(ps.ranks, np.float32))
    rs = hvd.reducescatter(np.ones((n, 2), np.float64), op=hvd.Sum, name="op", process_set=ps)
    np.testing.assert_array_equal(rs, np.full((1, 2), float(n)))
    hvd.barrier(process_set=ps)


def test_unnamed_ops_and_the_frameworks_names_share_one_count():
    """The extension numbers the core's unnamed ops; the framework frontends number theirs through naming.py:
    one count per kind and set, so the two kinds of caller never give two ops one name."""
    from jupyter_hvd import naming

    taken = int(naming.auto_name("allreduce", 0).rsplit(".", 1)[1])
    events = hvd.drain_events()[0]
    since = events[-1].seq + 1 if events else 0
    hvd.allreduce(np.ones(2, np.float32))
    names = {e.name for e in hvd.drain_events(since)[0]}
    assert f"allreduce.noname.0.{taken + 1}" in names, names
    assert naming.auto_name("allreduce", 0) == f"allreduce.noname.0.{taken + 2}"
