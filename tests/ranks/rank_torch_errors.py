"""Bad input to jupyter_hvd.torch: a clear exception on every rank, never a hang."""
import numpy as np
import pytest
import torch

import jupyter_hvd.torch as hvd

MIN_RANKS = 2  # the tests make the ranks disagree


def test_unsupported_dtype_non_tensor_and_layout():
    with pytest.raises(TypeError, match="unsupported dtype torch.complex64"):
        hvd.allreduce(torch.ones(2, dtype=torch.complex64))
    with pytest.raises(TypeError, match="expected a torch.Tensor, got list$"):
        hvd.allreduce([1.0, 2.0])
    with pytest.raises(TypeError, match=r"got ndarray; for numpy arrays use jupyter_hvd \(in a notebook: %%hvd "
                                        r"-np N --framework none\)"):
        hvd.allreduce(np.ones(2))
    with pytest.raises(ValueError, match="contiguous"):
        hvd.allreduce_(torch.ones(4, 4).t())
    strided = torch.arange(8.0).reshape(2, 4).t()  # only read: a contiguous copy serves
    assert torch.equal(hvd.allreduce(strided, op=hvd.Max), strided)
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.allreduce(torch.ones(2), op=hvd.Adasum)
    with pytest.raises(TypeError, match="cannot scale bool"):
        hvd.allreduce(torch.ones(2, dtype=torch.bool), op=hvd.Sum, prescale_factor=2.0)
    scaled = hvd.allreduce(torch.full((2,), 3, dtype=torch.int32), op=hvd.Sum, prescale_factor=0.5)
    assert torch.equal(scaled, torch.full((2,), hvd.size(), dtype=torch.int32))  # as Horovod: 1.5 -> 1 per rank


@pytest.mark.parametrize("name", [1, b"w", object()], ids=["int", "bytes", "object"])
def test_a_name_that_is_not_a_string_is_refused_before_the_ranks_could_disagree_on_it(name):
    """str() of it was sent: an object's repr differs between the ranks, and each waited for the other's op."""
    with pytest.raises(ValueError, match="allreduce: name must be a string, got "):
        hvd.allreduce(torch.ones(2), name=name)
    with pytest.raises(ValueError, match="broadcast: name must be a string, got "):
        hvd.broadcast_(torch.ones(2), root_rank=0, name=name)


@pytest.mark.parametrize("op", [1.0, True, "sum"], ids=["float", "bool", "str"])
def test_a_reduce_op_that_is_not_an_integer_code_is_refused(op):
    with pytest.raises(ValueError, match=f"unknown reduce op {op!r}; use hvd.Average, hvd.Sum"):
        hvd.allreduce(torch.ones(2), op=op)
    assert torch.equal(hvd.allreduce(torch.ones(2), op=np.int64(hvd.Sum)), torch.full((2,), float(hvd.size())))


@pytest.mark.parametrize("call", ["grouped_allreduce", "grouped_allreduce_async", "grouped_allreduce_",
                                  "grouped_allreduce_async_", "grouped_allgather", "grouped_allgather_async",
                                  "grouped_reducescatter", "grouped_reducescatter_async"])
def test_a_grouped_op_given_one_tensor_says_so(call):
    """Its rows were the group (a tuple of rows came back), or torch's 'Boolean value of Tensor' was raised."""
    with pytest.raises(TypeError, match=f"{call}: expected a list or tuple of tensors, got one tensor"):
        getattr(hvd, call)(torch.ones(hvd.size(), 2))
    with pytest.raises(TypeError, match=rf"{call}: expected a list or tuple of tensors, got a dict \(pass "
                                        r"list\(d.values\(\)\)\)"):
        getattr(hvd, call)({"w": torch.ones(2)})  # its keys (strings) were the group


