"""GPU tensors: finding CUDA and NCCL at run time, and describing device tensors for the engine.

Nothing here imports a GPU framework or needs a GPU: the CUDA runtime and NCCL are loaded
(dlopen) on first use, from the nvidia-cuda-runtime / nvidia-nccl wheels next to this package or
from the system, so the same build serves CPU and GPU hosts. JUPYTER_HVD_CUDART_LIB,
JUPYTER_HVD_NCCL_LIB and JUPYTER_HVD_CUDA_DRIVER_LIB (a file or a folder) override where each
library is looked for.
"""
import importlib.util
import math
import os
import sys
from typing import Any, Optional

import numpy as np

from . import _C

# DLPack device types that are CUDA memory the engine can hand to NCCL.
KDL_CUDA, KDL_CUDA_MANAGED = 2, 13
# DLPack type codes.
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT, _DL_BOOL = 0, 1, 2, 4, 6

_status: Optional[dict] = None


class GpuUnavailableError(RuntimeError):
    """A GPU tensor was passed, but CUDA cannot be used in this process (the message says why)."""


def _wheel_lib_dirs(*subdirs: str) -> list:
    """``nvidia/<sub>/lib`` folders of the nvidia-* wheels installed next to this package."""
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        return []
    roots = list(spec.submodule_search_locations or []) if spec else []
    return [d for r in roots for s in subdirs if os.path.isdir(d := os.path.join(r, s, "lib"))]


def _version(code: int, nccl: bool) -> Optional[str]:
    """12090 -> '12.9' (CUDA); 22703 -> '2.27.3' (NCCL 2.9+; older NCCL counted 1000 per major)."""
    if not code:
        return None
    if not nccl:
        return f"{code // 1000}.{code % 1000 // 10}"
    if code >= 20900:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _load() -> dict:
    """Load the libraries on first use; later calls answer from that first attempt."""
    global _status
    if _status is None:
        _status = _C.gpu_load(_wheel_lib_dirs("cuda_runtime", "cu13"), _wheel_lib_dirs("nccl", "cu13"))
    return _status


def gpu_status() -> dict:
    """What this process can do on GPUs, and why not: libraries found, versions, devices.

    Keys: ``cuda_available`` and ``nccl_available`` (what cuda_built() and nccl_built() answer),
    ``reason`` (why not, empty when both are available), ``cuda_runtime`` and ``nccl`` (each
    ``loaded``, ``library``, ``version``, ``error``), ``driver`` (newest CUDA the driver supports,
    None without one), ``device_count``, ``device_error`` and ``copy_kernel``: how the engine's
    batched copy kernel for the device fusion buffer fared, "" until an engine first used a GPU,
    then "loaded" or why it could not be (the runtime's copies are used instead).
    """
    s = _load()
    cuda, nccl = s["cuda"], s["nccl"]
    reasons = []
    if not cuda["loaded"]:
        reasons.append(cuda["error"])
    elif not s["device_count"]:
        reasons.append(s["device_error"])
    if not nccl["loaded"]:
        reasons.append(nccl["error"])
    return {
        "cuda_available": bool(s["cuda_available"]),
        "nccl_available": bool(s["nccl_available"]),
        "reason": "; ".join(reasons),
        "cuda_runtime": {"loaded": cuda["loaded"], "library": cuda["library"],
                         "version": _version(cuda["version_code"], False), "error": cuda["error"]},
        "nccl": {"loaded": nccl["loaded"], "library": nccl["library"],
                 "version": _version(nccl["version_code"], True), "error": nccl["error"]},
        "driver": _version(s["driver_version_code"], False),
        "device_count": s["device_count"],
        "device_error": s["device_error"],
        "copy_kernel": _C.copy_kernel_status(),  # not cached: set when an engine first uses a GPU
    }


def cuda_available() -> bool:
    """True when the CUDA runtime loads and at least one device is visible."""
    return bool(_load()["cuda_available"])


def nccl_available() -> bool:
    """True when NCCL loads as well and a device is visible (NCCL collectives can run)."""
    return bool(_load()["nccl_available"])


def use_device(index: int) -> None:
    """Make CUDA device ``index`` this thread's current device, as ``cupy.cuda.Device(index).use()`` does;
    CuPy arrays made afterwards on this thread live there."""
    _load()
    _C.gpu_set_device(int(index))


def _c_strides(shape: tuple, itemsize: int) -> tuple:
    strides, step = [], itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))


def _dl_dtype(code: int, bits: int, lanes: int, what: str) -> np.dtype:
    kinds = {_DL_INT: "i", _DL_UINT: "u", _DL_FLOAT: "f", _DL_BOOL: "b"}
    if lanes == 1 and code in kinds:
        return np.dtype("?" if code == _DL_BOOL else f"{kinds[code]}{bits // 8}")
    if lanes == 1 and code == _DL_BFLOAT and bits == 16:
        try:
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        except ImportError:
            raise TypeError(f"{what}: bfloat16 tensors need the ml_dtypes package") from None
    raise TypeError(f"{what}: unsupported DLPack dtype (code {code}, {bits} bits, {lanes} lanes)")


def _dl_code(dtype: np.dtype) -> tuple:
    """The DLPack (type code, bits) of a numpy dtype."""
    if dtype == np.bool_:
        return _DL_BOOL, 8
    if dtype.name == "bfloat16":
        return _DL_BFLOAT, 16
    return {"i": _DL_INT, "u": _DL_UINT, "f": _DL_FLOAT}[dtype.kind], dtype.itemsize * 8


