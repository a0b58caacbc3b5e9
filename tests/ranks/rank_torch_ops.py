"""jupyter_hvd.torch's collectives on CPU tensors against a numpy reference, and their gradients, on all ranks."""
import numpy as np
import pytest
import torch
from memory_maps import HUGE_PAGES, huge_page_advised, inner_huge_page
from refdata import (alltoall_splits, data, expected_alltoall, expected_alltoallv, expected_reduce, own_rows,
                     reduce_cases, stacked)

import jupyter_hvd.torch as hvd

# Every dtype the engine reduces that this torch has (uint16 came in torch 2.3).
DTYPES = [getattr(torch, n) for n in ("uint8", "int8", "int16", "uint16", "int32", "int64", "float16", "float32",
                                      "float64", "bfloat16", "bool") if hasattr(torch, n)]


def np_dtype(dtype: torch.dtype) -> np.dtype:
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16) if dtype == torch.bfloat16 else np.dtype(str(dtype)[6:])


def tensor(x: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    return torch.from_numpy(x.astype(np.float64)).to(dtype) if dtype != torch.bool else torch.from_numpy(x)


# Average divides: the engine and numpy may round the quotient differently in the last place.
RTOL = {torch.float16: 1e-3, torch.bfloat16: 1e-2, torch.float32: 1e-6, torch.float64: 1e-12}


def assert_equal(got: torch.Tensor, want: np.ndarray, dtype: torch.dtype):
    assert isinstance(got, torch.Tensor) and got.dtype == dtype and tuple(got.shape) == want.shape
    np.testing.assert_allclose(got.to(torch.float64).numpy(), want.astype(np.float64), rtol=RTOL.get(dtype, 0))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_allreduce_every_op_set_and_form(sets, dtype):
    me = hvd.rank()
    for si, ps, op, high in reduce_cases(sets, np_dtype(dtype)):
        seed = 10 * si + op
        want = expected_reduce(op, np_dtype(dtype), ps.ranks, (3, 5), seed, high)
        x = tensor(data(me, np_dtype(dtype), (3, 5), seed, high), dtype)
        before = x.clone()
        assert_equal(hvd.allreduce(x, op=op, process_set=ps), want, dtype)
        assert torch.equal(x, before), "allreduce changed its input"
        assert_equal(hvd.synchronize(hvd.allreduce_async(x, op=op, process_set=ps, name=f"a{si}.{op}")), want,
                     dtype)
        same = hvd.allreduce_(x, op=op, process_set=ps)
        assert same is x
        assert_equal(x, want, dtype)
        ys = [tensor(data(me, np_dtype(dtype), (3, 5), seed, high), dtype) for _ in range(3)]
        outs = hvd.grouped_allreduce(ys, op=op, process_set=ps)
        assert type(outs) is list  # Horovod's: a list here, a tuple from grouped_allreduce_ and synchronize()
        for out in outs:
            assert_equal(out, want, dtype)
        outs = hvd.synchronize(hvd.grouped_allreduce_async(ys, op=op, process_set=ps, name=f"ga{si}.{op}"))
        assert type(outs) is tuple and len(outs) == len(ys)
        outs = hvd.grouped_allreduce_(ys, op=op, process_set=ps, name=f"g{si}.{op}")
        assert type(outs) is tuple and all(o is y for o, y in zip(outs, ys))
        for y in ys:
            assert_equal(y, want, dtype)


def test_in_place_ops_write_the_tensors_own_memory():
    """CPU tensors reach the engine without a copy: a view of a bigger tensor is reduced where it lies."""
    base = torch.zeros(4, 6)
    view = base[1]  # contiguous, inside base's storage
    view.fill_(hvd.rank() + 1)
    hvd.allreduce_(view, op=hvd.Sum)
    n = hvd.size()
    assert torch.all(base[1] == n * (n + 1) / 2) and torch.all(base[0] == 0)
    p = torch.nn.Parameter(torch.full((3,), float(hvd.rank())))
    hvd.broadcast_(p, root_rank=0)
    assert torch.all(p == 0) and p.requires_grad


@pytest.mark.skipif(not HUGE_PAGES, reason="no transparent huge pages")
def test_a_large_new_result_is_on_huge_pages():
    """An allreduce's new result of 4 MiB and more is asked for huge pages before the engine writes it, as
    numpy's large arrays are (torch's allocator does not ask: a result past glibc's 32 MiB mmap threshold was
    faulted in 4 KiB at a time, which cost more than the reduction)."""
    x = torch.full((4 << 20,), float(hvd.rank() + 1))  # 16 MiB
    got = hvd.allreduce(x, op=hvd.Sum)
    assert torch.all(got == hvd.size() * (hvd.size() + 1) / 2)
    assert huge_page_advised(inner_huge_page(got.data_ptr()))


def test_allreduce_of_any_shape_and_layout():
    """The engine reads CPU tensors by their data pointers: scalars, empty tensors, views with an offset,
    transposed inputs (read through a contiguous copy) and tensors that require grad all reduce right,
    and an out-of-place result is a new contiguous tensor."""
    me, n = hvd.rank(), hvd.size()
    total = n * (n + 1) / 2
    scalar = torch.tensor(float(me + 1))
    assert hvd.allreduce(scalar, op=hvd.Sum).item() == total and scalar.item() == me + 1
    assert hvd.allreduce_(scalar, op=hvd.Sum) is scalar and scalar.shape == () and scalar.item() == total
    empty = torch.ones(0, 3)
    assert hvd.allreduce(empty).shape == (0, 3) and hvd.allreduce_(empty) is empty
    base = torch.arange(12.0).reshape(3, 4) * (me + 1)
    got = hvd.allreduce(base.t(), op=hvd.Sum)
    assert got.is_contiguous() and torch.equal(got, torch.arange(12.0).reshape(3, 4).t() * total)
    assert got.data_ptr() != base.data_ptr()
    row = torch.zeros(3, 4)
    row[2] = me + 1
    hvd.allreduce_(row[2], op=hvd.Sum)
    assert torch.all(row[2] == total) and torch.all(row[:2] == 0)
    w = torch.full((2,), float(me + 1), requires_grad=True)
    assert torch.equal(hvd.allreduce(w, op=hvd.Sum).detach(), torch.full((2,), total))
    grads = [torch.full((k,), float(me + k), dtype=torch.float64) for k in (1, 5, 2)]
    for k, got in zip((1, 5, 2), hvd.grouped_allreduce(grads, op=hvd.Max)):
        assert got.dtype == torch.float64 and torch.equal(got, torch.full((k,), float(n - 1 + k), dtype=torch.float64))


def test_prescale_postscale_and_average_deprecation():
    x = torch.full((4,), float(hvd.rank() + 1))
    n = hvd.size()
    got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=0.5, postscale_factor=3.0)
    assert torch.allclose(got, torch.full((4,), 1.5 * n * (n + 1) / 2))
    with pytest.warns(DeprecationWarning):
        assert torch.allclose(hvd.allreduce(x, average=False), torch.full((4,), n * (n + 1) / 2))


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.bfloat16], ids=str)
def test_allgather_broadcast_alltoall_reducescatter(sets, dtype):
    me, dt = hvd.rank(), np_dtype(dtype)
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        rows = [r % 3 + 1 for r in ps.ranks]  # a different first dimension on each rank
        mine = data(me, dt, (rows[ps.rank()], 2), si)
        want = np.concatenate([data(r, dt, (rows[i], 2), si) for i, r in enumerate(ps.ranks)])
        assert_equal(hvd.allgather(tensor(mine, dtype), process_set=ps), want, dtype)
        gathered = hvd.grouped_allgather([tensor(mine, dtype)] * 2, process_set=ps, name=f"gg{si}")
        assert type(gathered) is tuple and len(gathered) == 2  # as Horovod's
        assert all(torch.equal(g, tensor(want, dtype)) for g in gathered)
        gathered = hvd.synchronize(hvd.grouped_allgather_async([tensor(mine, dtype)] * 2, process_set=ps))
        assert type(gathered) is tuple and all(torch.equal(g, tensor(want, dtype)) for g in gathered)
        root = ps.ranks[-1]
        assert_equal(hvd.broadcast(tensor(data(me, dt, (2, 3), si), dtype), root, process_set=ps),
                     data(root, dt, (2, 3), si), dtype)
        x = tensor(data(me, dt, (2 * ps.size(), 3), si), dtype)
        assert_equal(hvd.alltoall(x, process_set=ps), expected_alltoall(ps, dt, si), dtype)
        splits = alltoall_splits(ps.rank(), ps.size())
        x = tensor(data(me, dt, (sum(splits), 2), si), dtype)
        out, received = hvd.alltoall(x, splits=torch.tensor(splits, dtype=torch.int32), process_set=ps)
        parts = expected_alltoallv(ps, dt, si)
        assert_equal(out, np.concatenate(parts), dtype)
        assert received.dtype == torch.int32 and received.tolist() == [len(p) for p in parts]
        out, received = hvd.synchronize(hvd.alltoall_async(x, splits, process_set=ps))
        assert received.tolist() == [len(p) for p in parts]
        full = stacked(ps.ranks, dt, (2 * ps.size() + 1, 3), si).sum(0)
        x = tensor(data(me, dt, (2 * ps.size() + 1, 3), si), dtype)
        assert_equal(hvd.reducescatter(x, op=hvd.Sum, process_set=ps), own_rows(full, ps).astype(dt), dtype)
        outs = hvd.grouped_reducescatter([x, x], op=hvd.Sum, process_set=ps)
        assert type(outs) is list  # as Horovod's; its synchronize() gives a tuple
        for got in outs + list(hvd.synchronize(hvd.grouped_reducescatter_async([x], op=hvd.Sum, process_set=ps))):
            assert_equal(got, own_rows(full, ps).astype(dt), dtype)


