"""Error paths of jupyter_hvd.mxnet: every rank raises MXNetError (of the core's class too where a collective
failed), nobody hangs, and the engine keeps working."""
import mxnet as mx
import numpy as np
import pytest
from mxnet.base import MXNetError

import jupyter_hvd.mxnet as hvd

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:mxnet.*")

MIN_RANKS = 2  # the tests make the ranks disagree


def read_fails(t: mx.nd.NDArray, match: str, error: type = hvd.TensorMismatchError):
    """Reading ``t`` raises the collective's error (MXNet raises an operation's error once): an MXNetError that is
    also the core's ``error``."""
    with pytest.raises(MXNetError, match=match) as raised:
        t.asnumpy()
    assert isinstance(raised.value, error), type(raised.value).__mro__


def engine_still_works():
    t = mx.nd.ones((3,))
    hvd.allreduce_(t, op=hvd.Sum, name="still.works")
    np.testing.assert_array_equal(t.asnumpy(), np.full(3, hvd.size(), np.float32))


def test_shape_mismatch_async_and_grouped():
    bad = hvd.allreduce(mx.nd.ones((3 + hvd.rank(),)), name="err.shape")
    read_fails(bad, "mismatched shapes")
    good, odd = mx.nd.ones((2,)), mx.nd.ones((2, 1 + hvd.rank()))
    hvd.grouped_allreduce_([good, odd], name="err.group")
    read_fails(good, "mismatched shapes")  # one MXNet operation: its error surfaces on the first read
    engine_still_works()


def test_dtype_mismatch():
    dtype = np.float32 if hvd.rank() == 0 else np.float64
    t = mx.nd.ones((4,), dtype=dtype)
    hvd.allreduce_(t, name="err.dtype")
    read_fails(t, "dtype")
    got = hvd.broadcast(mx.nd.ones((2,), dtype=dtype), root_rank=0, name="err.bcast.dtype")
    read_fails(got, "dtype")
    engine_still_works()


def test_root_mismatch_and_bad_root():
    t = hvd.broadcast(mx.nd.ones((2,)), root_rank=hvd.rank() % 2, name="err.root")
    read_fails(t, "root")
    with pytest.raises(MXNetError, match="root"):
        hvd.broadcast_(mx.nd.ones((2,)), root_rank=hvd.size())
    with pytest.raises(MXNetError, match="root"):
        hvd.broadcast(mx.nd.ones((2,)), root_rank=-1)
    engine_still_works()


def test_sync_op_errors():
    with pytest.raises(MXNetError, match="splits"):
        hvd.alltoall(mx.nd.ones((3, 2)), splits=[1] * (hvd.size() + 1))
    with pytest.raises(MXNetError, match="splits"):
        hvd.alltoall(mx.nd.ones((3, 2)), splits=[4] + [0] * (hvd.size() - 1))
    with pytest.raises(MXNetError, match="divisible"):
        hvd.alltoall(mx.nd.ones((hvd.size() + 1, 2)))
    with pytest.raises(hvd.TensorMismatchError, match="^allgather of tensor 'allgather.err.allgather': .*shape") as e:
        hvd.allgather(mx.nd.ones((2, 1 + hvd.rank())), name="err.allgather")
    assert isinstance(e.value, MXNetError) and str(e.value) == str(e.value.__cause__)
    with pytest.raises(MXNetError):
        hvd.reducescatter(mx.nd.ones((4, 2)), op=hvd.Max)
    with pytest.raises(MXNetError, match="shape"):
        hvd.reducescatter(mx.nd.ones((4, 1 + hvd.rank())), name="err.rs")
    engine_still_works()


def test_process_set_membership():
    only_zero = hvd.add_process_set([0])
    try:
        if hvd.rank() == 0:
            t = mx.nd.full((2,), 5.0)
            hvd.allreduce_(t, op=hvd.Sum, process_set=only_zero)
            np.testing.assert_array_equal(t.asnumpy(), [5.0, 5.0])
        else:
            with pytest.raises(MXNetError, match="not a member"):
                hvd.allreduce_(mx.nd.ones((2,)), process_set=only_zero)
    finally:
        hvd.remove_process_set(only_zero)
    engine_still_works()


