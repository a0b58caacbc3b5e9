"""Where Horovod 0.28's behaviour is specific, ours is the same: scaling integer and half tensors, splits that
are not integers, 0-d tensors where rows are needed, and a NaN scale factor."""
import numpy as np
import pytest

import jupyter_hvd as hvd
from jupyter_hvd import _C

INTS = [np.uint8, np.int8, np.int32, np.int64]


def horovod_scale(x: np.ndarray, factor: float) -> np.ndarray:
    """Horovod's CPU scaling: integers times a float64 factor, cast back toward zero (saturated here, where
    the C++ conversion is undefined); float16 in float32."""
    if x.dtype == np.float16:
        return (x.astype(np.float32) * np.float32(factor)).astype(np.float16)
    info = np.iinfo(x.dtype)
    return np.clip(np.trunc(x.astype(np.float64) * factor), info.min, info.max).astype(x.dtype)


def inputs(dtype, shape, seed: int) -> list:
    """Every rank's input; small values so that integer sums cannot overflow."""
    lo = 0 if dtype == np.uint8 else -9
    return [np.random.default_rng(seed + r).integers(lo, 10, shape).astype(dtype) for r in range(hvd.size())]


def reduced(xs: list, op: int, pre: float, post: float) -> np.ndarray:
    """The allreduce Horovod computes: prescale each input, sum, then postscale (post / n for Average)."""
    dtype = xs[0].dtype
    acc = np.float32 if dtype == np.float16 else np.int64
    total = sum(horovod_scale(x, pre).astype(acc) for x in xs).astype(dtype)
    if op == hvd.Average and post == 1.0 and dtype != np.float16:  # exact division: see the test below
        return (np.sign(total) * (np.abs(total.astype(np.int64)) // len(xs))).astype(dtype)
    return horovod_scale(total, post / len(xs) if op == hvd.Average else post)


@pytest.mark.parametrize("dtype", INTS + [np.float16], ids=str)
@pytest.mark.parametrize("op", [hvd.Average, hvd.Sum], ids=["sum", "average"])
def test_scaled_allreduce_of_integers_and_halves(dtype, op):
    for pre, post in [(3.0, 1.0), (0.5, 2.5), (1.0, 0.3), (-1.75, 1.0)]:
        if dtype == np.uint8 and pre < 0:
            continue
        xs = inputs(dtype, (5, 3), 17)
        want = reduced(xs, op, pre, post)
        name = f"scaled.{np.dtype(dtype)}.{op}.{pre}.{post}"
        got = hvd.allreduce(xs[hvd.rank()], op=op, prescale_factor=pre, postscale_factor=post, name=name)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)
        # grouped: small tensors share the fusion buffer, where they are scaled together
        group = [inputs(dtype, (4,), 23 + i) for i in range(3)]
        outs = hvd.grouped_allreduce([g[hvd.rank()] for g in group], op=op, prescale_factor=pre,
                                     postscale_factor=post, name=name + ".g")
        for g, o in zip(group, outs):
            np.testing.assert_array_equal(o, reduced(g, op, pre, post))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float16], ids=str)
def test_scaled_reducescatter_of_integers_and_halves(dtype):
    n = hvd.size()
    xs = inputs(dtype, (2 * n, 3), 5)
    want = reduced(xs, hvd.Sum, 2.0, 0.5)
    got = hvd.reducescatter(xs[hvd.rank()], op=hvd.Sum, prescale_factor=2.0, postscale_factor=0.5,
                            name=f"rs.scaled.{np.dtype(dtype)}")
    np.testing.assert_array_equal(got, want[2 * hvd.rank():2 * hvd.rank() + 2])
    outs = hvd.grouped_reducescatter([xs[hvd.rank()], xs[hvd.rank()]], op=hvd.Sum, prescale_factor=2.0,
                                     postscale_factor=0.5, name=f"rs.scaled.g.{np.dtype(dtype)}")
    for o in outs:
        np.testing.assert_array_equal(o, want[2 * hvd.rank():2 * hvd.rank() + 2])


def test_integer_average_without_scaling_divides_exactly():
    """49 / 49 is 1 (Horovod's reciprocal, 49 * (1/49), would truncate to 0): a documented difference."""
    x = np.full(3, 7 * hvd.size(), np.int32)
    np.testing.assert_array_equal(hvd.allreduce(x, op=hvd.Average, name="avg.exact"), np.full(3, 7 * hvd.size()))


