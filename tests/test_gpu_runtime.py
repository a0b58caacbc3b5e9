"""Loading CUDA and NCCL at run time, and what device tensors do without a GPU: runs everywhere.

The parts that need the nvidia-cuda-runtime / nvidia-nccl wheels skip when they are absent; the
parts that assume no usable GPU skip on a GPU host (tests/test_gpu.py covers that one).
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jupyter_hvd as hvd
from jupyter_hvd import _C, gpu

ROOT = Path(__file__).resolve().parent.parent


def _wheel(sub: str, lib: str) -> Path | None:
    """The file ``lib`` in an installed nvidia-* wheel's ``nvidia/<sub>/lib``, if there is one."""
    for d in gpu._wheel_lib_dirs(sub):
        if (Path(d) / lib).exists():
            return Path(d) / lib
    return None


CUDART = _wheel("cuda_runtime", "libcudart.so.12") or _wheel("cu13", "libcudart.so.13")
NCCL = _wheel("nccl", "libnccl.so.2")
needs_wheels = pytest.mark.skipif(CUDART is None or NCCL is None,
                                  reason="nvidia-cuda-runtime-cu12 / nvidia-nccl-cu12 wheels not installed")


def status_in_subprocess(**env: str) -> dict:
    """gpu_status() of a fresh interpreter (the libraries load once per process)."""
    code = "import json, jupyter_hvd as hvd; print(json.dumps(hvd.gpu_status()))"
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env), capture_output=True, text=True,
                         timeout=120, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def no_usable_gpu() -> bool:
    return not hvd.gpu_status()["cuda_available"]


class FakeCudaArray:
    """Looks like a CUDA tensor through __cuda_array_interface__; its memory is never touched."""

    def __init__(self, shape=(4,), typestr="<f4", stream=None):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (0x7F0000000000, False),
                                         "version": 3, "strides": None, "stream": stream}


class FakeDLPackDevice:
    """Looks like a tensor on cuda:0 through DLPack's device query."""

    def __dlpack_device__(self):
        return (gpu.KDL_CUDA, 0)

    def __dlpack__(self, **kwargs):  # pragma: no cover - the device check comes first
        raise AssertionError("the engine must not read a CUDA tensor it cannot use")


def test_status_shape_and_flags_agree():
    s = hvd.gpu_status()
    assert set(s) >= {"cuda_available", "nccl_available", "reason", "cuda_runtime", "nccl", "driver",
                      "device_count", "device_error"}
    assert hvd.cuda_built() is s["cuda_available"] and hvd.nccl_built() is s["nccl_available"]
    assert hvd.nccl_built() <= hvd.cuda_built()  # NCCL needs a device too
    assert (s["reason"] == "") == (s["cuda_available"] and s["nccl"]["loaded"])
    for lib in ("cuda_runtime", "nccl"):
        assert set(s[lib]) == {"loaded", "library", "version", "error"}
        assert bool(s[lib]["error"]) != s[lib]["loaded"]


def test_mxnet_frontend_answers_the_same():
    mx_hvd = pytest.importorskip("jupyter_hvd.mxnet")
    assert mx_hvd.nccl_built() is hvd.nccl_built() and mx_hvd.cuda_built() is hvd.cuda_built()


def test_version_strings():
    assert gpu._version(12090, nccl=False) == "12.9" and gpu._version(13000, nccl=False) == "13.0"
    assert gpu._version(22703, nccl=True) == "2.27.3" and gpu._version(2804, nccl=True) == "2.8.4"
    assert gpu._version(0, nccl=False) is None


def test_overrides_that_point_nowhere_are_reported():
    s = status_in_subprocess(JUPYTER_HVD_CUDART_LIB="/nonexistent/libcudart.so.12",
                             JUPYTER_HVD_NCCL_LIB="/nonexistent/nccl-dir")
    assert not s["cuda_available"] and not s["nccl_available"]
    assert "libcudart not found at JUPYTER_HVD_CUDART_LIB=/nonexistent/libcudart.so.12" in s["cuda_runtime"]["error"]
    assert "libnccl not found at JUPYTER_HVD_NCCL_LIB=/nonexistent/nccl-dir" in s["nccl"]["error"]
    assert s["cuda_runtime"]["error"] in s["reason"] and s["nccl"]["error"] in s["reason"]