def test_poll_synchronize_barrier_join():
    h = hvd.allreduce_async(torch.ones(2), name="polled")
    while not hvd.poll(h):
        pass
    assert torch.equal(hvd.synchronize(h), torch.ones(2))
    hvd.barrier()
    assert 0 <= hvd.join() < hvd.size()


def test_a_joined_rank_stands_in_for_allreduces_and_gathers_raise():
    """Horovod's test_horovod_join_* semantics: the average still divides by every rank."""
    if hvd.rank() == 0:
        last = hvd.join()
    else:
        x = torch.arange(6.0)
        torch.testing.assert_close(hvd.allreduce(x), x * (hvd.size() - 1) / hvd.size())
        with pytest.raises(RuntimeError, match="allgather.*rank 0 has joined"):
            hvd.allgather(x[None])
        with pytest.raises(RuntimeError, match="broadcast.*rank 0 has joined"):
            hvd.broadcast(x, root_rank=1)
        last = hvd.join()
    assert last == 0 if hvd.size() == 1 else 0 < last < hvd.size()
    assert torch.equal(hvd.allreduce(torch.ones(2), op=hvd.Sum), torch.full((2,), float(hvd.size())))


def test_objects_parameters_and_optimizer_state():
    mine = {"r": hvd.rank()}
    got = hvd.broadcast_object(mine, root_rank=0)
    assert got == {"r": 0}
    assert (got is mine) == (hvd.rank() == 0)  # the root's own object, as Horovod's: `model = broadcast_object(model)`
    assert hvd.allgather_object(hvd.rank()) == list(range(hvd.size()))
    torch.manual_seed(hvd.rank())
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    opt = torch.optim.Adam(model.parameters(), lr=0.01 * (hvd.rank() + 1))
    model(torch.randn(5, 3)).sum().backward()
    opt.step()
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(opt, root_rank=0)
    state = hvd.allgather_object([(k, v.tolist()) for k, v in model.state_dict().items()])
    assert all(s == state[0] for s in state)
    opts = hvd.allgather_object(opt.state_dict())
    assert all(o["param_groups"][0]["lr"] == 0.01 for o in opts)
    assert all(torch.equal(o["state"][0]["exp_avg"], opts[0]["state"][0]["exp_avg"]) for o in opts)
    hvd.broadcast_parameters(list(model.named_parameters()), root_rank=0, prefix="again.")