def test_scaling_saturates_instead_of_wrapping():
    got = hvd.allreduce(np.array([1, -1, 1], np.int8), op=hvd.Sum, postscale_factor=1000.0, name="saturate")
    np.testing.assert_array_equal(got, np.array([127, -128, 127], np.int8))
    got = hvd.allreduce(np.array([1, -1], np.int64), op=hvd.Sum, postscale_factor=1e300, name="saturate.64")
    np.testing.assert_array_equal(got, [np.iinfo(np.int64).max, np.iinfo(np.int64).min])


def test_bool_tensors_cannot_be_scaled():
    with pytest.raises(TypeError, match="cannot scale bool"):
        hvd.allreduce(np.ones(3, np.bool_), op=hvd.Sum, prescale_factor=2.0)


def test_scale_factors_are_any_real_number():
    x = np.ones(3, np.float32)
    got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=np.float32(0.5), postscale_factor=np.int64(4), name="scale.np")
    np.testing.assert_array_equal(got, np.full(3, 2.0 * hvd.size()))
    got = hvd.allreduce(x, op=hvd.Sum, prescale_factor=3, name="scale.int")
    np.testing.assert_array_equal(got, np.full(3, 3.0 * hvd.size()))
    with pytest.raises(TypeError, match="allreduce: prescale_factor must be a number, got '2'"):
        hvd.allreduce(x, op=hvd.Sum, prescale_factor="2", name="scale.str")
    with pytest.raises(TypeError, match="grouped_allreduce: postscale_factor must be a number, got None"):
        hvd.grouped_allreduce([x], op=hvd.Sum, postscale_factor=None, name="scale.none")


def test_a_nan_scale_factor_is_not_a_mismatch():
    got = hvd.allreduce(np.ones(3, np.float32), op=hvd.Sum, prescale_factor=float("nan"), name="nan.scale")
    assert np.isnan(got).all()


@pytest.mark.parametrize("splits", [np.ones(1, np.float32), [1.0], [4.7], np.array([True])], ids=str)
def test_alltoall_splits_must_be_integers(splits):
    n = hvd.size()
    bad = np.resize(np.asarray(splits), n)
    with pytest.raises(ValueError, match="splits must be integers"):
        hvd.alltoall(np.ones((n, 2), np.float32), splits=bad)
    out, recv = hvd.alltoall(np.ones((n, 2), np.float32), splits=np.ones(n, np.int64), name="splits.int64")
    assert out.shape == (n, 2) and recv.dtype == np.int32


@pytest.mark.parametrize("op", ["reducescatter", "grouped_reducescatter", "allgather", "alltoall"])
def test_zero_dimensional_tensors_are_value_errors(op):
    x = np.float32(3.0) * np.ones((), np.float32)
    call = getattr(hvd, op)
    with pytest.raises(ValueError, match="at least one dimension"):
        call([x] if op.startswith("grouped") else x)


def test_codes_out_of_range_are_refused_by_the_extension():
    x = np.ones(2, np.float32)
    ops, reduces, dtypes = len(_C.OpType), len(_C.ReduceOp), len(_C.DataType)
    for op, reduce in [(ops, 0), (256, 0), (0, reduces), (0, -1)]:
        with pytest.raises(ValueError, match="is not one the engine knows"):
            _C.OpSpec(op, reduce=reduce)
    for op, reduce in [(ops, 0), (0, reduces)]:  # the same check where an op is submitted
        with pytest.raises(ValueError, match="is not one the engine knows"):
            _C.submit(op, "allreduce", [x], [x], ["codes"], 0, reduce, -1, 1.0, 1.0, [])
    for dtype in (dtypes, 256 + int(_C.DataType.float32), -1):
        with pytest.raises(ValueError, match="is not one the engine knows"):
            _C.check_reduce([dtype], 0, 2.0, 1.0, "allreduce", True)
    np.testing.assert_array_equal(hvd.allreduce(x, op=hvd.Sum, name="codes"), np.full(2, hvd.size()))


def test_an_in_place_op_on_a_read_only_array_names_the_op():
    x = np.ones(3, np.float32)
    x.flags.writeable = False
    with pytest.raises(ValueError, match="broadcast_: a tensor written in place .* read-only"):
        hvd.broadcast_(x, root_rank=0)
    with pytest.raises(ValueError, match="allreduce_: a tensor written in place .* read-only"):
        hvd.allreduce_(x)