def test_a_torch_tensor_names_the_api_for_it():
    """As in a job whose ranks started with MXNet's API, given a cell written for torch."""
    torch = pytest.importorskip("torch")
    with pytest.raises(TypeError, match=r"got Tensor; for torch tensors use jupyter_hvd.torch \(in a notebook: "
                                        r"%%hvd -np N --framework torch\)"):
        hvd.allreduce(torch.ones(2))


def test_a_trainer_over_a_communicator_set_init_never_registered_is_refused():
    """Horovod's fails comparing its size(), None, with 1."""
    from mpi4py import MPI

    unregistered = hvd.ProcessSet(MPI.COMM_WORLD)
    with pytest.raises(ValueError, match=r"DistributedOptimizer: .* was made from an MPI communicator"):
        hvd.DistributedOptimizer(mx.optimizer.SGD(), process_set=unregistered)
    net = mx.gluon.nn.Dense(2, in_units=2)
    net.initialize()
    with pytest.raises(ValueError, match=r"DistributedTrainer: .* pass it to hvd.init\(\) first"):
        hvd.DistributedTrainer(net.collect_params(), "sgd", process_set=unregistered)


def test_bad_arguments_are_local_python_errors():
    with pytest.raises(TypeError, match=r"NDArray, got ndarray; wrap it with mx.nd.array\(...\); for numpy arrays use "
                                        r"jupyter_hvd \(in a notebook: %%hvd -np N --framework none\)"):
        hvd.broadcast_(np.ones(2), root_rank=0)
    with pytest.raises(TypeError, match="NDArray, got list$"):
        hvd.allreduce([1.0, 2.0])
    with pytest.raises(TypeError, match="sparse"):
        hvd.allreduce_(mx.nd.ones((4, 2)).tostype("row_sparse"))


def test_errors_are_raised_once_then_waitall_is_clean():
    """MXNet raises a failed operation's error once; every error above was read, so nothing is left over."""
    mx.nd.waitall()
    engine_still_works()


@pytest.mark.parametrize("call", ["grouped_allreduce", "grouped_allreduce_", "grouped_allgather",
                                  "grouped_reducescatter"])
def test_a_grouped_op_given_one_ndarray_says_so(call):
    """Its rows were the group, or MXNet's "truth value of an NDArray" error was raised."""
    with pytest.raises(TypeError, match=rf"{call}: expected a list or tuple of tensors, got one tensor \(NDArray\)"):
        getattr(hvd, call)(mx.nd.ones((hvd.size(), 2)))


@pytest.mark.parametrize("factor", ["2", None], ids=["str", "None"])
def test_a_scale_factor_that_is_not_a_number_is_refused_as_in_the_other_apis(factor):
    """float() took the string '2' for 2.0, where jupyter_hvd and jupyter_hvd.torch refuse it."""
    with pytest.raises(TypeError, match=f"allreduce: prescale_factor must be a number, got {factor!r}"):
        hvd.allreduce(mx.nd.ones(2), prescale_factor=factor)
    assert hvd.allreduce(mx.nd.ones(2), op=hvd.Sum, postscale_factor=np.float32(0.5)).asnumpy().tolist() == \
        [hvd.size() / 2] * 2


def test_broadcast_parameters_of_models_with_other_layers_fails_on_every_rank_saying_which():
    """Each rank waited for ever for the broadcasts of the names the others lack, as in Horovod."""
    params = {"a": mx.nd.ones((2,)), **({"extra": mx.nd.ones((1,))} if hvd.rank() == 1 else {})}
    with pytest.raises(hvd.TensorMismatchError, match="broadcast_parameters: the ranks hold different tensors, so "
                       "none was broadcast: rank 1 has 'extra', which rank 0 has not") as e:
        hvd.broadcast_parameters(params, root_rank=0)
    assert isinstance(e.value, MXNetError)
    same = {"a": mx.nd.full((2,), hvd.rank())}
    hvd.broadcast_parameters(same, root_rank=1)
    np.testing.assert_array_equal(same["a"].asnumpy(), [1, 1])


def test_broadcast_parameters_names_a_value_that_is_not_an_ndarray():
    """It failed with "'float' object has no attribute 'wait_to_read'", after broadcasting what came before it."""
    with pytest.raises(TypeError, match="broadcast_parameters: 'lr' is a float, not an NDArray or Parameter"):
        hvd.broadcast_parameters({"a": mx.nd.ones(2), "lr": 0.1}, root_rank=0)