def test_a_library_without_the_symbols_is_not_taken_for_cuda():
    s = status_in_subprocess(JUPYTER_HVD_CUDART_LIB="libm.so.6", JUPYTER_HVD_NCCL_LIB="libm.so.6")
    assert "lacks symbols: cudaRuntimeGetVersion" in s["cuda_runtime"]["error"]
    assert "lacks symbols: ncclGetVersion" in s["nccl"]["error"]


@needs_wheels
def test_wheels_are_found_and_their_versions_read():
    s = status_in_subprocess()
    assert s["cuda_runtime"]["loaded"] and s["nccl"]["loaded"], s
    assert Path(s["cuda_runtime"]["library"]).resolve() == CUDART.resolve()
    assert Path(s["nccl"]["library"]).resolve() == NCCL.resolve()
    assert re.fullmatch(r"1[1-9]\.\d+", s["cuda_runtime"]["version"])
    assert re.fullmatch(r"2\.\d+\.\d+", s["nccl"]["version"])
    if s["device_count"] == 0:  # a CPU host: the reason names the missing driver or device
        assert not s["cuda_available"] and not s["nccl_available"]
        assert re.match(r"(no CUDA driver/device|CUDA driver too old|no CUDA device visible)", s["device_error"])
        assert s["reason"] == s["device_error"]
    else:
        assert s["cuda_available"] and s["nccl_available"] and s["driver"]


@needs_wheels
def test_override_by_folder_finds_the_library():
    s = status_in_subprocess(JUPYTER_HVD_NCCL_LIB=str(NCCL.parent), JUPYTER_HVD_CUDART_LIB=str(CUDART))
    assert s["nccl"]["loaded"] and s["cuda_runtime"]["loaded"]


@needs_wheels
def test_declared_constants_match_the_real_headers():
    """engine/src/gpu declares the CUDA and NCCL values it uses; the wheels' headers must agree."""
    ours = (ROOT / "engine/src/gpu/nccl_api.h").read_text() + (ROOT / "engine/src/gpu/cuda_api.h").read_text()
    declared = dict(re.findall(r"\b((?:nccl|cuda)[A-Z][A-Za-z0-9]*) = (0x[0-9a-f]+|\d+)", ours))
    headers = [NCCL.parent.parent / "include/nccl.h", CUDART.parent.parent / "include/driver_types.h"]
    if not all(h.exists() for h in headers):
        pytest.skip("the wheels carry no headers")
    real_text = "".join(h.read_text() for h in headers)
    real = dict(re.findall(r"\b((?:nccl|cuda)[A-Z][A-Za-z0-9]*)\s*=\s*(0x[0-9a-fA-F]+|\d+)", real_text))
    real.update(re.findall(r"#define\s+((?:nccl|cuda)[A-Z][A-Za-z0-9]*)\s+(0x[0-9a-fA-F]+|\d+)", real_text))
    assert len(declared) > 20
    for name, value in declared.items():
        assert name in real, name
        assert int(real[name], 0) == int(value, 0), name


def _wheel_include_dirs() -> list:
    """(CUDA runtime include folder, NCCL include folder) of each runtime wheel, when both carry headers."""
    nccl = [Path(d).parent / "include" for d in gpu._wheel_lib_dirs("nccl")]
    nccl = [d for d in nccl if (d / "nccl.h").exists()]
    cuda = [Path(d).parent / "include" for d in gpu._wheel_lib_dirs("cuda_runtime", "cu13")]
    return [(c, nccl[0]) for c in cuda if (c / "cuda_runtime_api.h").exists()] if nccl else []


