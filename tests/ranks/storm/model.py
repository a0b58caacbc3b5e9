"""What each op must return, computed with numpy from every member's input, and how results are compared.

Integers and bools, and every op that only moves data, must match bit for bit. Floating-point
reductions must lie within a bound derived from the op, the dtype and the inputs: each rounding
the engine may do (scaling, each partial sum in any order, the division of an Average, the
postscale) moves a result by at most one unit in the last place of a value no larger than the sum
of the magnitudes involved.
"""
from typing import Optional, Sequence

import numpy as np

from .data import FLOATS, INTS, dtype_of

AVERAGE, SUM, MIN, MAX, PRODUCT = 0, 1, 3, 4, 5  # hvd.Average ... hvd.Product: Horovod's codes (Adasum is 2)
# The order a plan draws them in (by index, so that a seed replays the same storm whatever their codes)
REDUCES = (SUM, AVERAGE, MIN, MAX, PRODUCT)
REDUCE_NAMES = {SUM: "Sum", AVERAGE: "Average", MIN: "Min", MAX: "Max", PRODUCT: "Product"}

# Unit roundoff (doubled: the engine may round twice where numpy rounds once) and the smallest subnormal.
_EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}
_TINY = {"float16": 2.0 ** -24, "bfloat16": 2.0 ** -133, "float32": 2.0 ** -149, "float64": 5e-324}


class Mismatch(AssertionError):
    """A result that differs from the model."""


def _trunc_div(a: np.ndarray, n: int) -> np.ndarray:
    """C++ integer division (toward zero), exactly, in int64."""
    a = a.astype(np.int64)
    q = np.abs(a) // n
    return np.where(a < 0, -q, q)


def _scale_int(a: np.ndarray, f: float, dtype: np.dtype) -> np.ndarray:
    """An integer tensor scaled in float64 and cast back (truncated), as Horovod does."""
    return np.trunc(a.astype(np.float64) * f).astype(dtype)


def reduce_int(stack: np.ndarray, op: int, pre: float, post: float) -> np.ndarray:
    """The exact reduction of integer (or bool) inputs stacked along axis 0, in their dtype.

    Sums and products wrap around as the dtype does; Average divides the (wrapped) sum by the count,
    toward zero."""
    dt = stack.dtype
    n = stack.shape[0]
    if dt == np.bool_:
        return stack.all(0) if op in (MIN, PRODUCT) else stack.any(0)
    if pre != 1.0:
        stack = _scale_int(stack, pre, dt)
    with np.errstate(over="ignore"):
        if op in (SUM, AVERAGE):
            red = stack.sum(0, dtype=dt)
        elif op == PRODUCT:
            red = stack.prod(0, dtype=dt)
        else:
            red = stack.min(0) if op == MIN else stack.max(0)
    if op == AVERAGE:
        red = _trunc_div(red, n).astype(dt)
    if post != 1.0:
        red = _scale_int(red, post, dt)
    return red


def reduce_float(stack: np.ndarray, op: int, pre: float, post: float, dtype: str) -> tuple:
    """(expected value, allowed absolute error) in float64 for float inputs stacked along axis 0."""
    x = stack.astype(np.float64)
    n = x.shape[0]
    eps, tiny = _EPS[dtype], _TINY[dtype]
    with np.errstate(invalid="ignore", over="ignore"):
        xs = x * pre
        if op in (SUM, AVERAGE):
            div = n if op == AVERAGE else 1
            want = xs.sum(0) * post / div
            bound = (n + 3) * eps * np.abs(xs).sum(0) * abs(post) / div
        elif op == PRODUCT:
            want = xs.prod(0) * post
            bound = (2 * n + 3) * eps * np.abs(want)
        else:
            want = (xs.min(0) if op == MIN else xs.max(0)) * post
            bound = 3 * eps * np.abs(want)
    return want, bound + 4 * tiny