def test_autograd_gradients_are_horovods():
    n, me = hvd.size(), hvd.rank()
    x = torch.full((2, 3), float(me + 1), requires_grad=True)
    hvd.allreduce(x, op=hvd.Sum).sum().backward()
    assert torch.all(x.grad == n)  # allreduce's gradient: the same allreduce of the output's gradient
    x.grad = None
    hvd.allreduce(x, op=hvd.Average, postscale_factor=2.0).sum().backward()
    assert torch.allclose(x.grad, torch.full((2, 3), 2.0))
    ys = [torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)]
    sum(o.sum() for o in hvd.grouped_allreduce(ys, op=hvd.Sum)).backward()
    assert all(torch.all(y.grad == n) for y in ys)
    # allgather: this rank's rows of the averaged output gradient
    rows = me + 1
    x = torch.ones(rows, 2, requires_grad=True)
    out = hvd.allgather(x)
    weight = torch.arange(out.shape[0], dtype=torch.float32)[:, None] * (me + 1)
    (out * weight).sum().backward()
    start = sum(r + 1 for r in range(me))
    mean_factor = sum(r + 1 for r in range(n)) / n
    assert torch.allclose(x.grad, torch.arange(start, start + rows, dtype=torch.float32)[:, None].expand(rows, 2)
                          * mean_factor)
    # broadcast: the root gets the averaged gradient, the others zeros
    x = torch.ones(3, requires_grad=True)
    (hvd.broadcast(x, root_rank=0) * (me + 1)).sum().backward()
    want = sum(r + 1 for r in range(n)) / n if me == 0 else 0.0
    assert torch.allclose(x.grad, torch.full((3,), want))
    # alltoall: gradients travel back the way their rows came
    x = torch.zeros(2 * n, 1, requires_grad=True)
    out = hvd.alltoall(x)
    (out * torch.arange(2 * n, dtype=torch.float32)[:, None]).sum().backward()
    assert x.grad[:, 0].tolist() == [float(2 * me + i % 2) for i in range(2 * n)]
    # reducescatter: the gathered output gradients, times the set's size for Sum
    for op, factor in ((hvd.Sum, n), (hvd.Average, 1)):
        x = torch.ones(2 * n, 2, requires_grad=True)
        (hvd.reducescatter(x, op=op) * (me + 1)).sum().backward()
        want = torch.tensor([r + 1 for r in range(n) for _ in range(2)], dtype=torch.float32)[:, None] * factor
        assert torch.allclose(x.grad, want.expand(2 * n, 2))