@pytest.mark.skipif(not _wheel_include_dirs(), reason="no nvidia-cuda-runtime / nvidia-nccl wheels with headers")
def test_declared_calls_and_structs_match_the_real_headers(tmp_path):
    """Every CUDA runtime, CUDA driver and NCCL call in the engine's tables takes the arguments the real
    headers declare (count and sizes), and the structs it passes have the real layout (tests/gpu_abi)."""
    calls = []
    for header, table in (("cuda_api.h", "CudaApi"), ("driver_api.h", "DriverApi"), ("nccl_api.h", "NcclApi")):
        text = (ROOT / "engine/src/gpu" / header).read_text()
        body = text[text.index(f"struct {table} {{"):]
        calls += [f"SAME({table}, {name})" for name in re.findall(r"\(\*((?:cuda|cu|nccl)[A-Z][A-Za-z]+)\)\(", body)]
    assert sum(c.startswith("SAME(DriverApi") for c in calls) == 7
    assert len(calls) > 42
    (tmp_path / "calls.inc").write_text("\n".join(calls) + "\n")
    for cuda, nccl in _wheel_include_dirs():
        res = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-w", f"-I{tmp_path}",
                              f"-I{ROOT / 'tests/gpu_abi/include'}", f"-I{cuda}", f"-I{nccl}",
                              f"-I{ROOT / 'engine/src'}", str(ROOT / "tests/gpu_abi/abi_check.cc")],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, f"{cuda}:\n{res.stderr[-3000:]}"


@pytest.mark.skipif(not no_usable_gpu(), reason="a usable GPU is present")
@pytest.mark.parametrize("tensor", [FakeCudaArray(), FakeCudaArray(stream=1), FakeDLPackDevice()],
                         ids=["cuda_array_interface", "cai_with_stream", "dlpack_device"])
@pytest.mark.parametrize("call", ["allreduce", "allgather", "broadcast", "alltoall", "reducescatter", "allreduce_"])
def test_device_tensor_without_a_gpu_is_a_clear_error(tensor, call):
    args = (0,) if call == "broadcast" else ()
    with pytest.raises(hvd.GpuUnavailableError, match=rf"{call}: the tensor is on a CUDA device, but jupyter_hvd "
                                                      r"cannot use CUDA in this process: \S"):
        getattr(hvd, call)(tensor, *args)


@pytest.mark.skipif(not no_usable_gpu(), reason="a usable GPU is present")
def test_native_device_enqueue_without_a_gpu_raises():
    with pytest.raises(RuntimeError, match="GPU tensor 'x', but CUDA is not usable here: ."):
        x = gpu.DeviceArray(None, 0x7F0000000000, (4,), np.dtype(np.float32), 0, None)
        _C.submit(int(_C.OpType.allreduce), "allreduce", [x], [None], ["x"], 0, 0, -1, 1.0, 1.0, [])


@pytest.mark.skipif(not no_usable_gpu(), reason="a usable GPU is present")
def test_choosing_a_device_without_a_gpu_says_why():
    with pytest.raises(RuntimeError, match="CUDA is not usable here"):
        gpu.use_device(0)


class HostDLPack:
    """A host tensor that speaks DLPack (device type 1): stays on the host path."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_host_tensors_stay_on_the_host_path():
    from jupyter_hvd.arrays import as_array

    a = np.arange(6, dtype=np.float32)
    assert as_array(a, "t") is a
    view = as_array(HostDLPack(a), "t")
    assert isinstance(view, np.ndarray) and np.shares_memory(view, a)


def test_device_array_reads_the_cuda_array_interface(monkeypatch):
    """With the GPU check forced open, a CAI tensor is described without touching its memory."""
    monkeypatch.setattr(gpu, "cuda_available", lambda: True)
    d = gpu.device_array(FakeCudaArray(shape=(2, 3), typestr="<f2", stream=7), "t")
    assert (d.shape, d.dtype, d.ptr, d.stream, d.device) == ((2, 3), np.float16, 0x7F0000000000, 7, 0)
    strided = FakeCudaArray(shape=(2, 3))
    strided.__cuda_array_interface__["strides"] = (4, 8)
    with pytest.raises(ValueError, match="C-contiguous"):
        gpu.device_array(strided, "t")
    assert gpu.device_array(np.ones(2), "t") is None and gpu.device_array(HostDLPack(np.ones(2)), "t") is None