REFUSED = {  # what the last rank alone calls wrongly, what the others call, and the last rank's own error
    "allreduce_ of an array": (lambda: hvd.allreduce_(np.ones(2), name="refused.w"),
                               lambda: hvd.allreduce_(mx.nd.ones((2,)), name="refused.w").asnumpy(),
                               TypeError, "allreduce: expected an mxnet NDArray, got ndarray"),
    "grouped_allreduce with a str": (lambda: hvd.grouped_allreduce([mx.nd.ones((1,)), "a"]),
                                     lambda: [t.asnumpy() for t in hvd.grouped_allreduce([mx.nd.ones((1,))] * 2)],
                                     TypeError, "grouped_allreduce: expected an mxnet NDArray, got str"),
    "broadcast from outside the set": (lambda: hvd.broadcast(mx.nd.ones((2,)), root_rank=hvd.size()),
                                       lambda: hvd.broadcast(mx.nd.ones((2,)), root_rank=0).asnumpy(),
                                       MXNetError, "broadcast: root_rank .* is not a rank of"),
    "allreduce_ by an unknown op": (lambda: hvd.allreduce_(mx.nd.ones((2,)), op=99, name="refused.op"),
                                    lambda: hvd.allreduce_(mx.nd.ones((2,)), name="refused.op").asnumpy(),
                                    ValueError, "unknown reduce op 99"),
    "grouped_allreduce by Adasum": (lambda: hvd.grouped_allreduce([mx.nd.ones((1,)), mx.nd.ones((2,))], op=hvd.Adasum),
                                    lambda: [t.asnumpy() for t in hvd.grouped_allreduce([mx.nd.ones((1,)),
                                                                                         mx.nd.ones((2,))])],
                                    NotImplementedError, "Adasum is not supported"),
    "reducescatter scaled by a str": (lambda: hvd.reducescatter(mx.nd.ones((hvd.size(),)), prescale_factor="2"),
                                      lambda: hvd.reducescatter(mx.nd.ones((hvd.size(),))).asnumpy(),
                                      TypeError, "reducescatter: prescale_factor must be a number, got '2'"),
    "broadcast_parameters of a list": (lambda: hvd.broadcast_parameters([mx.nd.ones((2,))], root_rank=0),
                                       lambda: hvd.broadcast_parameters({"a": mx.nd.ones((2,))}, root_rank=0),
                                       ValueError, "invalid params of type"),
    "alltoall of a list": (lambda: hvd.alltoall([1.0] * hvd.size()),
                           lambda: hvd.alltoall(mx.nd.ones((hvd.size(),))),
                           TypeError, "alltoall: expected an mxnet NDArray, got list"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_bad_argument_on_one_rank_fails_the_op_on_every_rank(case):
    """Not a hang: the last rank's call tells the others, whose op of that name fails saying why; the numbering
    of unnamed ops stays in step afterwards."""
    bad, good, error, message = REFUSED[case]
    last = hvd.size() - 1
    if hvd.rank() == last:
        with pytest.raises(error, match=message):
            bad()
    else:
        with pytest.raises(hvd.PeerArgumentError, match=f"rank {last} could not start it: {message}") as e:
            good()
        assert isinstance(e.value, MXNetError)
    for k in (1, 2):
        np.testing.assert_array_equal(hvd.allreduce(mx.nd.full((1,), k), op=hvd.Sum).asnumpy(), [k * hvd.size()])
    engine_still_works()


def test_an_abort_fails_pending_ops_with_its_origin_and_reason():
    """A pending in-place allreduce, read after the last rank aborts, raises EngineAbortedError (an MXNetError)
    with the origin rank and reason the other APIs give; so does the next op; re-init recovers."""
    pending = mx.nd.ones((2,))
    hvd.allreduce_(pending, name=f"never.matched.{hvd.rank()}")
    hvd.barrier()
    last = hvd.size() - 1
    if hvd.rank() == last:
        hvd.abort("rank raised ZeroDivisionError")
    with pytest.raises(hvd.EngineAbortedError, match="^engine aborted by rank .*: rank raised ZeroDivisionError$") as e:
        pending.asnumpy()
    assert isinstance(e.value, MXNetError)
    assert (e.value.origin_rank, e.value.reason) == (last, "rank raised ZeroDivisionError")
    with pytest.raises(hvd.EngineAbortedError, match="ZeroDivisionError"):
        hvd.broadcast(mx.nd.ones((2,)), root_rank=0, name="after.abort").asnumpy()
    hvd.shutdown()
    hvd.init()
    engine_still_works()


def test_a_grouped_op_whose_list_lengths_differ_fails_on_every_rank_and_leaves_the_ranks_in_step():
    for n in (3 - (hvd.rank() == 1), 0 if hvd.rank() == 1 else 2):
        ts = [mx.nd.ones((4,)) for _ in range(n)]
        if n:
            hvd.grouped_allreduce_(ts)
            read_fails(ts[0], "mismatched groups")
        else:  # an empty group's call waits for the others' at once
            with pytest.raises(MXNetError, match="mismatched groups") as raised:
                hvd.grouped_allreduce_(ts)
            assert isinstance(raised.value, hvd.TensorMismatchError)
    with pytest.raises(MXNetError, match="mismatched groups"):
        hvd.grouped_allgather([mx.nd.ones((2,)) for _ in range(1 + hvd.rank())])
    ts = hvd.grouped_allreduce([mx.nd.ones((4,)), mx.nd.ones((4,))], op=hvd.Sum)
    np.testing.assert_array_equal(ts[1].asnumpy(), np.full(4, hvd.size(), np.float32))
    assert hvd.grouped_allreduce([]) == []
    engine_still_works()


def test_a_grouped_op_given_no_list_on_one_rank_fails_on_every_rank():
    if hvd.rank() == 1:
        with pytest.raises(TypeError, match="expected a list or tuple of tensors, got one tensor"):
            hvd.grouped_allreduce_(mx.nd.ones((4,)))
    else:
        ts = [mx.nd.ones((4,)), mx.nd.ones((4,))]
        hvd.grouped_allreduce_(ts)
        read_fails(ts[0], "rank 1 could not start it", hvd.PeerArgumentError)
    engine_still_works()


TRAINERS_APART = {  # the last rank's arguments where the others take the defaults, and what every rank raises
    "predivide": ({"gradient_predivide_factor": 2}, "different gradient_predivide_factor: 1.0 on rank 0, .*2.0 on "
                                                    "rank {last} .make it alike, and several in the same order"),
    "groups": ({"num_groups": 1}, "different num_groups: 0 on rank 0, .*1 on rank {last}"),
    "prefix": ({"prefix": "b."}, "different prefix: '' on rank 0, .*'b.' on rank {last}"),
    "compression": ({"compression": hvd.Compression.fp16},
                    "different compression: 'NoneCompressor' on rank 0, .*'FP16Compressor' on rank {last}"),
}
REFUSED_TRAINERS = {  # the last rank's bad arguments, its own error, and its message (the others name it)
    "a predivide factor that is no number": ({"gradient_predivide_factor": "2"}, TypeError,
                                             "gradient_predivide_factor must be a number, got '2'"),
    "a predivide factor of 0": ({"gradient_predivide_factor": 0.0}, ValueError,
                                "gradient_predivide_factor must be finite and not 0, got 0.0"),
    "a negative num_groups": ({"num_groups": -1}, ValueError, "num_groups must be an int >= 0, got -1"),
    "an unknown optimizer": ({"optimizer": "nosuch"}, ValueError, "Cannot find optimizer nosuch"),
}


def trains_alike(trainer: mx.gluon.Trainer, net: mx.gluon.Block):
    """One step of ``trainer`` from rank-dependent data leaves every rank's parameters alike."""
    with mx.autograd.record():
        loss = net(mx.nd.full((1, 2), hvd.rank())).sum()
    loss.backward()
    trainer.step(1)
    for p in net.collect_params().values():
        mine = p.data().asnumpy()
        np.testing.assert_array_equal(hvd.allreduce(p.data(), op=hvd.Max, name=f"alike.{p.name}").asnumpy(), mine)


@pytest.mark.parametrize("case", list(TRAINERS_APART) + list(REFUSED_TRAINERS))
def test_a_trainer_made_otherwise_on_one_rank_fails_on_every_rank_when_made(case):
    """It raised on that rank only, or on none, and the ranks then waited for each other's allreduces at the first
    step (different names), or averaged wrongly without a word (predivide), as in Horovod."""
    net = mx.gluon.nn.Dense(2, in_units=2)
    net.initialize()
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)
    last = hvd.size() - 1
    if case in TRAINERS_APART:
        (kwargs, message), error = TRAINERS_APART[case], ValueError
    else:
        kwargs, error, message = REFUSED_TRAINERS[case]
        if hvd.rank() != last:
            error, message = hvd.PeerArgumentError, f"DistributedTrainer: rank {last} could not make it: .*{message}"
    mine = {"optimizer": "sgd", **(kwargs if hvd.rank() == last else {})}
    with pytest.raises(error, match=message.format(last=last)) as raised:
        hvd.DistributedTrainer(net.collect_params(), **mine)
    assert isinstance(raised.value, MXNetError) == (error is hvd.PeerArgumentError)
    trains_alike(hvd.DistributedTrainer(net.collect_params(), "sgd"), net)


def test_a_trainer_over_parameters_frozen_on_one_rank_only_fails_on_every_rank_when_made():
    net = mx.gluon.nn.Dense(2, in_units=2)
    net.initialize()
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)
    if hvd.rank() == hvd.size() - 1:
        net.bias.grad_req = "null"
    with pytest.raises(ValueError, match=f"the ranks train different parameters: ranks 0 and {hvd.size() - 1} differ "
                                         f"in {net.bias.name} .give every rank the same parameters, with "
                                         "grad_req 'null' on the same ones, before making it"):
        hvd.DistributedTrainer(net.collect_params(), "sgd")
    net.bias.grad_req = "write"
    trains_alike(hvd.DistributedTrainer(net.collect_params(), "sgd"), net)


