"""The part of CuPy the GPU rank tests use, on the simulated CUDA device (engine/sim).

The simulator keeps "device" memory in host memory and runs each stream's work on a thread of
its own, so this module can compute on device arrays with numpy inside stream callbacks
(cudaLaunchHostFunc): work stays asynchronous and ordered exactly as on a GPU, which is what the
engine's stream handling is tested against. It drives the simulator only through the CUDA runtime
API, loaded from JUPYTER_HVD_CUDART_LIB, the same library the engine loads. Results the engine
allocates come back through ``from_dlpack``, as for any producer that is not CuPy.
"""
import ctypes
import itertools
import os
import threading
import time
import traceback
from typing import Any, Optional

import numpy as np

from jupyter_hvd.gpu import _c_strides

_rt = ctypes.CDLL(os.environ["JUPYTER_HVD_CUDART_LIB"])
_HOST_TO_DEVICE, _DEVICE_TO_HOST, _DEVICE_TO_DEVICE = 1, 2, 3
_LEGACY_STREAM = 1  # the default stream, as __cuda_array_interface__ numbers it

float16, float32, float64 = np.float16, np.float32, np.float64
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, complex64, bool_ = np.uint8, np.complex64, np.bool_


class CUDARuntimeError(RuntimeError):
    pass


_rt.cudaGetErrorName.restype = ctypes.c_char_p


def _check(err: int, what: str) -> None:
    if err:
        raise CUDARuntimeError(f"{what}: {_rt.cudaGetErrorName(err).decode()} ({err})")


# Stream callbacks: one C trampoline runs the Python function queued under its key.
_HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_callbacks: dict = {}
_keys = itertools.count(1)
_callback_errors: list = []


@_HOST_FN
def _trampoline(key):
    fn = _callbacks.pop(key)
    try:
        fn()
    except BaseException:  # a stream callback cannot raise: report it at the next synchronisation
        _callback_errors.append(traceback.format_exc())


def _launch(fn) -> None:
    key = next(_keys)
    _callbacks[key] = fn
    _check(_rt.cudaLaunchHostFunc(ctypes.c_void_p(_current_stream().handle), _trampoline, ctypes.c_void_p(key)),
           "cudaLaunchHostFunc")


def _synchronize(stream: "cuda.Stream") -> None:
    _check(_rt.cudaStreamSynchronize(ctypes.c_void_p(stream.handle)), "cudaStreamSynchronize")
    if _callback_errors:
        raise CUDARuntimeError("a stream callback failed:\n" + _callback_errors.pop(0))


class _Memory:
    """A cudaMalloc allocation; the simulator's cudaFree waits for the work queued before it, without blocking."""

    def __init__(self, nbytes: int):
        self.ptr = ctypes.c_void_p()
        if nbytes:
            _check(_rt.cudaMalloc(ctypes.byref(self.ptr), ctypes.c_size_t(nbytes)), f"cudaMalloc({nbytes})")

    def __del__(self):
        if self.ptr.value:
            _rt.cudaFree(self.ptr)


def _current_device() -> int:
    d = ctypes.c_int()
    _check(_rt.cudaGetDevice(ctypes.byref(d)), "cudaGetDevice")
    return d.value


