"""init(process_sets=...) on an engine that runs already, as in a %%hvd cell (the rank started the engine before
the cell) or a script's second init(): Horovod's idiom `hvd.init(process_sets=[evens, odds])` registers its
sets, a cell that makes them again binds the new objects, and bad lists fail on every rank. Sets made from
mpi4py communicators, as Horovod's documentation makes them, are registered by init() too."""
import numpy as np
import pytest
from mpi4py import MPI

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


def test_sets_made_from_split_communicators_register_every_rank_s_own():
    """Horovod's documented idiom: each rank holds the communicator of its half, and its ProcessSet is that half."""
    world, n = MPI.COMM_WORLD, hvd.size()
    half = world.Split(color=world.rank % 2, key=world.rank)
    mine = hvd.ProcessSet(half)
    assert (mine.ranks, mine.size(), mine.included(), mine.mpi_comm) == (None, None, None, half)
    with pytest.raises(ValueError, match=r"not registered; call hvd.init\(process_sets=\[...\]\) first"):
        hvd.allreduce(np.ones(2), process_set=mine)
    for _ in range(2):  # a cell that runs again binds to the same registrations
        hvd.init(process_sets=[mine])
        assert mine.ranks == list(range(hvd.rank() % 2, n, 2)) and mine.rank() == hvd.rank() // 2
        assert [s.ranks for s in process_sets.registered_sets()] == [list(range(0, n, 2)), list(range(1, n, 2))]
        summed(mine)
    assert f"mpi_comm={half}" in str(mine)
    hvd.barrier()
    for s in process_sets.registered_sets():
        assert hvd.remove_process_set(s)
    half.Free()


def test_a_set_from_a_communicator_that_leaves_ranks_out_is_bound_on_those_ranks_too():
    """COMM_WORLD.Create gives the ranks outside the group MPI.COMM_NULL: they get the members' set."""
    world = MPI.COMM_WORLD
    pair = world.Create(world.Get_group().Incl([0, 1]))
    head = hvd.ProcessSet(pair)
    hvd.init(process_sets=[head, [hvd.size() - 1]])
    assert head.ranks == [0, 1] and head.included() == (hvd.rank() < 2) and head.process_set_id is not None
    summed(head)
    if hvd.rank() >= 2:
        with pytest.raises(ValueError, match="not part of provided process set"):
            head.rank()
    hvd.barrier()
    for s in process_sets.registered_sets():
        assert hvd.remove_process_set(s)
    if pair != MPI.COMM_NULL:
        pair.Free()


def test_a_set_from_a_communicator_is_refused_where_horovod_refuses_it_on_every_rank():
    from_world = hvd.ProcessSet(MPI.COMM_WORLD)
    with pytest.raises(NotImplementedError, match=r"registered by hvd.init\(process_sets=\[...\]\) only"):
        hvd.add_process_set(from_world)
    with pytest.raises(ValueError, match="need comm to be a communicator"):
        hvd.init(comm=[0, 1], process_sets=[from_world])
    with pytest.raises(ValueError, match=r"different process_sets on the ranks \(rank 0: \['communicator'\]; rank 1: "
                                         r"\[\[0, 1\]\]"):
        hvd.init(process_sets=[from_world if hvd.rank() == 0 else [0, 1]])
    assert process_sets.registered_sets() == [] and from_world.process_set_id is None
    summed(hvd.global_process_set)