def test_a_trainer_over_a_layer_one_rank_has_more_names_it_on_every_rank():
    """The positions that differ (gluon.Trainer's, in the order of the names) are named by a rank that has them."""
    net = mx.gluon.nn.HybridSequential(prefix="more_")
    net.add(*(mx.gluon.nn.Dense(2, in_units=2, prefix=f"more{k}_") for k in range(2 + (hvd.rank() == 1))))
    net.initialize()
    last = hvd.broadcast_object(sorted(net.collect_params().keys())[-2:], root_rank=1, name="last.names")
    with pytest.raises(ValueError, match=f"the ranks train different parameters: ranks 0 and 1 differ in "
                                         f"{last[0]}, {last[1]} "):
        hvd.DistributedTrainer(net.collect_params(), "sgd")


def test_trainers_made_in_another_order_on_one_rank_fail_on_every_rank_saying_so():
    """Horovod takes them in any order (its allreduces are named by prefix); here their check when made is a
    blocking collective, which would wait for ever for the other's: they meet, and say how they differ."""
    nets = [mx.gluon.nn.Dense(2 + i, in_units=2, prefix=f"any_order{i}_") for i in range(2)]
    for net in nets:
        net.initialize()
    order = [1, 0] if hvd.rank() == hvd.size() - 1 else [0, 1]
    with pytest.raises(ValueError, match=r"different prefix: 'net0.' on rank 0, .*'net1.' on rank "
                                         r"\d .make it alike, and several in the same order, on every rank"):
        hvd.DistributedTrainer(nets[order[0]].collect_params(), "sgd", prefix=f"net{order[0]}.")


