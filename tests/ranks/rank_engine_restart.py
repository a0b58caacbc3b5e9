"""The engine restart that opens the cell after a failed one (jupyter_hvd.magic.engine_restart), on every rank."""
import time

import numpy as np
import pytest

import jupyter_hvd as hvd
from jupyter_hvd import process_sets
from jupyter_hvd.magic.engine_restart import restart_engine


def test_process_sets_come_back_in_their_order_and_work():
    n = hvd.size()
    dropped = hvd.add_process_set([0])
    pair = hvd.add_process_set([0, 1])
    tail = hvd.add_process_set(range(1, n))
    assert hvd.remove_process_set(dropped)
    hvd.abort("a cell failed")
    restart_engine(hvd)
    assert (pair.process_set_id, tail.process_set_id, dropped.process_set_id) == (1, 2, None)
    for s in (pair, tail):
        if s.included():
            np.testing.assert_array_equal(hvd.allreduce(np.ones(2), op=hvd.Sum, process_set=s), np.full(2, s.size()))
            np.testing.assert_array_equal(hvd.allreduce(np.ones(2), op=hvd.Sum, name=f"named.{s.process_set_id}",
                                                        process_set=s), np.full(2, s.size()))
    with pytest.raises(ValueError, match=r"not registered; call hvd.add_process_set\(\) first"):
        hvd.allreduce(np.ones(2), process_set=dropped)
    hvd.barrier()
    assert hvd.remove_process_set(pair) and hvd.remove_process_set(tail)


def test_a_set_that_init_bound_follows_its_registration_through_the_restart():
    hvd.add_process_set([0])
    made_again = hvd.ProcessSet([0, 1])
    hvd.init(process_sets=[made_again])  # registers [0, 1] after [0]
    bound = hvd.ProcessSet([0, 1])
    hvd.init(process_sets=[bound])  # the cell ran again: bound to the registration made_again holds
    first = process_sets.registered_sets()[0]
    assert hvd.remove_process_set(first)
    hvd.abort("a cell failed")
    restart_engine(hvd)
    assert bound.process_set_id == made_again.process_set_id == 1  # registered again, under a new id
    if bound.included():
        np.testing.assert_array_equal(hvd.allreduce(np.ones(2), op=hvd.Sum, process_set=bound), np.full(2, 2.0))
    hvd.barrier()
    assert hvd.remove_process_set(bound) and made_again.process_set_id is None


def test_a_handle_from_before_the_restart_raises_instead_of_waiting():
    held = hvd.allreduce_async(np.ones(2), name="left.in.flight" if hvd.rank() == 0 else "never.sent.by.rank.0")
    hvd.abort("a cell failed")
    restart_engine(hvd)
    with pytest.raises(hvd.EngineAbortedError, match="a cell failed"):
        held.wait(timeout=10)
    total = hvd.allreduce_async(np.ones(2), op=hvd.Sum, name="left.in.flight").wait(timeout=10)
    np.testing.assert_array_equal(total, np.full(2, hvd.size()))


def test_ranks_that_disagree_about_the_sets_register_none_again(capsys):
    kept = hvd.add_process_set([0, 1])
    if hvd.rank() == 1:  # as if rank 1 had failed inside add_process_set: the case the agreement is for
        del process_sets._registered[kept.process_set_id]
        kept.process_set_id = None
    restart_engine(hvd)
    assert kept.process_set_id is None and process_sets.registered_sets() == []
    said = capsys.readouterr().err
    if hvd.rank() == 0:
        assert "rank 0: [[0, 1]]; rank 1: []" in said and "hvd.add_process_set()" in said
    assert hvd.add_process_set(kept).process_set_id == 1
    hvd.barrier()
    assert hvd.remove_process_set(kept)


@pytest.mark.filterwarnings("ignore::DeprecationWarning:mxnet.*")
def test_an_mxnet_collective_still_queued_fails_instead_of_running_under_the_new_engine():
    """Rank 0 queues an unnamed allreduce behind slow MXNet work; the restart must fail it, not let it reach the
    new engine, where its name is the first one the peers' next unnamed allreduce takes."""
    mx = pytest.importorskip("mxnet")  # not in the NumPy 2 environment
    import jupyter_hvd.mxnet as hvd_mx

    if hvd.rank() == 0:
        a = mx.nd.ones((300, 300)) / 300
        b = a
        for _ in range(30):
            b = mx.nd.dot(b, a)
        hvd_mx.allreduce_(b)
    began = time.monotonic()
    restart_engine(hvd)
    assert time.monotonic() - began < 30
    total = hvd_mx.allreduce_(mx.nd.ones((2,)) * hvd.rank(), op=hvd.Sum)
    np.testing.assert_array_equal(total.asnumpy(), np.full(2, sum(range(hvd.size())), np.float32))
