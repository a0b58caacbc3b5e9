"""A call that fails one rank's own checks (a bad argument there only) fails on every rank, saying why, instead
of leaving the others waiting; the ranks' numbering of unnamed ops stays in step, and a name can be used again
at once."""
import numpy as np
import pytest

import jupyter_hvd as hvd

OBJECTS = np.array(["a"], dtype=object)


def bad_rank() -> int:
    return hvd.size() - 1


def ones(*shape):
    return np.ones(shape, np.float32)


# Each case: (what the bad rank calls, what the others call, the bad rank's own error and its message). The
# first three and the scale factors fail in _C.submit (a Python error from its dtype rule, a C++ one from its
# reduction check), the others in Python's checks before it (an op's, in the API function the user called).
CASES = {
    "unsupported dtype": (lambda name: hvd.allreduce(OBJECTS, name=name),
                          lambda name: hvd.allreduce(ones(3), name=name),
                          TypeError, "allreduce: unsupported dtype object"),
    "one of a group": (lambda name: hvd.grouped_allreduce([ones(2), OBJECTS], name=name),
                       lambda name: hvd.grouped_allreduce([ones(2), ones(1)], name=name),
                       TypeError, "grouped_allreduce: unsupported dtype object"),
    "bool scaled": (lambda name: hvd.allreduce(np.ones(2, bool), op=hvd.Sum, prescale_factor=2.0, name=name),
                    lambda name: hvd.allreduce(np.ones(2, bool), op=hvd.Sum, name=name),
                    TypeError, "allreduce: prescale_factor/postscale_factor cannot scale bool"),
    "read-only in place": (lambda name: hvd.allreduce_(np.broadcast_to(ones(1), (3,)), name=name),
                           lambda name: hvd.allreduce_(ones(3), name=name),
                           ValueError, "allreduce_: a tensor written in place must be C-contiguous and writable"),
    "not an array": (lambda name: hvd.allreduce(None, name=name),
                     lambda name: hvd.allreduce(ones(3), name=name),
                     TypeError, "allreduce: expected a numpy array or a DLPack tensor, got NoneType"),
    "out of another shape": (lambda name: hvd.allreduce(ones(3), name=name, out=ones(2)),
                             lambda name: hvd.allreduce(ones(3), name=name, out=ones(3)),
                             ValueError, r"allreduce: out= must be a float32 array of shape \(3,\)"),
    "root not in the set": (lambda name: hvd.broadcast(ones(2), root_rank=hvd.size(), name=name),
                            lambda name: hvd.broadcast(ones(2), root_rank=0, name=name),
                            ValueError, "broadcast: root_rank .* is not a rank of"),
    "broadcast_object from outside the set": (lambda name: hvd.broadcast_object("x", hvd.size(), name=name),
                                              lambda name: hvd.broadcast_object("x", 0, name=name),
                                              ValueError, "broadcast_object: root_rank .* is not a rank of"),
    "splits that do not add up": (lambda name: hvd.alltoall(ones(hvd.size(), 1), splits=[0] * hvd.size(), name=name),
                                  lambda name: hvd.alltoall(ones(hvd.size(), 1), name=name),
                                  ValueError, "alltoall: splits .* must be"),
    "a scalar to gather": (lambda name: hvd.allgather(np.float32(1), name=name),
                           lambda name: hvd.allgather(ones(1, 2), name=name),
                           ValueError, "allgather: the tensor needs at least one dimension"),
    "a scale factor that is no number": (lambda name: hvd.allreduce(ones(2), prescale_factor="2", name=name),
                                         lambda name: hvd.allreduce(ones(2), prescale_factor=2, name=name),
                                         TypeError, "allreduce: prescale_factor must be a number, got '2'"),
    "reducescatter scaled by None": (lambda name: hvd.reducescatter(ones(hvd.size()), postscale_factor=None, name=name),
                                     lambda name: hvd.reducescatter(ones(hvd.size()), name=name),
                                     TypeError, "reducescatter: postscale_factor must be a number, got None"),
    "an unknown op": (lambda name: hvd.allreduce(ones(2), op=99, name=name),
                      lambda name: hvd.allreduce(ones(2), op=hvd.Sum, name=name),
                      ValueError, "unknown reduce op 99"),
    "a group by Adasum": (lambda name: hvd.grouped_allreduce_async_([ones(2), ones(1)], op=hvd.Adasum, name=name),
                          lambda name: hvd.grouped_allreduce_async_([ones(2), ones(1)], name=name).wait(),
                          NotImplementedError, "Adasum is not supported"),
    "reducescatter by Max": (lambda name: hvd.reducescatter(ones(hvd.size()), op=hvd.Max, name=name),
                             lambda name: hvd.reducescatter(ones(hvd.size()), name=name),
                             ValueError, "reducescatter supports op=hvd.Sum or hvd.Average"),
}


def numbering_in_step():
    """Unnamed allreduces pair by their numbers: were one rank's count one ahead, the k-th would meet the k+1-th."""
    for k in (1, 2, 3):
        np.testing.assert_array_equal(hvd.allreduce(np.full(2, k, np.int64), op=hvd.Sum), np.full(2, k * hvd.size()))


@pytest.mark.parametrize("named", [True, False], ids=["named", "unnamed"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_argument_on_one_rank_fails_the_op_on_every_rank_saying_why(case, named):
    bad_call, good_call, error, message = CASES[case]
    name = f"refused.{case}" if named else None
    if hvd.rank() == bad_rank():
        with pytest.raises(error, match=message):
            bad_call(name)
    else:
        with pytest.raises(hvd.PeerArgumentError, match=f"rank {bad_rank()} could not start it: {message}") as e:
            good_call(name)
        assert isinstance(e.value, hvd.TensorMismatchError)  # what code written for Horovod's errors catches
        if named:
            assert f"'{name}" in str(e.value)
    numbering_in_step()


def test_an_async_call_refused_on_one_rank_fails_the_others_handles():
    if hvd.rank() == bad_rank():
        with pytest.raises(TypeError, match="unsupported dtype object"):
            hvd.allreduce_async(OBJECTS)
    else:
        handle = hvd.allreduce_async(ones(4))
        with pytest.raises(hvd.PeerArgumentError, match="could not start it: allreduce: unsupported dtype object"):
            hvd.synchronize(handle)
    numbering_in_step()


def test_the_same_mistake_on_every_rank_leaves_the_name_free_at_once():
    """Each rank raises its own error, and the name can be used again straight away: the refusal of it
    (which every rank sends here) has met the others' before the call returns."""
    for i in range(20):
        with pytest.raises(TypeError, match="unsupported dtype object"):
            hvd.allreduce(OBJECTS, name="again")
        np.testing.assert_array_equal(hvd.allreduce(np.full(1, i, np.int64), name="again", op=hvd.Sum),
                                      np.full(1, i * hvd.size()))
    numbering_in_step()


def test_a_refusal_in_a_process_set_reaches_its_members_only():
    if hvd.size() < 3:
        pytest.skip("needs a set that leaves a rank out")
    members = [0, bad_rank()]
    subset = hvd.add_process_set(members)
    try:
        if hvd.rank() == bad_rank():
            with pytest.raises(TypeError, match="unsupported dtype object"):
                hvd.allreduce(OBJECTS, process_set=subset)
        elif hvd.rank() == 0:
            with pytest.raises(hvd.PeerArgumentError, match=f"rank {bad_rank()} could not start it"):
                hvd.allreduce(ones(2), process_set=subset)
        numbering_in_step()
    finally:
        hvd.remove_process_set(subset)
