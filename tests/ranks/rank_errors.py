"""Bad input gets a clear exception on every rank, and the engine keeps working afterwards."""
import numpy as np
import pytest

import jupyter_hvd as hvd
from jupyter_hvd import _C

MIN_RANKS = 2  # the tests make the ranks disagree


def still_works():
    np.testing.assert_array_equal(hvd.allreduce(np.ones(3, np.float32), op=hvd.Sum), np.full(3, hvd.size()))


def test_shape_mismatch_names_tensor_and_ranks():
    with pytest.raises(hvd.TensorMismatchError) as e:
        hvd.allreduce(np.ones(2 + hvd.rank(), np.float32), name="bad.shape")
    msg = str(e.value)
    assert "bad.shape" in msg and "shape" in msg and "rank 0" in msg and "rank 1" in msg
    still_works()


def test_dtype_mismatch():
    dtype = np.float32 if hvd.rank() == 0 else np.float64
    with pytest.raises(hvd.TensorMismatchError, match="data types.*float32.*float64|data types.*float64.*float32"):
        hvd.allreduce(np.ones(3, dtype), name="bad.dtype")
    still_works()


def test_op_and_reduce_mismatch():
    with pytest.raises(hvd.TensorMismatchError, match="operations"):
        if hvd.rank() == 0:
            hvd.allreduce(np.ones(3, np.float32), name="bad.op")
        else:
            hvd.broadcast(np.ones(3, np.float32), 0, name="bad.op")
    with pytest.raises(hvd.TensorMismatchError, match="reduce ops"):
        hvd.allreduce(np.ones(3, np.float32), name="bad.reduce", op=hvd.Sum if hvd.rank() == 0 else hvd.Max)
    still_works()


def test_root_mismatch():
    with pytest.raises(hvd.TensorMismatchError, match="root ranks"):
        hvd.broadcast(np.ones(3, np.float32), root_rank=0 if hvd.rank() == 0 else 1, name="bad.root")
    still_works()


def test_allgather_and_alltoall_trailing_dims_must_match():
    with pytest.raises(hvd.TensorMismatchError, match="beyond the first"):
        hvd.allgather(np.ones((2, 2 + hvd.rank()), np.float32), name="bad.ag")
    with pytest.raises(hvd.TensorMismatchError, match="beyond the first"):
        hvd.alltoall(np.ones((hvd.size(), 1 + hvd.rank()), np.float32), name="bad.a2a")
    still_works()


@pytest.mark.parametrize("bad", [np.ones(3, np.complex64), np.ones(3, np.uint32), np.ones(3, np.uint64)])
def test_unsupported_dtype_is_type_error(bad):
    with pytest.raises(TypeError, match="unsupported dtype"):
        hvd.allreduce(bad)


def test_non_contiguous_and_non_array_inputs():
    with pytest.raises(ValueError, match="written in place must be C-contiguous"):
        hvd.allreduce_(np.ones((4, 4), np.float32)[:, 1], name="strided.inplace")
    with pytest.raises(ValueError, match="written in place must be C-contiguous"):
        hvd.broadcast_(np.ones((4, 4), np.float32).T, root_rank=0, name="strided.bcast_")
    with pytest.raises(TypeError, match="numpy array or a DLPack"):
        hvd.allreduce([1.0, 2.0])


def test_bad_root_rank():
    with pytest.raises(ValueError, match="root_rank"):
        hvd.broadcast(np.ones(2), root_rank=hvd.size())
    with pytest.raises(ValueError, match="root_rank"):
        hvd.broadcast(np.ones(2), root_rank=-1)
    with pytest.raises(TypeError, match="root_rank"):
        hvd.broadcast(np.ones(2), root_rank="0")
    still_works()