def test_broadcast_parameters_of_models_with_other_layers_fails_on_every_rank_saying_which():
    """A layer added on one rank (a notebook cell that ran there only): each rank waited for ever for the
    broadcasts of the names the others lack, as in Horovod."""
    def model(extra: bool):
        return torch.nn.Sequential(torch.nn.Linear(2, 2), *([torch.nn.Linear(2, 2)] if extra else []))
    apart = "broadcast_parameters: the ranks hold different tensors, so none was broadcast: "
    with pytest.raises(hvd.TensorMismatchError,
                       match=apart + "rank 1 has '1.bias' and '1.weight', which rank 0 has not"):
        hvd.broadcast_parameters(model(hvd.rank() == 1).state_dict(), root_rank=0)
    with pytest.raises(hvd.TensorMismatchError, match=apart + "rank 0 lacks '1.bias' and '1.weight'"):
        hvd.broadcast_parameters(model(hvd.rank() == 1).state_dict(), root_rank=1)
    with pytest.raises(hvd.TensorMismatchError, match=apart + "rank 1 has 4 tensors where rank 0 has 2"):
        hvd.broadcast_parameters(list(model(hvd.rank() == 1).parameters()), root_rank=0)
    with pytest.raises(hvd.TensorMismatchError, match=apart + "rank 1 has 'b', which rank 0 has not; rank 1 lacks 'a'"):
        hvd.broadcast_parameters({"b" if hvd.rank() == 1 else "a": torch.ones(2)}, root_rank=0)
    with pytest.raises(hvd.TensorMismatchError, match=apart + "rank 1 has 2 unnamed tensors, which rank 0 has not; "
                                                              "rank 1 lacks '0.bias' and '0.weight'"):
        hvd.broadcast_parameters(list(model(False).parameters()) if hvd.rank() == 1 else model(False).state_dict(), 0)
    same = model(False)
    pairs = list(same.named_parameters())
    hvd.broadcast_parameters(pairs[::-1] if hvd.rank() == 1 else pairs, root_rank=0)  # matched by name, any order
    hvd.broadcast_parameters(same.state_dict(), root_rank=1)
    assert torch.equal(hvd.allreduce(same[0].weight.detach(), op=hvd.Max), same[0].weight.detach())


def test_broadcast_parameters_names_a_value_that_is_not_a_tensor():
    with pytest.raises(TypeError, match="broadcast_parameters: 'lr' is a float, not a torch.Tensor"):
        hvd.broadcast_parameters({"w": torch.ones(2), "lr": 0.1}, root_rank=0)
    with pytest.raises(TypeError, match="broadcast_parameters: a value is a ndarray, not a torch.Tensor"):
        hvd.broadcast_parameters([np.ones(2)], root_rank=0)


def test_shape_mismatch_fails_on_every_rank():
    shape = (2 + hvd.rank(),)
    with pytest.raises(hvd.TensorMismatchError, match="shape"):
        hvd.allreduce(torch.ones(shape), name="mismatch")
    with pytest.raises(hvd.HorovodInternalError):  # dtypes differ: the base class Horovod users catch
        hvd.allreduce(torch.ones(2, dtype=torch.float32 if hvd.rank() else torch.float64), name="dtypes")
    assert torch.equal(hvd.allreduce(torch.ones(2), name="after"), torch.ones(2))  # the engine goes on


def test_a_root_rank_from_an_argmax_is_a_rank():
    """An integer tensor of one element is an index, as Horovod's binding takes it: broadcasting from the best rank."""
    best = torch.argmax(hvd.allgather(torch.tensor([float(hvd.rank())])))
    assert hvd.broadcast(torch.tensor([hvd.rank()]), root_rank=best).item() == hvd.size() - 1
    assert hvd.broadcast_object(f"from {hvd.rank()}", root_rank=best) == f"from {hvd.size() - 1}"
    with pytest.raises(TypeError, match="root_rank must be an int, got Tensor"):
        hvd.broadcast(torch.ones(1), root_rank=torch.tensor(0.0))


def test_bad_root_rank_and_splits():
    with pytest.raises(ValueError, match="root_rank"):
        hvd.broadcast(torch.ones(2), root_rank=hvd.size())
    with pytest.raises(ValueError, match="splits"):
        hvd.alltoall(torch.ones(3, 2), splits=[1] * (hvd.size() + 1))
    with pytest.raises(ValueError, match="divisible"):
        hvd.alltoall(torch.ones(2 * hvd.size() + 1))
    with pytest.raises(ValueError, match=r"splits must be one count per rank \(one dimension\), got shape \(1, "):
        hvd.alltoall(torch.ones(hvd.size(), 2), splits=torch.ones(1, hvd.size(), dtype=torch.int32))  # was flattened


