"""The native bridge into MXNet's dependency engine, wired to the loaded libmxnet once at import."""
import ctypes
import os
from typing import List, Sequence

import mxnet as mx
from mxnet.base import MXNetError, check_call

from .. import _C
from ..basics import NO_MXNET_BRIDGE
from .errors import CLASS_NAMES

if not hasattr(_C, "mxnet_push"):
    raise ImportError(NO_MXNET_BRIDGE)


def _address(symbol: str) -> int:
    """The address of one of libmxnet's C API functions."""
    return ctypes.cast(getattr(mx.base._LIB, symbol), ctypes.c_void_p).value


_C.mxnet_setup(_address("MXEnginePushAsyncND"), _address("MXNDArrayToDLPack"), _address("MXShallowCopyNDArray"),
               _address("MXNDArrayFree"), _address("MXGetLastError"), _address("MXNDArrayCreateEx"),
               _address("MXNDArrayGetShapeEx"), _address("MXNDArrayGetDType"), _address("MXNDArrayGetContext"),
               CLASS_NAMES)

# MXNet's NaiveEngine runs every push inline and cannot complete one later from another thread.
_NAIVE_ENGINE = os.environ.get("MXNET_ENGINE_TYPE", "") == "NaiveEngine"


def push(spec: _C.OpSpec, names: Sequence[str], tensors: Sequence[mx.nd.NDArray], priority: int = 0,
         out_of_place: bool = False) -> List[mx.nd.NDArray]:
    """Queue one MXNet engine operation that runs ``spec`` on every tensor, then returns at once: in place
    (returns []), or ``out_of_place`` into new NDArrays of the tensors' shapes and dtypes, which it returns.

    The tensors it writes become mutable dependencies of the operation, those it only reads const ones:
    MXNet starts it after their pending writers (and the written ones' readers), and later readers of what
    it writes wait for it (and raise its error as an MXNetError: see errors.py).
    """
    if _NAIVE_ENGINE:
        raise MXNetError("jupyter_hvd.mxnet needs MXNet's threaded engine; unset MXNET_ENGINE_TYPE=NaiveEngine")
    try:
        made = _C.mxnet_push(spec, list(names), [t.handle.value for t in tensors], out_of_place, int(priority))
    except RuntimeError as e:
        raise MXNetError(str(e)) from e
    return [mx.nd.NDArray(ctypes.c_void_p(h)) for h in made]


def to_default_layout(tensor: mx.nd.NDArray) -> None:
    """Wait for ``tensor``'s writers and move it out of any MKLDNN-internal layout (as weights are after an
    inference pass), which in-place collectives cannot read. Blocking: for one-off uses like broadcasts."""
    tensor.wait_to_read()
    check_call(mx.base._LIB.MXNDArrayGetData(tensor.handle, ctypes.byref(ctypes.c_void_p())))