def test_bad_splits_and_scaling_and_ops():
    with pytest.raises(ValueError, match="splits"):
        hvd.alltoall(np.ones((3, 2)), splits=[1] * (hvd.size() + 1))
    with pytest.raises(ValueError, match="splits"):
        hvd.alltoall(np.ones((3, 2)), splits=[5] + [0] * (hvd.size() - 1))
    with pytest.raises(ValueError, match="divisible"):
        hvd.alltoall(np.ones((hvd.size() + 1, 2)))
    with pytest.raises(TypeError, match="bool"):
        hvd.allreduce(np.ones(3, np.bool_), op=hvd.Average)
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.allreduce(np.ones(3, np.float32), op=hvd.Adasum)
    with pytest.raises(ValueError, match="unknown reduce op"):
        hvd.allreduce(np.ones(3, np.float32), op=42)
    with pytest.raises(ValueError, match="name"):
        hvd.allreduce(np.ones(3, np.float32), name="")
    still_works()


def held_in_flight(name: str, check) -> None:
    """Runs ``check`` on every rank but the last while an allreduce ``name`` is in flight there: it cannot
    complete before the last rank submits it too, which that rank does only after every other one checked."""
    last = hvd.rank() == hvd.size() - 1
    held = None if last else hvd.allreduce_async(np.ones(2, np.float32), name=name)
    if not last:
        check()
    hvd.allreduce(np.ones(1, np.float32), name=name + ".checked")
    if last:
        held = hvd.allreduce_async(np.ones(2, np.float32), name=name)
    held.wait()


def test_name_in_flight_twice_is_rejected():
    def check():
        with pytest.raises(ValueError, match="already in flight"):
            hvd.allreduce_async(np.ones(2, np.float32), name="dup")

    held_in_flight("dup", check)
    still_works()


def test_a_dropped_handle_leaves_its_op_in_flight_under_its_name_as_horovods_test_has_it():
    """Horovod's duplicate-name test: rank 1 queues the op the others wait with, drops the handle and queues the
    name again. The dropped handle's finalizer polled, and a poll runs an engine step itself: the op ended
    there, the second was queued as a new op (no error) and waited forever for its peer. 128 MiB, so that the
    engine thread's own work cannot end it between the two calls either."""
    big = np.ones(1 << 25, np.float32)
    if hvd.rank() != 1:
        held = hvd.allreduce_async(big, name="dup.dropped", op=hvd.Sum)
    hvd.barrier()
    if hvd.rank() == 1:
        hvd.allreduce_async(big, name="dup.dropped", op=hvd.Sum)  # its handle is dropped at once
        with pytest.raises(ValueError, match="already in flight"):
            hvd.allreduce_async(big, name="dup.dropped", op=hvd.Sum)
    else:
        assert held.wait()[0] == hvd.size()
    hvd.barrier()
    still_works()


def test_a_group_is_queued_whole_or_not_at_all():
    xs = [np.ones(2, np.float32) for _ in range(3)]

    def check():
        with pytest.raises(ValueError, match="'grp.in_flight.1' is already in flight"):
            hvd.grouped_allreduce(xs, name="grp.in_flight")

    held_in_flight("grp.in_flight.1", check)
    # Nothing of the refused group was queued, so the same names are free now.
    got = hvd.grouped_allreduce(xs, op=hvd.Sum, name="grp.in_flight")
    assert all((g == hvd.size()).all() for g in got)
    with pytest.raises(TypeError, match="unsupported dtype"):
        hvd.grouped_allreduce([np.ones(2, np.float32), np.ones(2, np.uint32)], name="grp.dtype")
    x = np.ones(2, np.float32)  # the engine's own check, for callers that name tensors themselves
    with pytest.raises(ValueError, match="'twice' appears twice in one group"):
        _C.submit(int(_C.OpType.allreduce), "allreduce", [x, x], [x, x], ["twice", "twice"], 0, 0, -1, 1.0, 1.0, [])
    with pytest.raises(ValueError, match="'short': the output array has 4 bytes, the input 8"):  # never written past
        _C.submit(int(_C.OpType.allreduce), "allreduce", [x], [np.empty(1, np.float32)], ["short"], 0, 0, -1, 1.0,
                  1.0, [])
    still_works()


def test_read_only_arrays_cannot_be_written_in_place():
    x = np.ones(3, np.float32)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="in place must be C-contiguous and writable"):
        hvd.allreduce_(x, name="ro.inplace")
    with pytest.raises(ValueError, match="in place must be C-contiguous and writable"):
        hvd.grouped_allreduce_([np.ones(3, np.float32), x], name="ro.group")
    np.testing.assert_array_equal(hvd.allreduce(x, op=hvd.Sum, name="ro.out"), np.full(3, hvd.size()))
    still_works()


