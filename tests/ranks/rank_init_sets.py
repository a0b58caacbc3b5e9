"""init(process_sets=...) on an engine that runs already, as in a %%hvd cell (the rank started the engine before
the cell) or a script's second init(): Horovod's idiom `hvd.init(process_sets=[evens, odds])` registers its
sets, a cell that makes them again binds the new objects, and bad lists fail on every rank."""
import numpy as np
import pytest

import jupyter_hvd as hvd
from jupyter_hvd import process_sets


def summed(s: hvd.ProcessSet) -> None:
    if s.included():
        np.testing.assert_array_equal(hvd.allreduce(np.ones(2), op=hvd.Sum, process_set=s), np.full(2, s.size()))


def a_cell_that_makes_its_sets():
    n = hvd.size()
    evens, odds = hvd.ProcessSet(range(0, n, 2)), hvd.ProcessSet(range(1, n, 2))
    hvd.init(process_sets=[evens, odds])
    return evens, odds


def test_the_sets_of_an_init_on_a_running_engine_are_registered_and_bound_when_made_again():
    assert hvd.is_initialized()
    evens, odds = a_cell_that_makes_its_sets()
    assert [s.ranks for s in process_sets.registered_sets()] == [evens.ranks, odds.ranks]
    summed(evens), summed(odds)
    again, odds_again = a_cell_that_makes_its_sets()  # the cell runs again: the same registrations
    assert (again.process_set_id, odds_again.process_set_id) == (evens.process_set_id, odds.process_set_id)
    summed(again), summed(odds_again)
    assert hvd.remove_process_set(again)  # removing a bound object removes the registration it shares
    assert evens.process_set_id is None and again.process_set_id is None
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(np.ones(2), process_set=evens)
    odds_id = odds.process_set_id
    hvd.init(process_sets=[[0], odds])  # a rank list is registered; a registered object stays as it is
    assert [s.ranks for s in process_sets.registered_sets()] == [odds.ranks, [0]] and odds.process_set_id == odds_id
    hvd.barrier()
    for s in process_sets.registered_sets():
        assert hvd.remove_process_set(s)
    assert odds_again.process_set_id is None


def test_a_duplicate_in_the_list_fails_on_every_rank_before_any_is_registered():
    with pytest.raises(ValueError, match=r"process_sets entry number 1 is a duplicate: ProcessSet\(.*ranks=\[0, 1\]"):
        hvd.init(process_sets=[hvd.ProcessSet([1, 0]), [0, 1]])
    assert process_sets.registered_sets() == []


def test_different_lists_on_the_ranks_fail_on_every_rank_instead_of_waiting():
    with pytest.raises(ValueError, match=r"different process_sets on the ranks \(rank 0: \[\[0\]\]; rank 1: \[\[1\]\]"):
        hvd.init(process_sets=[[hvd.rank()]])
    assert process_sets.registered_sets() == []
    summed(hvd.global_process_set)


def test_a_communicator_given_to_a_running_engine_is_not_ignored_silently():
    with pytest.warns(RuntimeWarning, match=r"hvd.init\(comm=...\) left the running engine as it is"):
        hvd.init(comm=[0])
    assert hvd.size() >= 2


def test_a_fresh_init_registers_its_sets_in_order():
    n = hvd.size()
    hvd.shutdown()
    tail, head = hvd.ProcessSet(range(1, n)), hvd.ProcessSet([0])
    hvd.init(process_sets=[tail, head])
    assert (tail.process_set_id, head.process_set_id) == (1, 2)  # a new engine numbers from 1
    summed(tail), summed(head)
    hvd.barrier()
    assert hvd.remove_process_set(tail) and hvd.remove_process_set(head)
