"""jupyter_hvd.torch on CUDA tensors (real GPUs): every collective against the same op on CPU tensors, ordering on
torch's current stream, DistributedOptimizer training on the GPU, and join."""
import torch
import torch.nn.functional as F

import jupyter_hvd.torch as hvd

hvd.init()  # before the conftest's session fixture: the device comes from the local rank
DEVICE = torch.device("cuda", hvd.local_rank() % torch.cuda.device_count())
torch.cuda.set_device(DEVICE)


def both(fn, *cpu_args):
    """``fn`` on CPU tensors and on the same tensors moved to the GPU; the GPU result must live there."""
    on_cpu = fn(*cpu_args)
    on_gpu = fn(*[a.to(DEVICE) if isinstance(a, torch.Tensor) else a for a in cpu_args])
    for c, g in zip(on_cpu if isinstance(on_cpu, (list, tuple)) else [on_cpu],
                    on_gpu if isinstance(on_gpu, (list, tuple)) else [on_gpu]):
        assert g.device == DEVICE and g.dtype == c.dtype and g.shape == c.shape
        torch.testing.assert_close(g.cpu(), c)


def test_every_collective_matches_the_cpu_result():
    me, n = hvd.rank(), hvd.size()
    for dtype in (torch.float32, torch.float16, torch.int64):
        x = (torch.arange(12).reshape(4, 3) + me).to(dtype)
        both(lambda t: hvd.allreduce(t, op=hvd.Sum), x)
        both(lambda t: hvd.allreduce_(t.clone(), op=hvd.Max), x)
        both(lambda t: hvd.grouped_allreduce([t, t + 1], op=hvd.Sum), x)
        both(lambda t: hvd.allgather(t), x[:me + 1])
        both(lambda t: hvd.broadcast(t, root_rank=n - 1), x)
        both(lambda t: hvd.alltoall(t), torch.arange(2 * n).to(dtype) + 10 * me)
        both(lambda t: hvd.reducescatter(t, op=hvd.Sum), torch.ones(2 * n, 3, dtype=dtype) * (me + 1))
    splits = torch.tensor([(me + j) % 2 + 1 for j in range(n)], dtype=torch.int32)
    x = torch.arange(int(splits.sum()), dtype=torch.float32) + 100 * me
    out, received = hvd.alltoall(x.to(DEVICE), splits=splits)
    want, want_received = hvd.alltoall(x, splits=splits)
    assert out.device == DEVICE and torch.equal(out.cpu(), want) and torch.equal(received, want_received)
    _, received = hvd.alltoall(x.to(DEVICE), splits=splits.to(DEVICE))  # on the splits' device, as Horovod's
    assert received.device == DEVICE and torch.equal(received.cpu(), want_received)


def test_gradients_on_the_gpu():
    x = torch.ones(3, device=DEVICE, requires_grad=True)
    hvd.allreduce(x, op=hvd.Sum).sum().backward()
    assert x.grad.device == DEVICE and torch.all(x.grad == hvd.size())


def test_ordered_on_a_non_default_stream():
    """The producer's kernels are still queued on a side stream when the op starts; the consumer queues behind it."""
    side = torch.cuda.Stream(DEVICE)
    a = torch.randn(1024, 1024, device=DEVICE)
    torch.cuda.synchronize(DEVICE)
    with torch.cuda.stream(side):
        x = a
        for _ in range(20):  # long enough that the op would read a stale value if it did not wait
            x = torch.tanh(x @ a) * 0.01
        x = x + (hvd.rank() + 1)
        got = hvd.allreduce(x, op=hvd.Sum)
        consumed = got * 2  # queued on the side stream right after the result arrived
    side.synchronize()
    want = hvd.allreduce(x.cpu(), op=hvd.Sum)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(consumed.cpu(), want * 2, rtol=1e-4, atol=1e-4)


def test_distributed_optimizer_trains_on_the_gpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(DEVICE)
    ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4)).to(DEVICE)
    ref.load_state_dict(model.state_dict())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    for step in range(5):
        g = torch.Generator().manual_seed(step)
        x, y = torch.randn(8 * hvd.size(), 16, generator=g), torch.randint(0, 4, (8 * hvd.size(),), generator=g)
        x, y = x.to(DEVICE), y.to(DEVICE)
        ref_opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        ref_opt.step()
        mine = slice(8 * hvd.rank(), 8 * (hvd.rank() + 1))
        opt.zero_grad()
        F.cross_entropy(model(x[mine]), y[mine]).backward()
        opt.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)


def test_uneven_steps_on_the_gpu_with_join():
    """Rank r runs 2 + r steps and joins (as with hvd.join(hvd.local_rank()) in Horovod); the joined ranks stand
    in with zeros on their GPU, so each step's update is the sum of the stepping ranks' gradients over size."""
    torch.manual_seed(5)
    model = torch.nn.Linear(3, 1, bias=False).to(DEVICE)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    start = model.weight.detach().clone()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), model.named_parameters())
    steps = [2 + r for r in range(hvd.size())]
    inputs = lambda r, step: torch.full((4, 3), float(1 + r + 10 * step), device=DEVICE)  # noqa: E731
    for step in range(steps[hvd.rank()]):
        opt.zero_grad()
        model(inputs(hvd.rank(), step)).sum().backward()
        opt.step()
    assert hvd.join(hvd.local_rank()) == hvd.size() - 1
    expected = start.clone()
    for step in range(steps[hvd.rank()]):
        grads = [inputs(r, step).sum(0) for r in range(hvd.size()) if steps[r] > step]
        expected -= 0.1 * torch.stack(grads).sum(0) / hvd.size()
    torch.testing.assert_close(model.weight.detach(), expected)
