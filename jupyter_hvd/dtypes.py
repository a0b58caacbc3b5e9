"""Which array dtypes the engine reduces, and their native codes."""
import numpy as np

# Native codes, in the order of hvd::DataType.
_CODES = {
    np.dtype(np.uint8): 0,
    np.dtype(np.int8): 1,
    np.dtype(np.int32): 2,
    np.dtype(np.int64): 3,
    np.dtype(np.float16): 4,
    np.dtype(np.float32): 6,
    np.dtype(np.float64): 7,
    np.dtype(np.bool_): 8,
}
BFLOAT16 = 5
try:  # numpy carries bfloat16 only through ml_dtypes
    import ml_dtypes

    _CODES[np.dtype(ml_dtypes.bfloat16)] = BFLOAT16
except ImportError:
    pass

FLOAT_CODES = {4, 5, 6, 7}
BOOL_CODE = 8


def dtype_code(dtype: np.dtype, what: str) -> int:
    """The engine's code for ``dtype``; TypeError naming the supported ones otherwise."""
    try:
        return _CODES[dtype]  # an array's dtype: no conversion needed
    except (KeyError, TypeError):
        pass
    try:
        return _CODES[np.dtype(dtype)]
    except (KeyError, TypeError):
        names = ", ".join(sorted(str(d) for d in _CODES))
        raise TypeError(f"{what}: unsupported dtype {dtype}; supported: {names}") from None