def test_optimizer_arguments():
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="gradient_predivide_factor"):
        hvd.DistributedOptimizer(opt, model.named_parameters(), op=hvd.Sum, gradient_predivide_factor=2.0)
    with pytest.raises(ValueError, match="unique"):
        hvd.DistributedOptimizer(opt, [("w", model.weight), ("w", model.bias)])
    with pytest.raises(ValueError, match="not named"):
        hvd.DistributedOptimizer(opt, [("w", model.weight)])
    with pytest.raises(ValueError, match="groups"):
        hvd.DistributedOptimizer(opt, model.named_parameters(), groups=[[model.weight, model.weight]])
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.DistributedOptimizer(opt, model.named_parameters(), op=hvd.Adasum)
    for factor in (0, float("nan"), float("inf")):  # Horovod's: a ZeroDivisionError at the step, or NaNs
        with pytest.raises(ValueError, match="gradient_predivide_factor must be finite and not 0"):
            hvd.DistributedOptimizer(opt, model.named_parameters(), gradient_predivide_factor=factor)
    for passes in (0, -1):  # Horovod's check: such an optimizer would start no allreduce from its hooks
        with pytest.raises(ValueError, match=f"backward_passes_per_step must be an int >= 1, got {passes}"):
            hvd.DistributedOptimizer(opt, model.named_parameters(), backward_passes_per_step=passes)
    with pytest.raises(TypeError, match="DistributedOptimizer: process_set must be a ProcessSet, got list"):
        hvd.DistributedOptimizer(opt, model.named_parameters(), process_set=[0, 1])


APART = {  # the last rank's arguments where the others take the defaults, and what every rank raises
    "op": ({"op": hvd.Sum}, ValueError, "the ranks made it with different op: "),
    "passes": ({"backward_passes_per_step": 2}, ValueError,
               "different backward_passes_per_step: 1 on rank 0, .*2 on rank {last} .make it alike, and several in "
               "the same order, on every rank"),
    "compression": ({"compression": hvd.Compression.fp16}, ValueError,
                    "different compression: 'NoneCompressor' on rank 0, .*'FP16Compressor' on rank {last}"),
    "groups": ({"groups": 1}, ValueError, "different groups: None on rank 0, .*1 on rank {last}"),
}
REFUSED_WRAPS = {  # the last rank's bad arguments, its own error, and its message (the others name it)
    "an unknown op": ({"op": 99}, ValueError, "unknown reduce op 99"),
    "a predivide factor that is no number": ({"gradient_predivide_factor": "2"}, TypeError,
                                             "gradient_predivide_factor must be a number, got '2'"),
    "a parameter not named": ({"named_parameters": "weight only"}, ValueError, "not named"),
}


@pytest.mark.parametrize("case", list(APART) + list(REFUSED_WRAPS))
def test_an_optimizer_made_otherwise_on_one_rank_fails_on_every_rank_at_the_wrap(case):
    """It raised on that rank only, or on none, and the ranks then waited for each other's allreduces at the first
    step, as in Horovod."""
    model = torch.nn.Linear(2, 2)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    last = hvd.size() - 1
    kwargs, error, message = APART.get(case) or REFUSED_WRAPS[case]
    if kwargs.get("named_parameters"):
        kwargs = {"named_parameters": [("w", model.weight)]}
    mine = kwargs if hvd.rank() == last else {}
    if case in REFUSED_WRAPS and hvd.rank() != last:
        error, message = hvd.PeerArgumentError, f"DistributedOptimizer: rank {last} could not make it: .*{message}"
    with pytest.raises(error, match=message.format(last=last)):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 **{"named_parameters": model.named_parameters(), **mine})
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
    model(torch.full((1, 2), float(hvd.rank()))).sum().backward()
    opt.step()
    assert torch.equal(hvd.allreduce(model.weight.detach(), op=hvd.Max), model.weight.detach())


def test_an_optimizer_over_parameters_frozen_on_one_rank_only_fails_on_every_rank_at_the_wrap():
    model = torch.nn.Linear(2, 2)
    model.bias.requires_grad_(hvd.rank() != hvd.size() - 1)
    with pytest.raises(ValueError, match=f"the ranks train different parameters: ranks 0 and {hvd.size() - 1} "
                                         "differ in bias"):
        hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())