def test_one_bad_tensor_fails_its_group_on_every_rank():
    xs = [np.ones(2, np.float32), np.ones(2 + hvd.rank(), np.float32), np.ones(4, np.float32)]
    group = hvd.grouped_allreduce_async(xs, name="grp.bad")
    with pytest.raises(hvd.TensorMismatchError, match="grp.bad.1"):
        group.wait()
    assert group.poll()
    still_works()


def test_process_set_errors():
    for bad in (None, [0]):
        with pytest.raises(TypeError, match="process_set must be a ProcessSet"):
            hvd.allreduce(np.ones(2), process_set=bad)
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(np.ones(2), process_set=hvd.ProcessSet([0]))
    with pytest.raises(ValueError, match="different ranks"):
        hvd.add_process_set([0] if hvd.rank() == 0 else [0, 1])
    unregistered = hvd.ProcessSet([0])
    assert (unregistered.rank(), unregistered.included()) == ((0, True) if hvd.rank() == 0 else (-1, False))
    only_zero = hvd.add_process_set([0])
    assert only_zero.included() == (hvd.rank() == 0)
    if hvd.rank() != 0:
        with pytest.raises(ValueError, match="not a member"):
            hvd.allreduce(np.ones(2), process_set=only_zero)
        with pytest.raises(ValueError, match="^Process is not part of provided process set.$"):  # Horovod's
            only_zero.rank()
    else:
        assert only_zero.rank() == 0
    with pytest.raises(ValueError, match="already"):
        hvd.add_process_set([0])
    assert hvd.remove_process_set(only_zero)
    assert not hvd.remove_process_set(only_zero)
    still_works()


@pytest.mark.parametrize("ranks", [[0.7], ["1"], [0, None], "01", 3, object()],
                         ids=["float", "str", "None", "a string", "an int", "an object"])
def test_a_process_set_of_anything_but_integer_ranks_is_a_value_error(ranks):
    """As Horovod's; numpy's integers are ranks too, and the parameter has Horovod's name."""
    with pytest.raises(ValueError, match="ProcessSet should be initialized with a list of process ranks"):
        hvd.ProcessSet(ranks)
    made = hvd.ProcessSet(ranks_or_comm=np.array([1, 0]))
    assert (made.ranks, made.mpi_comm, str(made)) == ([0, 1], None,
                                                      "ProcessSet(process_set_id=None, ranks=[0, 1], mpi_comm=None)")


def test_wait_timeout_then_completes():
    if hvd.rank() == 0:
        h = hvd.allreduce_async(np.ones(2, np.float32), name="late", op=hvd.Sum)
        with pytest.raises(TimeoutError):
            h.wait(timeout=0.2)
        hvd.barrier()
    else:
        hvd.barrier()
        h = hvd.allreduce_async(np.ones(2, np.float32), name="late", op=hvd.Sum)
    np.testing.assert_array_equal(h.wait(), np.full(2, hvd.size()))


@pytest.mark.parametrize("call", ["grouped_allreduce", "grouped_allreduce_async", "grouped_allreduce_",
                                  "grouped_allreduce_async_", "grouped_allgather", "grouped_allgather_async",
                                  "grouped_reducescatter", "grouped_reducescatter_async"])
def test_a_grouped_op_given_one_array_says_so(call):
    """Its rows were the group: a list of reduced rows came back."""
    with pytest.raises(TypeError, match=rf"{call}: expected a list or tuple of tensors, got one tensor \(ndarray\)"):
        getattr(hvd, call)(np.ones((hvd.size(), 2)))
    with pytest.raises(TypeError, match=rf"{call}: expected a list or tuple of tensors, got a dict \(pass "
                                        r"list\(d.values\(\)\)\)"):
        getattr(hvd, call)({"w": np.ones(2)})  # its keys were the group: "unsupported dtype <U1"
    with pytest.raises(TypeError, match=rf"{call}: expected a list or tuple of tensors, got NoneType"):
        getattr(hvd, call)(None)  # "'NoneType' object is not iterable"


