"""torch tensors as the engine reads them, and its results as torch tensors, without copies.

A CPU tensor reaches the engine as itself (the engine reads its data pointer: torch.Tensor is registered
with _C below) or, for the ops that take numpy arrays, as a numpy view of its own memory; a CUDA tensor as
a DeviceArray (its address) with torch's current stream on its device, so the engine starts after the
work queued there so far. Results the engine allocates come back as tensors over the same memory.
"""
from typing import Any, Sequence, Union

import numpy as np
import torch

from .. import _C
from ..dtypes import CODES
from ..gpu import DeviceArray, GpuUnavailableError, cuda_available, gpu_status
from ..other_framework import other_framework_hint

EngineArray = Union[np.ndarray, DeviceArray]

# Every engine dtype torch has, by name, as numpy names it (bfloat16 through ml_dtypes, where installed).
_DTYPES = {dt: d for d in CODES if isinstance(dt := getattr(torch, d.name, None), torch.dtype)}
_BF16 = _DTYPES.get(torch.bfloat16)


def check_tensors(tensors: Sequence[Any], what: str) -> None:
    """TypeError unless every item is a torch tensor (Horovod's ops take nothing else)."""
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{what}: expected a torch.Tensor, got {type(t).__name__}"
                            f"{other_framework_hint(t, __package__)}")


def _numpy_dtype(t: torch.Tensor, what: str) -> np.dtype:
    """The numpy dtype of the engine's type for ``t``; TypeError for types the engine does not reduce."""
    try:
        return _DTYPES[t.dtype]
    except KeyError:
        hint = " (install ml_dtypes for bfloat16)" if t.dtype == torch.bfloat16 else ""
        names = ", ".join(str(d) for d in _DTYPES)
        raise TypeError(f"{what}: unsupported dtype {t.dtype}{hint}; supported: {names}") from None


# The engine reads CPU tensors itself (submit.cc): each torch dtype's engine code, and the TypeError for the rest.
_C.add_host_tensor_type(torch.Tensor, {t: CODES[d] for t, d in _DTYPES.items()},
                        lambda dtype, what: _numpy_dtype(torch.empty(0, dtype=dtype), what))


def engine_tensor(t: torch.Tensor, what: str, in_place: bool = False) -> Union[torch.Tensor, DeviceArray]:
    """``t`` as the engine reads it: a contiguous CPU tensor itself, or a CUDA tensor as a DeviceArray. A
    tensor written in place must be contiguous (ValueError otherwise); one that is only read is made
    contiguous first when it is not. The engine refuses a dtype it lacks (TypeError)."""
    if t.is_sparse:
        raise TypeError(f"{what}: sparse tensors are not supported here; use sparse_allreduce_async or to_dense()")
    if not t.is_contiguous():
        if in_place:
            raise ValueError(f"{what}: Tensor is required to be contiguous.")
        t = t.contiguous()
    if t.is_cuda:
        return _device_array(t, what)
    if not t.is_cpu:  # the property: reading t.device builds an object on every call
        raise TypeError(f"{what}: tensors on {t.device.type} are not supported; use CPU or CUDA tensors")
    return t


def engine_array(t: torch.Tensor, what: str, in_place: bool = False) -> EngineArray:
    """As engine_tensor, with a CPU tensor as a numpy view of its memory, for the ops that take arrays."""
    t = engine_tensor(t, what, in_place)
    if isinstance(t, DeviceArray):
        return t
    if t.requires_grad:  # numpy() refuses it; detaching costs a new tensor object, so only where needed
        t = t.detach()
    if _numpy_dtype(t, what) is _BF16:
        return t.view(torch.int16).numpy().view(_BF16)
    return t.numpy()


def _device_array(t: torch.Tensor, what: str) -> DeviceArray:
    if not cuda_available():
        raise GpuUnavailableError(f"{what}: the tensor is on {t.device}, but jupyter_hvd cannot use CUDA in this "
                                  f"process: {gpu_status()['reason']}")
    device = t.get_device()  # an int; t.device builds an object on every call
    return DeviceArray(t, t.data_ptr() if t.numel() else 0, tuple(t.shape), _numpy_dtype(t, what), device,
                       _current_stream(device))


# torch's current stream of a device as its address: torch's own lookup, without building a Stream object (0.2 us
# against 3.6 us on an H200), where this torch has it.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def _current_stream(device: int) -> int:
    if _raw_stream is not None:
        return _raw_stream(device)
    return torch.cuda.current_stream(device).cuda_stream


def new_output(t: torch.Tensor) -> torch.Tensor:
    """A new contiguous CPU tensor like ``t`` (a contiguous CPU tensor) for the engine to write a result into;
    a large one on huge pages, as the engine's own results (engine/src/memory_advice.h)."""
    out = torch.empty_like(t)
    if out.nbytes >= _C.HUGE_PAGES_FROM:
        _C.advise_huge_pages(out.data_ptr(), out.nbytes)
    return out


def to_torch(result: Any, like: torch.Tensor) -> torch.Tensor:
    """An engine result (numpy array, or a CUDA tensor) as a tensor of ``like``'s dtype, without a copy."""
    if isinstance(result, torch.Tensor):
        return result
    if like.dtype == torch.bfloat16:
        return torch.from_numpy(result.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(result)