def test_an_optimizer_over_a_communicator_set_init_never_registered_is_refused():
    """Horovod's optimizer reads such a set's included() None as "not a member" and averages nothing."""
    from mpi4py import MPI

    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    unregistered = hvd.ProcessSet(MPI.COMM_WORLD)
    with pytest.raises(ValueError, match=r"DistributedOptimizer: ProcessSet\(.*\) was made from an MPI communicator "
                                         r"that hvd.init\(comm, process_sets=\[...\]\) has not registered"):
        hvd.DistributedOptimizer(opt, model.named_parameters(), process_set=unregistered)


def test_zero_grad_between_backward_and_step_is_an_error():
    model = torch.nn.Linear(2, 2)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
    model(torch.ones(1, 2)).sum().backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        opt.zero_grad()
    opt.step()
    opt.zero_grad()



REFUSED = {  # what the last rank alone calls wrongly, what the others call, and the last rank's own error
    "allreduce of an array": (lambda: hvd.allreduce(np.ones(2)), lambda: hvd.allreduce(torch.ones(2)),
                              TypeError, "allreduce: expected a torch.Tensor, got ndarray"),
    "allreduce_async_ of complex": (lambda: hvd.synchronize(hvd.allreduce_async_(torch.ones(2, dtype=torch.cfloat))),
                                    lambda: hvd.synchronize(hvd.allreduce_async_(torch.ones(2))),
                                    TypeError, "allreduce_: unsupported dtype torch.complex64"),
    "grouped_allgather of a list": (lambda: hvd.grouped_allgather([torch.ones(1), [1.0]]),
                                    lambda: hvd.grouped_allgather([torch.ones(1), torch.ones(1)]),
                                    TypeError, "grouped_allgather: expected a torch.Tensor, got list"),
    "broadcast_ of an array": (lambda: hvd.broadcast_(np.ones(2), root_rank=0),
                               lambda: hvd.broadcast_(torch.ones(2), root_rank=0),
                               TypeError, "broadcast_: expected a torch.Tensor, got ndarray"),
    "reducescatter scaled by a str": (lambda: hvd.reducescatter(torch.ones(hvd.size()), prescale_factor="2"),
                                      lambda: hvd.reducescatter(torch.ones(hvd.size())),
                                      TypeError, "reducescatter: prescale_factor must be a number, got '2'"),
    "allreduce_ scaled by a tensor": (lambda: hvd.allreduce_(torch.ones(2), postscale_factor=torch.ones(2)),
                                      lambda: hvd.allreduce_(torch.ones(2)),
                                      TypeError, r"allreduce_: postscale_factor must be a number, got tensor\("),
    "broadcast_parameters of an int": (lambda: hvd.broadcast_parameters(5, root_rank=0),
                                       lambda: hvd.broadcast_parameters({"w": torch.ones(2)}, root_rank=0),
                                       ValueError, "invalid params of type"),
    "allreduce by an unknown op": (lambda: hvd.allreduce(torch.ones(2), op=99), lambda: hvd.allreduce(torch.ones(2)),
                                   ValueError, "unknown reduce op 99"),
    "allreduce_ by Adasum": (lambda: hvd.allreduce_(torch.ones(2), op=hvd.Adasum, name="adasum"),
                             lambda: hvd.allreduce_(torch.ones(2), name="adasum"),
                             NotImplementedError, "Adasum is not supported"),
    "grouped_allreduce_async by an unknown op": (
        lambda: hvd.synchronize(hvd.grouped_allreduce_async([torch.ones(2), torch.ones(1)], op=-1)),
        lambda: hvd.synchronize(hvd.grouped_allreduce_async([torch.ones(2), torch.ones(1)])),
        ValueError, "unknown reduce op -1"),
    "grouped_allreduce by an unknown op": (lambda: hvd.grouped_allreduce([torch.ones(2)], name="g", op=7.0),
                                           lambda: hvd.grouped_allreduce([torch.ones(2)], name="g"),
                                           ValueError, "unknown reduce op 7.0"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_bad_argument_on_one_rank_fails_the_op_on_every_rank(case):
    """Not a hang: the last rank's call tells the others, whose op of that name (here numbered) fails saying why;
    the numbering of unnamed ops stays in step afterwards."""
    bad, good, error, message = REFUSED[case]
    last = hvd.size() - 1
    if hvd.rank() == last:
        with pytest.raises(error, match=message):
            bad()
    else:
        with pytest.raises(hvd.PeerArgumentError, match=f"rank {last} could not start it: {message}"):
            good()
    for k in (1, 2):
        assert torch.equal(hvd.allreduce(torch.full((1,), k), op=hvd.Sum), torch.full((1,), k * hvd.size()))


@pytest.mark.parametrize("call", ["grouped_allreduce", "grouped_allreduce_", "grouped_allgather",
                                  "grouped_reducescatter"])
def test_a_grouped_op_whose_list_lengths_differ_fails_on_every_rank_and_leaves_the_ranks_in_step(call):
    # One parameter's gradient missing on rank 1, say: its list is one shorter; then empty there.
    for n in (3 - (hvd.rank() == 1), 0 if hvd.rank() == 1 else 2):
        with pytest.raises(hvd.TensorMismatchError, match="mismatched groups"):
            getattr(hvd, call)([torch.ones(4) for _ in range(n)])
    assert len(getattr(hvd, call)([torch.ones(4), torch.ones(4)])) == 2
    assert len(getattr(hvd, call)([])) == 0  # empty on every rank: still one call each, which meet


def test_a_grouped_op_given_no_list_on_one_rank_fails_on_every_rank():
    for call in ("grouped_allreduce", "grouped_allgather_async", "grouped_reducescatter"):
        if hvd.rank() == 1:
            with pytest.raises(TypeError, match="expected a list or tuple of tensors, got one tensor"):
                getattr(hvd, call)(torch.ones(4))
        else:
            with pytest.raises(hvd.PeerArgumentError, match="rank 1 could not start it"):
                result = getattr(hvd, call)([torch.ones(4), torch.ones(4)])
                if call.endswith("_async"):
                    hvd.synchronize(result)
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(hvd.size())))