def test_autograd_records_the_ops_only_where_a_gradient_is_wanted():
    """Each differentiable op records a graph node for an input that requires a gradient, and gives the same
    values with no node under torch.no_grad() or for an input that needs none (its forward run directly)."""
    n = hvd.size()
    ops = {
        "allreduce": lambda x: hvd.allreduce(x, op=hvd.Sum),
        "grouped_allreduce": lambda x: hvd.grouped_allreduce([x, x * 2], op=hvd.Sum)[1],
        "allgather": hvd.allgather,
        "grouped_allgather": lambda x: hvd.grouped_allgather([x, x])[0],
        "broadcast": lambda x: hvd.broadcast(x, root_rank=0),
        "alltoall": hvd.alltoall,
        "alltoall with splits": lambda x: hvd.alltoall(x, splits=[2] * n)[0],
        "reducescatter": lambda x: hvd.reducescatter(x, op=hvd.Sum),
        "grouped_reducescatter": lambda x: hvd.grouped_reducescatter([x], op=hvd.Sum)[0],
    }
    for what, op in ops.items():
        base = torch.arange(2.0 * n * 3).reshape(2 * n, 3) + hvd.rank()
        recorded = op(base.clone().requires_grad_())
        assert recorded.grad_fn is not None, what
        with torch.no_grad():
            unrecorded = op(base.clone().requires_grad_())
        plain = op(base.clone())
        for got in (unrecorded, plain):
            assert got.grad_fn is None and not got.requires_grad, what
            assert torch.equal(got, recorded.detach()), what
    # A backward whose incoming gradient needs a gradient itself records its allreduce too: the gradient of
    # sum(allreduce(x) * x) is allreduce(x) through the backward plus allreduce(x) through the product, and
    # each adds n to the second derivative.
    x = torch.ones(3, requires_grad=True)
    (grad,) = torch.autograd.grad((hvd.allreduce(x, op=hvd.Sum) * x).sum(), x, create_graph=True)
    assert torch.all(grad == 2 * n)
    (second,) = torch.autograd.grad(grad.sum(), x)
    assert torch.all(second == 2 * n)


def test_fp16_compression_round_trip():
    x = torch.tensor([1.5, -2.25])
    sent, ctx = hvd.Compression.fp16.compress(x)
    assert sent.dtype == torch.float16 and hvd.Compression.fp16.decompress(sent, ctx).dtype == torch.float32
    ints = torch.tensor([1, 2])
    assert hvd.Compression.fp16.compress(ints)[0] is ints
    got = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert got.dtype == torch.float32 and torch.equal(got, x * hvd.size())


def test_a_sparse_average_is_the_dense_one_the_sum_divided_by_n():
    """The gathered values are summed, then divided by the rank count, as a dense Average: each scaled by 1 / n
    before the sum, about half of these were a bit off at 3 ranks (Horovod divides each value first)."""
    n = hvd.size()
    k = torch.arange(-100, 101, dtype=torch.float32)
    mine = k + (hvd.rank() == 0)  # sums n * k + 1
    t = torch.sparse_coo_tensor(torch.arange(201).unsqueeze(0), mine, (201,))
    got = hvd.sparse_allreduce_async(t, name="sparse.mean", op=hvd.Average)().to_dense()
    assert torch.equal(got, (k * n + 1) / n)
    assert torch.equal(got, hvd.allreduce(mine, name="dense.mean"))


def test_sparse_allreduce():
    n, me = hvd.size(), hvd.rank()
    t = torch.sparse_coo_tensor([[me, (me + 1) % 5]], [1.0, 2.0], (5,))
    got = hvd.synchronize(hvd.sparse_allreduce_async(t, name="sparse", op=hvd.Sum)).to_dense()
    want = torch.zeros(5)
    for r in range(n):
        want[r % 5] += 1.0
        want[(r + 1) % 5] += 2.0
    assert torch.equal(got, want)
    handle = hvd.sparse_allreduce_async(t, name="sparse.called", op=hvd.Average)
    assert torch.equal(handle().to_dense(), want / n)  # Horovod's handle is a function that returns the result