@pytest.mark.parametrize("op", [1.0, True], ids=["float", "bool"])
def test_a_reduce_op_that_is_not_an_integer_code_is_a_value_error(op):
    """1.0 went on to the engine's binding (a TypeError naming its C++ signature); True was taken for Sum."""
    with pytest.raises(ValueError, match=f"unknown reduce op {op!r}"):
        hvd.allreduce(np.ones(2), op=op)


def test_an_object_that_cannot_be_pickled_fails_on_every_rank_instead_of_leaving_the_others_waiting():
    """The rank that failed to pickle raised before its collective; its peers waited for it (as in Horovod)."""
    import pickle
    import threading

    lock, last = threading.Lock(), hvd.size() - 1
    if hvd.rank() == 0:
        with pytest.raises(TypeError, match="cannot pickle '_thread.lock' object"):
            hvd.broadcast_object(lock, root_rank=0)
    else:
        with pytest.raises(pickle.PicklingError, match=r"broadcast_object: root rank 0 could not pickle its object "
                                                       r"\(TypeError: cannot pickle '_thread.lock' object\)"):
            hvd.broadcast_object(None, root_rank=0)
    if hvd.rank() == last:
        with pytest.raises(TypeError, match="cannot pickle"):
            hvd.allgather_object(lock)
    else:
        with pytest.raises(pickle.PicklingError, match=rf"allgather_object: ranks could not pickle their objects "
                                                       rf"\(rank {last}: TypeError: cannot pickle"):
            hvd.allgather_object(hvd.rank())
    assert hvd.broadcast_object("still works", root_rank=last) == "still works"
    assert hvd.allgather_object(hvd.rank()) == list(range(hvd.size()))


# Each rank's lengths of a grouped op's list: every rank differs from rank 0 (an empty list on rank 1).
@pytest.mark.parametrize("sizes", [lambda r: 3 if r == 0 else 2, lambda r: 0 if r == 1 else 2],
                         ids=["longer-on-rank-0", "empty-on-rank-1"])
@pytest.mark.parametrize("name", [None, "grp.len"], ids=["unnamed", "named"])
@pytest.mark.parametrize("call", ["grouped_allreduce", "grouped_allreduce_", "grouped_allgather",
                                  "grouped_reducescatter"])
def test_a_grouped_op_whose_list_lengths_differ_fails_on_every_rank_and_leaves_the_ranks_in_step(sizes, name, call):
    xs = [np.ones(4, np.float32) for _ in range(sizes(hvd.rank()))]
    with pytest.raises(hvd.TensorMismatchError, match="mismatched groups: a group of .* on rank 0, .* on rank 1"):
        getattr(hvd, call)(xs, name=name)
    # Nothing of the failed calls waits on: the same names and the next numbers run alike on every rank.
    out = getattr(hvd, call)([np.ones(4, np.float32)] * 2, name=name)
    assert len(out) == 2
    still_works()


def test_a_grouped_op_with_an_empty_list_on_every_rank_returns_an_empty_list():
    assert hvd.grouped_allreduce([]) == []
    assert hvd.grouped_allgather_async([], name="grp.none").wait() == []
    assert hvd.grouped_reducescatter([]) == []
    still_works()


@pytest.mark.parametrize("call", ["grouped_allreduce", "grouped_allreduce_async_", "grouped_allgather",
                                  "grouped_reducescatter_async"])
@pytest.mark.parametrize("name", [None, "grp.one"], ids=["unnamed", "named"])
def test_a_grouped_op_given_no_list_on_one_rank_fails_on_every_rank(call, name):
    """The rank that passed one array raises its TypeError; the others were left waiting for its group."""
    xs = [np.ones(4, np.float32), np.ones(4, np.float32)]
    if hvd.rank() == 1:
        with pytest.raises(TypeError, match="expected a list or tuple of tensors, got one tensor"):
            getattr(hvd, call)(xs[0], name=name)
    else:
        with pytest.raises(hvd.PeerArgumentError, match="rank 1 could not start it: .*expected a list or tuple"):
            result = getattr(hvd, call)(xs, name=name)
            if call.endswith(("_async", "_async_")):
                result.wait()
    still_works()