@pytest.mark.parametrize("case", ["another optimizer", "other parameter groups"])
def test_broadcast_optimizer_state_into_an_optimizer_that_cannot_take_it_fails_on_every_rank(case):
    """Horovod's ranks waited for each other's broadcasts of the option names they lacked; torch's load_state_dict
    gave the last rank's Adam an SGD's options (to fail at its next step), or raised there only."""
    model = torch.nn.Linear(2, 2)
    last = hvd.size() - 1
    if case == "another optimizer":
        opt = torch.optim.Adam(model.parameters()) if hvd.rank() == last else torch.optim.SGD(model.parameters(), 0.1)
        error, message = TypeError, "broadcast_optimizer_state: rank 0's optimizer is SGD and this rank's is Adam"
    else:
        groups = [{"params": [model.weight]}, {"params": [model.bias]}] if hvd.rank() == last else model.parameters()
        opt = torch.optim.SGD(groups, lr=0.1)
        error, message = ValueError, "loaded state dict has a different number of parameter groups"
    if hvd.rank() != last:
        error, message = hvd.PeerArgumentError, (f"broadcast_optimizer_state: rank {last} could not load rank 0's "
                                                 f"state: {error.__name__}: {message}")
    with pytest.raises(error, match=message):
        hvd.broadcast_optimizer_state(opt, root_rank=0)
    same = torch.optim.SGD(model.parameters(), lr=0.1 + hvd.rank())
    hvd.broadcast_optimizer_state(same, root_rank=0)
    assert same.param_groups[0]["lr"] == 0.1


def test_set_backward_passes_per_step_refuses_what_the_optimizer_would_refuse():
    model = torch.nn.Linear(2, 2)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
    with pytest.raises(ValueError, match="set_backward_passes_per_step: passes must be an int >= 1, got 0"):
        opt.set_backward_passes_per_step(0)
    with pytest.raises(TypeError, match="set_backward_passes_per_step: passes must be an int, got '2'"):
        opt.set_backward_passes_per_step("2")
    assert opt.backward_passes_per_step == 1
    opt.set_backward_passes_per_step(2)
    assert opt.backward_passes_per_step == 2