class ndarray:
    """A device array: memory owner, address of element 0, shape, dtype, byte strides (None: C order)."""

    def __init__(self, shape, dtype, owner: Any, ptr: int, device: int, strides: Optional[tuple] = None):
        self.shape, self.dtype = tuple(int(d) for d in shape), np.dtype(dtype)
        self._owner, self.ptr, self.device_id, self._strides = owner, ptr, device, strides

    size = property(lambda self: int(np.prod(self.shape, dtype=np.int64)))
    ndim = property(lambda self: len(self.shape))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def __repr__(self) -> str:
        return f"simcupy.ndarray(cuda:{self.device_id}, shape={self.shape}, dtype={self.dtype})"

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def __cuda_array_interface__(self) -> dict:
        stream = _current_stream().handle or _LEGACY_STREAM
        return {"shape": self.shape, "typestr": self.dtype.str, "descr": [("", self.dtype.str)],
                "data": (self.ptr, False), "version": 3, "strides": self._strides, "stream": stream}

    def __dlpack_device__(self) -> tuple:
        return 2, self.device_id

    def __dlpack__(self, stream=None):
        """A DLPack capsule of this array (no max_version: the legacy, unversioned capsule)."""
        if self._strides is not None:
            raise BufferError("simcupy exports only C-contiguous arrays")
        _synchronize(_current_stream())  # ready on every stream, the consumer's included
        return _export(self)

    def _host(self) -> np.ndarray:
        """The memory as numpy sees it; only stream callbacks may touch it (the simulator's memory is host memory)."""
        if not self.size:
            return np.empty(self.shape, self.dtype)
        strides = self._strides or _c_strides(self.shape, self.dtype.itemsize)
        span = sum((d - 1) * s for d, s in zip(self.shape, strides)) + self.dtype.itemsize
        buf = (ctypes.c_char * span).from_address(self.ptr)
        return np.ndarray(self.shape, self.dtype, buffer=buf, strides=strides)

    def __getitem__(self, index) -> "ndarray":
        view = self._host()[index]  # only the view's layout is used, never its data
        ptr = view.__array_interface__["data"][0] if view.size else self.ptr
        contiguous = view.flags.c_contiguous
        return ndarray(view.shape, view.dtype, self, ptr, self.device_id, None if contiguous else view.strides)

    def copy(self) -> "ndarray":
        out = empty(self.shape, self.dtype)
        if self._strides is None:
            if self.nbytes:
                _check(_rt.cudaMemcpyAsync(ctypes.c_void_p(out.ptr), ctypes.c_void_p(self.ptr),
                                           ctypes.c_size_t(self.nbytes), _DEVICE_TO_DEVICE,
                                           ctypes.c_void_p(_current_stream().handle)), "cudaMemcpyAsync")
        else:
            _launch(lambda: np.copyto(out._host(), self._host()))
        return out

    def _apply(self, fn, shape, dtype) -> "ndarray":
        out = empty(shape, dtype)
        _launch(lambda: np.copyto(out._host(), fn()))
        return out

    def _binary(self, other, ufunc, reflected=False) -> "ndarray":
        probe_other = np.zeros(1, other.dtype) if isinstance(other, ndarray) else other
        dtype = ufunc(np.zeros(1, self.dtype), probe_other).dtype
        shape = np.broadcast_shapes(self.shape, other.shape if isinstance(other, ndarray) else ())

        def compute():
            b = other._host() if isinstance(other, ndarray) else other
            return ufunc(b, self._host()) if reflected else ufunc(self._host(), b)
        return self._apply(compute, shape, dtype)

    __add__ = lambda self, o: self._binary(o, np.add)
    __radd__ = lambda self, o: self._binary(o, np.add, True)
    __sub__ = lambda self, o: self._binary(o, np.subtract)
    __mul__ = lambda self, o: self._binary(o, np.multiply)
    __rmul__ = lambda self, o: self._binary(o, np.multiply, True)
    __truediv__ = lambda self, o: self._binary(o, np.true_divide)

    def __matmul__(self, other: "ndarray") -> "ndarray":
        shape = (self.shape[0], other.shape[1])
        return self._apply(lambda: self._host() @ other._host(), shape, np.result_type(self.dtype, other.dtype))

    def sum(self) -> "ndarray":
        return self._apply(lambda: self._host().sum(), (), np.zeros(1, self.dtype).sum().dtype)

    def __float__(self) -> float:
        return float(asnumpy(self))


def busy(seconds: float) -> None:
    """Keeps the current stream busy for ``seconds``: the simulator's stand-in for a long kernel."""
    _launch(lambda: time.sleep(seconds))