class DeviceArray:
    """A contiguous tensor in CUDA memory, as the engine needs it: address, shape, dtype, device,
    and the stream its producer wrote it on (None: already ready)."""

    def __init__(self, source: Any, ptr: int, shape: tuple, dtype: np.dtype, device: int, stream: Optional[int]):
        self.source, self.ptr, self.shape, self.dtype = source, ptr, shape, dtype
        self.device, self.stream = device, stream
        self.ndim = len(shape)
        self.size = math.prod(shape)

    def __repr__(self) -> str:
        return f"DeviceArray(cuda:{self.device}, shape={self.shape}, dtype={self.dtype})"

    def _is_cupy(self) -> bool:
        return type(self.source).__module__.split(".")[0] == "cupy"

    def empty_like(self) -> Optional["DeviceArray"]:
        """A new CuPy array shaped like this one, from CuPy's memory pool; None for other producers
        (the engine then allocates the result itself)."""
        if not self._is_cupy():
            return None
        import cupy

        with cupy.cuda.Device(self.device):
            out = cupy.empty(self.shape, self.dtype)
        return DeviceArray(out, out.data.ptr if out.size else 0, self.shape, self.dtype, self.device, None)

    def wrap_output(self, native: Any) -> Any:
        """The engine-allocated device result of ``native``, as the same kind of tensor as the input."""
        ptr, nbytes, device = _C.device_output(native)
        shape = tuple(native.output_shape)
        if self._is_cupy():
            import cupy

            with cupy.cuda.Device(device):
                if not nbytes:
                    return cupy.empty(shape, self.dtype)
                mem = cupy.cuda.UnownedMemory(ptr, nbytes, native, device)
                return cupy.ndarray(shape, self.dtype, cupy.cuda.MemoryPointer(mem, 0))
        code, bits = _dl_code(self.dtype)
        module = sys.modules.get(type(self.source).__module__.split(".")[0])
        from_dlpack = getattr(module, "from_dlpack", None)
        if from_dlpack is None:
            raise TypeError(f"cannot build a result like {type(self.source).__name__}: its module has no from_dlpack")
        return from_dlpack(_C.device_output_dlpack(native, code, bits))


_TYPESTR_DTYPES: dict = {}  # __cuda_array_interface__ typestr -> numpy dtype, as met


def _from_cai(tensor: Any, cai: dict, what: str) -> DeviceArray:
    shape = tuple(map(int, cai["shape"]))
    typestr = cai["typestr"]
    dtype = _TYPESTR_DTYPES.get(typestr)
    if dtype is None:
        dtype = _TYPESTR_DTYPES.setdefault(typestr, np.dtype(typestr))
    if cai.get("mask") is not None:
        raise ValueError(f"{what}: masked CUDA arrays are not supported")
    strides = cai.get("strides")
    if strides is not None and math.prod(shape) > 1 and tuple(strides) != _c_strides(shape, dtype.itemsize):
        raise ValueError(f"{what}: the tensor must be C-contiguous (use cupy.ascontiguousarray)")
    try:
        device = int(tensor.__dlpack_device__()[1])
    except Exception:  # producers without DLPack: ask the tensor, else the current device
        dev = getattr(tensor, "device", None)
        device = int(getattr(dev, "id", getattr(dev, "index", 0)) or 0)
    stream = cai.get("stream") if cai.get("version", 0) >= 3 else 1
    return DeviceArray(tensor, int(cai["data"][0]), shape, dtype, device, None if stream is None else int(stream))


def _from_dlpack(tensor: Any, what: str) -> DeviceArray:
    ptr, shape, strides, (code, bits, lanes), (_, device) = _C.dlpack_info(tensor)
    shape = tuple(shape)
    dtype = _dl_dtype(code, bits, lanes, what)
    if math.prod(shape) > 1 and tuple(s * dtype.itemsize for s in strides) != _c_strides(shape, dtype.itemsize):
        raise ValueError(f"{what}: the tensor must be C-contiguous")
    # __dlpack__() without a stream makes the data ready on the legacy default stream (DLPack's rule).
    return DeviceArray(tensor, ptr, shape, dtype, device, 1)


def device_array(tensor: Any, what: str) -> Optional[DeviceArray]:
    """A DeviceArray for a CUDA tensor (CuPy, or anything with __cuda_array_interface__ or a CUDA
    DLPack device); None for host tensors. GpuUnavailableError when CUDA cannot be used here."""
    if isinstance(tensor, DeviceArray):
        return tensor
    try:
        cai = tensor.__cuda_array_interface__
    except (AttributeError, TypeError):  # TypeError: e.g. a dtype the interface cannot describe
        cai = None
    if cai is None:
        dl_device = getattr(tensor, "__dlpack_device__", None)
        if dl_device is None:
            return None
        try:
            dev_type = int(dl_device()[0])
        except Exception:
            return None
        if dev_type not in (KDL_CUDA, KDL_CUDA_MANAGED):
            return None
    if not cuda_available():
        raise GpuUnavailableError(f"{what}: the tensor is on a CUDA device, but jupyter_hvd cannot use CUDA in this "
                                  f"process: {gpu_status()['reason']}")
    return _from_cai(tensor, cai, what) if cai is not None else _from_dlpack(tensor, what)
