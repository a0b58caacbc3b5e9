"""Which array dtypes the engine reduces, and their codes: the engine's list (hvd::DataType), by numpy name."""
from typing import Optional

import numpy as np

from ._C import DataType

try:  # numpy carries bfloat16 only through ml_dtypes
    import ml_dtypes
except ImportError:
    ml_dtypes = None


def _numpy_dtype(name: str) -> Optional[np.dtype]:
    """The numpy dtype the engine's dtype ``name`` stands for; None where numpy lacks it here."""
    try:
        return np.dtype(name)
    except TypeError:
        extra = getattr(ml_dtypes, name, None)
        return None if extra is None else np.dtype(extra)


CODES = {dt: int(t) for t in DataType if (dt := _numpy_dtype(t.name)) is not None}


def dtype_code(dtype: np.dtype, what: str) -> int:
    """The engine's code for ``dtype``; TypeError naming the supported ones otherwise."""
    try:
        return CODES[dtype]  # an array's dtype: no conversion needed
    except (KeyError, TypeError):
        pass
    try:
        return CODES[np.dtype(dtype)]
    except (KeyError, TypeError):
        names = ", ".join(sorted(str(d) for d in CODES))
        order = ""
        if isinstance(dtype, np.dtype) and not dtype.isnative and dtype.newbyteorder("=") in CODES:
            order = f" (only in this machine's byte order: convert with .astype({str(dtype.newbyteorder('='))!r}))"
        raise TypeError(f"{what}: unsupported dtype {dtype}{order}; supported: {names}") from None
