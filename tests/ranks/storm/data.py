"""Each rank's input of each op, made from (seed, op, tensor, rank) alone, so any rank can make any rank's.

Values are chosen per purpose: ``bits`` (any bit pattern, NaNs included: for ops that only move
data, compared bit for bit), ``sum`` and ``product`` (ranges whose reductions stay finite and, for
integers, exact), ``wrap`` (8-bit integers over their whole range, so sums and products overflow).
"""
from typing import Any

import numpy as np

try:
    import ml_dtypes

    BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # the storm then leaves bfloat16 out
    BFLOAT16 = None

INTS = ("uint8", "int8", "int32", "int64")
FLOATS = ("float16", "bfloat16", "float32", "float64")
ALL_DTYPES = INTS + FLOATS + ("bool",)


def dtype_of(name: str) -> np.dtype:
    return BFLOAT16 if name == "bfloat16" else np.dtype(name)


def available_dtypes(device: bool) -> tuple:
    """The dtypes the storm uses: simcupy (like CuPy) has no bfloat16."""
    return tuple(d for d in ALL_DTYPES if d != "bfloat16" or (BFLOAT16 is not None and not device))


# Inclusive ranges whose reductions over 4 ranks neither overflow nor (scaled by at most 4) leave the dtype;
# other kinds use the whole range.
_INT_RANGES = {
    "sum": {"uint8": (0, 40), "int8": (-20, 20), "int32": (-(1 << 20), 1 << 20), "int64": (-(1 << 40), 1 << 40)},
    "product": {"uint8": (0, 3), "int8": (-3, 3), "int32": (-50, 50), "int64": (-5000, 5000)},
    "scaled": {"uint8": (0, 10), "int8": (-5, 5), "int32": (-(1 << 16), 1 << 16), "int64": (-(1 << 30), 1 << 30)},
}


def _rng(seed: int, index: int, tensor: int, rank: int) -> np.random.Generator:
    return np.random.default_rng([seed, index, tensor, rank])


def values(seed: int, index: int, tensor: int, rank: int, dtype: str, shape: tuple, kind: str) -> np.ndarray:
    """Rank ``rank``'s input for tensor ``tensor`` of op ``index``: a new C-contiguous array."""
    rng = _rng(seed, index, tensor, rank)
    dt = dtype_of(dtype)
    size = int(np.prod(shape, dtype=np.int64))
    if dtype == "bool":
        return rng.integers(0, 2, size=shape, dtype=np.uint8).astype(np.bool_)
    if kind == "bits" or (kind == "wrap" and dtype in ("uint8", "int8")):
        raw = rng.integers(0, 256, size=size * dt.itemsize, dtype=np.uint8)
        return raw.view(dt).reshape(shape)
    if dtype in INTS:
        lo, hi = _INT_RANGES[kind][dtype] if kind in _INT_RANGES else (int(np.iinfo(dt).min), int(np.iinfo(dt).max))
        return rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(dt)
    if kind == "product":
        mag = rng.uniform(0.5, 2.0, size=shape)
        vals = np.where(rng.random(size=shape) < 0.3, -mag, mag)
    elif kind == "minmax":
        vals = rng.uniform(-1000.0, 1000.0, size=shape)
    else:  # sums: small magnitudes, some exact integers and zeros of both signs
        vals = rng.uniform(-8.0, 8.0, size=shape)
        pick = rng.random(size=shape)
        vals = np.where(pick < 0.1, np.round(vals), vals)
        vals = np.where(pick > 0.97, -0.0, vals)
    return np.asarray(vals, dtype=np.float64).astype(dt)


def obj(seed: int, index: int, rank: int) -> Any:
    """A picklable object for the object collectives: nested containers, bytes, an array."""
    rng = _rng(seed, index, 0, rank)
    n = int(rng.integers(0, 3000)) if rng.random() < 0.9 else int(rng.integers(0, 200000))
    return {"rank": rank, "op": index, "blob": rng.bytes(n), "arr": rng.standard_normal(int(rng.integers(0, 9))),
            "text": "ü層" * int(rng.integers(0, 5)), "nested": [None, (1, 2.5), {"k": [rank] * 3}]}


def to_torch(a: np.ndarray) -> Any:
    """A CPU tensor over ``a``'s memory (bfloat16 through its bits), for the storm through jupyter_hvd.torch."""
    import torch

    a = np.asarray(a)  # a numpy scalar too
    if BFLOAT16 is not None and a.dtype == BFLOAT16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


def from_torch(t: Any) -> np.ndarray:
    """A CPU tensor's values as a numpy view of its memory."""
    import torch

    t = t.detach()
    return t.view(torch.int16).numpy().view(BFLOAT16) if t.dtype == torch.bfloat16 else t.numpy()


def noncontig_torch(t: Any, how: int) -> Any:
    """A tensor view with the values of ``t`` that is not contiguous (torch has no negative strides)."""
    import torch

    if how == 1 and t.dim() >= 2:  # column-major
        return t.transpose(0, 1).contiguous().transpose(0, 1)
    buf = torch.zeros(t.shape[:-1] + (2 * t.shape[-1],), dtype=t.dtype)
    buf[..., ::2] = t
    return buf[..., ::2]


def noncontig(a: np.ndarray, how: int) -> np.ndarray:
    """A view with the values of ``a`` that is not C-contiguous (``a`` must have a dimension)."""
    if how == 0:  # every other element of the last dimension
        buf = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        buf[..., ::2] = a
        return buf[..., ::2]
    if how == 1 and a.ndim >= 2:  # Fortran order
        return np.asfortranarray(a)
    buf = np.zeros(a.shape, a.dtype)[::-1]  # negative strides
    buf[...] = a
    return buf
