"""jupyter_hvd.torch under torch.compile: a compiled function that calls the collectives, a compiled training step
with DistributedOptimizer, a compiled model with SyncBatchNorm. Dynamo ran this package's code on fake tensors
and failed; each collective is now a graph break that runs eagerly. The "eager" backend keeps compiling short:
what failed was Dynamo's tracing, which every backend shares."""
import copy

import pytest
import torch
import torch.nn as nn

import jupyter_hvd.torch as hvd


def every_op(x: torch.Tensor, into: torch.Tensor):
    n = hvd.size()
    handle = hvd.allreduce_async(x, op=hvd.Max, name="compiled.async")
    hvd.allreduce_(into, op=hvd.Sum, name="compiled.in_place")
    return (hvd.allreduce(x * 2, op=hvd.Sum, name="compiled.sum") + 1,
            hvd.allgather(x, name="compiled.gather"),
            hvd.broadcast(x, root_rank=n - 1, name="compiled.bcast"),
            hvd.alltoall(x.repeat(n), name="compiled.alltoall"),
            hvd.reducescatter(x.repeat(n), op=hvd.Sum, name="compiled.scatter"),
            *hvd.grouped_allreduce([x, x * 3], op=hvd.Sum, name="compiled.group"),
            hvd.synchronize(handle))


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()


@pytest.mark.skipif(not hasattr(torch.compiler, "is_compiling"), reason="torch before 2.3 cannot tell the collectives "
                    "that Dynamo traces them (README: PyTorch), and Dynamo fails on this function")
def test_a_compiled_function_of_every_collective_gives_what_eager_gives():
    compiled = torch.compile(every_op, backend="eager")
    for length in (4, 6):  # the second call recompiles with a symbolic length, where Dynamo failed
        x = torch.arange(length, dtype=torch.float32) + hvd.rank()
        into_eager, into_compiled = x.clone(), x.clone()
        want = every_op(x, into_eager)
        got = compiled(x, into_compiled)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w, rtol=0, atol=0)
        torch.testing.assert_close(into_compiled, into_eager, rtol=0, atol=0)
    hvd.barrier()


def test_the_gradient_of_a_compiled_allreduce_is_horovods():
    y = torch.ones(3, requires_grad=True)
    torch.compile(lambda t: hvd.allreduce(t * t, op=hvd.Sum, name="compiled.grad").sum(), backend="eager")(y).backward()
    torch.testing.assert_close(y.grad, torch.full((3,), 2.0 * hvd.size()))


def test_a_compiled_training_step_trains_as_the_eager_one():
    torch.manual_seed(0)
    models = [nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2)) for _ in range(2)]
    models[1].load_state_dict(copy.deepcopy(models[0].state_dict()))
    optimizers = [hvd.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1), named_parameters=[
        (f"{tag}.{n}", p) for n, p in m.named_parameters()]) for tag, m in zip(("eager", "compiled"), models)]

    def step(model, optimizer, x, y):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    compiled_step = torch.compile(step, backend="eager")
    data = torch.Generator().manual_seed(hvd.rank())
    for _ in range(3):
        x, y = torch.randn(5, 6, generator=data), torch.randn(5, 2, generator=data)
        torch.testing.assert_close(compiled_step(models[1], optimizers[1], x, y), step(models[0], optimizers[0], x, y))
    for eager_p, compiled_p in zip(models[0].parameters(), models[1].parameters()):
        torch.testing.assert_close(compiled_p, eager_p)
        gathered = hvd.allgather(compiled_p.detach().unsqueeze(0), name="compiled.params")
        assert all(torch.equal(gathered[0], g) for g in gathered)


def test_a_compiled_model_with_sync_batch_norm_normalises_over_every_rank():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(3, 4), hvd.SyncBatchNorm(4)).train()
    twin = copy.deepcopy(model)
    x = torch.randn(6, 3, generator=torch.Generator().manual_seed(hvd.rank()))
    torch.testing.assert_close(torch.compile(twin, backend="eager")(x), model(x))
    torch.testing.assert_close(twin[1].running_mean, model[1].running_mean)