@pytest.mark.parametrize("kwargs, refused, error, message", [
    ({"num_groups": 2}, False, ValueError, "DistributedOptimizer: the ranks made it with different num_groups: 0 on "
                                           "rank 0"),
    ({"gradient_predivide_factor": float("inf")}, True, ValueError, "must be finite and not 0, got inf"),
    ({"optimizer": "sgd"}, True, TypeError, "expected an mxnet.optimizer.Optimizer, got str"),
])
def test_an_optimizer_made_otherwise_on_one_rank_fails_on_every_rank_when_made(kwargs, refused, error, message):
    """``refused``: the last rank's arguments fail there, and the others name its error."""
    last = hvd.size() - 1
    if refused and hvd.rank() != last:
        error, message = hvd.PeerArgumentError, f"DistributedOptimizer: rank {last} could not make it: .*{message}"
    mine = {"optimizer": mx.optimizer.SGD(learning_rate=0.1), **(kwargs if hvd.rank() == last else {})}
    with pytest.raises(error, match=message) as raised:
        hvd.DistributedOptimizer(**mine)
    assert isinstance(raised.value, MXNetError) == (error is hvd.PeerArgumentError)
    net = mx.gluon.nn.Dense(2, in_units=2)
    net.initialize()
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)
    optimizer = hvd.DistributedOptimizer(mx.optimizer.SGD())
    trains_alike(mx.gluon.Trainer(net.collect_params(), optimizer, kvstore=None), net)