def identity(dtype: str, op: int, shape: tuple) -> np.ndarray:
    """What a member that has joined puts into a reduction: 0 for Sum and Average, 1 for Product, the
    dtype's largest value (or +inf) for Min and its lowest (or -inf) for Max; for bool, True for Min and
    Product."""
    dt = dtype_of(dtype)
    if op in (SUM, AVERAGE):
        value = 0
    elif op == PRODUCT or dtype == "bool":
        value = int(op in (MIN, PRODUCT))
    elif dtype in FLOATS:
        value = np.inf if op == MIN else -np.inf
    else:
        value = np.iinfo(dt).max if op == MIN else np.iinfo(dt).min
    return np.full(shape, value, dtype=dt)


def check_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Bit-for-bit equality, dtype and shape included."""
    if got.dtype != want.dtype or got.shape != want.shape:
        raise Mismatch(f"{what}: got {got.dtype} {got.shape}, want {want.dtype} {want.shape}")
    g, w = np.ascontiguousarray(got), np.ascontiguousarray(want)
    if g.tobytes() != w.tobytes():
        gb, wb = g.reshape(-1).view(np.uint8), w.reshape(-1).view(np.uint8)
        first = int(np.flatnonzero(gb != wb)[0]) // g.dtype.itemsize
        differ = int(np.count_nonzero(g.reshape(-1) != w.reshape(-1)))
        raise Mismatch(f"{what}: {differ} of {g.size} elements differ; first at flat index {first}: "
                       f"got {g.reshape(-1)[first]!r}, want {w.reshape(-1)[first]!r}")


def check_close(got: np.ndarray, want: np.ndarray, bound: np.ndarray, dtype: np.dtype, what: str) -> None:
    """Every element within its bound of the float64 model; NaNs exactly where the model has them."""
    if got.dtype != dtype or got.shape != want.shape:
        raise Mismatch(f"{what}: got {got.dtype} {got.shape}, want {dtype} {want.shape}")
    g = got.astype(np.float64)
    nan_g, nan_w = np.isnan(g), np.isnan(want)
    with np.errstate(invalid="ignore"):
        bad = (nan_g != nan_w) | (~nan_w & ~(np.abs(g - want) <= bound))
    if bad.any():
        i = int(np.flatnonzero(bad.reshape(-1))[0])
        gf, wf, bf = g.reshape(-1)[i], want.reshape(-1)[i], bound.reshape(-1)[i]
        raise Mismatch(f"{what}: {int(bad.sum())} of {g.size} elements out of tolerance; first at flat index {i}: "
                       f"got {gf!r}, want {wf!r} +- {bf:.3g} (error {abs(gf - wf):.3g})")


def check_reduce(got: np.ndarray, inputs: Sequence[np.ndarray], op: int, pre: float, post: float,
                 what: str, rows: Optional[slice] = None) -> None:
    """``got`` against the reduction of ``inputs`` (one per member, in set order); ``rows``: a
    reducescatter's block of rows."""
    dtype = inputs[0].dtype
    stack = np.stack(inputs) if inputs[0].ndim else np.array(inputs, dtype=dtype)
    if rows is not None:
        stack = stack[:, rows]
    if dtype == np.bool_ or dtype.name in INTS:
        check_equal(got, reduce_int(stack, op, pre, post), what)
    else:
        want, bound = reduce_float(stack, op, pre, post, dtype.name)
        check_close(got, want, bound, dtype, what)


def reducescatter_rows(rows: int, n: int, me: int) -> slice:
    """Member ``me``'s rows of a reducescatter over ``n`` members: the first rows % n blocks are one longer."""
    counts = [rows // n + (1 if i < rows % n else 0) for i in range(n)]
    start = sum(counts[:me])
    return slice(start, start + counts[me])


def alltoall_expected(inputs: Sequence[np.ndarray], splits: Sequence[Sequence[int]], me: int) -> tuple:
    """(what member ``me`` receives, the received splits) when member i sends rows splits[i][j] of
    inputs[i] to member j."""
    parts, received = [], []
    for x, sp in zip(inputs, splits):
        start = sum(sp[:me])
        parts.append(x[start:start + sp[me]])
        received.append(sp[me])
    return np.concatenate(parts), np.asarray(received, dtype=np.int32)


def objects_equal(a, b) -> bool:
    """Equality for the storm's objects, numpy arrays compared by value."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and a.tobytes() == b.tobytes())
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(objects_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(objects_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b