def empty(shape, dtype=np.float64) -> ndarray:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    dtype = np.dtype(dtype)
    mem = _Memory(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
    return ndarray(shape, dtype, mem, mem.ptr.value or 0, _current_device())


def full(shape, value, dtype=np.float64) -> ndarray:
    out = empty(shape, dtype)
    _launch(lambda: out._host().fill(value))
    return out


def ones(shape, dtype=np.float64) -> ndarray:
    return full(shape, 1, dtype)


def zeros(shape, dtype=np.float64) -> ndarray:
    return full(shape, 0, dtype)


def asarray(x: Any) -> ndarray:
    if isinstance(x, ndarray):
        return x
    host = np.ascontiguousarray(x)
    out = empty(host.shape, host.dtype)
    if host.nbytes:
        stream = _current_stream()
        _check(_rt.cudaMemcpyAsync(ctypes.c_void_p(out.ptr), ctypes.c_void_p(host.ctypes.data),
                                   ctypes.c_size_t(host.nbytes), _HOST_TO_DEVICE, ctypes.c_void_p(stream.handle)),
               "cudaMemcpyAsync")
        _synchronize(stream)  # the host buffer must outlive the copy
    return out


def asnumpy(x: ndarray) -> np.ndarray:
    if x._strides is not None:
        x = x.copy()
    host = np.empty(x.shape, x.dtype)
    stream = _current_stream()
    if host.nbytes:
        _check(_rt.cudaMemcpyAsync(ctypes.c_void_p(host.ctypes.data), ctypes.c_void_p(x.ptr),
                                   ctypes.c_size_t(host.nbytes), _DEVICE_TO_HOST, ctypes.c_void_p(stream.handle)),
               "cudaMemcpyAsync")
    _synchronize(stream)
    return host


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


_DL_KINDS = {0: "i", 1: "u", 2: "f", 6: "b"}
_DL_CODES = {kind: code for code, kind in _DL_KINDS.items()}
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


_exported: dict = {}  # a DLManagedTensor's address -> what it and its array need kept alive


@_DELETER
def _release(address):
    _exported.pop(address, None)


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


def _export(a: ndarray):
    shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
    code = _DL_CODES[a.dtype.kind]
    m = _DLManagedTensor(_DLTensor(a.ptr or None, _DLDevice(2, a.device_id), a.ndim,
                                   _DLDataType(code, a.dtype.itemsize * 8, 1), shape, None, 0), None, _release)
    _exported[ctypes.addressof(m)] = (m, shape, a)
    return _capsule_new(ctypes.addressof(m), b"dltensor", None)  # the consumer calls the deleter


def from_dlpack(obj: Any) -> ndarray:
    """A device array over a CUDA DLPack tensor, without a copy (the capsule keeps it alive)."""
    capsule = obj.__dlpack__()
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    t = _DLTensor.from_address(get(capsule, b"dltensor"))
    if t.device.device_type != 2:
        raise TypeError(f"from_dlpack: not a CUDA tensor (device type {t.device.device_type})")
    dtype = np.dtype("?" if t.dtype.code == 6 else f"{_DL_KINDS[t.dtype.code]}{t.dtype.bits // 8}")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] * dtype.itemsize for i in range(t.ndim)) if t.strides else None
    if strides == _c_strides(shape, dtype.itemsize):
        strides = None
    return ndarray(shape, dtype, (obj, capsule), (t.data or 0) + t.byte_offset, t.device.device_id, strides)


class cuda:
    """cupy.cuda: devices, streams and the runtime's device count."""

    class runtime:
        @staticmethod
        def getDeviceCount() -> int:
            n = ctypes.c_int()
            _check(_rt.cudaGetDeviceCount(ctypes.byref(n)), "cudaGetDeviceCount")
            return n.value

    class Device:
        def __init__(self, device: Optional[int] = None):
            self.id = _current_device() if device is None else int(device)
            self._previous: list = []

        def use(self) -> None:
            _check(_rt.cudaSetDevice(self.id), f"cudaSetDevice({self.id})")

        def __enter__(self):
            self._previous.append(_current_device())
            self.use()
            return self

        def __exit__(self, *exc):
            _check(_rt.cudaSetDevice(self._previous.pop()), "cudaSetDevice")

    class Stream:
        """A stream of the current device; ``with stream:`` makes it this thread's current one."""

        def __init__(self, non_blocking: bool = False, null: bool = False):
            self._handle = ctypes.c_void_p()
            if not null:
                _check(_rt.cudaStreamCreateWithFlags(ctypes.byref(self._handle), 1 if non_blocking else 0),
                       "cudaStreamCreateWithFlags")

        handle = property(lambda self: self._handle.value or 0)
        ptr = handle

        def synchronize(self) -> None:
            _synchronize(self)

        def __enter__(self):
            _streams.stack = getattr(_streams, "stack", []) + [self]
            return self

        def __exit__(self, *exc):
            _streams.stack = _streams.stack[:-1]


_streams = threading.local()
_NULL_STREAM = cuda.Stream(null=True)


def _current_stream() -> "cuda.Stream":
    stack = getattr(_streams, "stack", None)
    return stack[-1] if stack else _NULL_STREAM
