"""Deterministic per-rank test data, so every rank can compute the whole job's reference."""
import numpy as np

import jupyter_hvd as hvd

try:
    import ml_dtypes

    BF16 = [np.dtype(ml_dtypes.bfloat16)]
except ImportError:
    BF16 = []

INTS = [np.dtype(t) for t in (np.uint8, np.int8, np.int32, np.int64)]
INTS16 = [np.dtype(t) for t in (np.int16, np.uint16)]  # reduced on the host only: NCCL has no 16-bit integers
FLOATS = [np.dtype(t) for t in (np.float16, np.float32, np.float64)] + BF16
BOOL = [np.dtype(np.bool_)]
ALL = INTS + INTS16 + FLOATS + BOOL
OPS = [hvd.Average, hvd.Sum, hvd.Min, hvd.Max, hvd.Product]


def reduce_cases(sets: list, dtype: np.dtype):
    """(set index, set, op, high) for every reduce op on every set this rank is in; bool has no Average.

    ``high`` bounds the data so that products stay exact.
    """
    for si, ps in enumerate(sets):
        if not ps.included():
            continue
        for op in OPS:
            if dtype == np.bool_ and op == hvd.Average:
                continue
            yield si, ps, op, 2 if op == hvd.Product else 4


def data(rank: int, dtype: np.dtype, shape: tuple, seed: int, high: int = 4) -> np.ndarray:
    """Small integer values (exact in every dtype) that differ per rank and per seed."""
    vals = np.random.default_rng(seed * 1000 + rank).integers(0, high, size=shape)
    if dtype == np.bool_:
        return (vals % 2).astype(np.bool_)
    return vals.astype(dtype)


def stacked(ranks: list, dtype: np.dtype, shape: tuple, seed: int, high: int = 4) -> np.ndarray:
    """Every listed rank's data, stacked along a new first axis (computed in float64)."""
    return np.stack([data(r, dtype, shape, seed, high).astype(np.float64) for r in ranks])


def expected_reduce(op: int, dtype: np.dtype, ranks: list, shape: tuple, seed: int, high: int) -> np.ndarray:
    """The numpy result of reducing the listed ranks' data with ``op``, in ``dtype``."""
    st = stacked(ranks, dtype, shape, seed, high)
    if dtype == np.bool_:
        st = st.astype(bool)
        return st.all(0) if op in (hvd.Min, hvd.Product) else st.any(0)
    red = {hvd.Sum: st.sum(0), hvd.Min: st.min(0), hvd.Max: st.max(0), hvd.Product: st.prod(0),
           hvd.Average: st.sum(0) / len(ranks)}[op]
    if op == hvd.Average and dtype in INTS:
        red = np.trunc(red)
    return red.astype(dtype)


def expected_alltoall(ps, dtype: np.dtype, seed: int) -> np.ndarray:
    """What this rank receives when every member of ``ps`` sends 2 rows to each member of
    ``data(rank, dtype, (2 * n, 3), seed)``."""
    me = ps.rank()
    return np.concatenate([data(r, dtype, (2 * ps.size(), 3), seed)[2 * me:2 * me + 2] for r in ps.ranks])


def own_rows(full: np.ndarray, ps) -> np.ndarray:
    """This rank's block of ``full``'s rows after a reducescatter over ``ps`` (the first rows % n blocks
    are one row longer)."""
    n, me = ps.size(), ps.rank()
    counts = [len(full) // n + (1 if i < len(full) % n else 0) for i in range(n)]
    start = sum(counts[:me])
    return full[start:start + counts[me]]


def alltoall_splits(index: int, n: int) -> list:
    """The rows the member at set index ``index`` sends to each of the set's ``n`` members."""
    return [(index + j) % 3 for j in range(n)]


def expected_alltoallv(ps, dtype: np.dtype, seed: int) -> list:
    """The row blocks this rank receives from each member of ``ps`` when member i sends
    ``alltoall_splits(i, n)`` rows of ``data(rank, dtype, (sum(splits), 2), seed)``."""
    n, me = ps.size(), ps.rank()
    parts = []
    for i, r in enumerate(ps.ranks):
        splits = alltoall_splits(i, n)
        start = sum(splits[:me])
        parts.append(data(r, dtype, (sum(splits), 2), seed)[start:start + splits[me]])
    return parts
