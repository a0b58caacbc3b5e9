"""Compile a CUDA C kernel to PTX with NVRTC (no CUDA install and no GPU needed): the engine embeds
the PTX and the driver compiles it for the GPU at run time.

    python make_ptx.py --nvrtc path/to/libnvrtc.so.X batched_copy.cu batched_copy.ptx

`make gpu-ptx` runs it with NVRTC 11.8 from PyPI: its PTX (ISA 7.8, compute_70) loads on every
driver from CUDA 11.8 on, and on every GPU from Volta on.
"""
import argparse
import ctypes
import os
import sys

ARCH = "compute_70"


def check(nvrtc, result: int, what: str, prog=None) -> None:
    if result == 0:
        return
    log = ""
    if prog is not None:
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
    nvrtc.nvrtcGetErrorString.restype = ctypes.c_char_p
    sys.exit(f"{what}: {nvrtc.nvrtcGetErrorString(result).decode()}\n{log}")


def compile_ptx(nvrtc_path: str, source: str) -> str:
    nvrtc = ctypes.CDLL(nvrtc_path)
    major, minor = ctypes.c_int(), ctypes.c_int()
    check(nvrtc, nvrtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    prog = ctypes.c_void_p()
    with open(source, "rb") as f:
        text = f.read()
    name = os.path.basename(source).encode()
    check(nvrtc, nvrtc.nvrtcCreateProgram(ctypes.byref(prog), text, name, 0, None, None), "nvrtcCreateProgram")
    opts = [f"--gpu-architecture={ARCH}", "--std=c++14", f"--include-path={os.path.dirname(os.path.abspath(source))}"]
    argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    check(nvrtc, nvrtc.nvrtcCompileProgram(prog, len(opts), argv), "compiling " + source, prog)
    size = ctypes.c_size_t()
    check(nvrtc, nvrtc.nvrtcGetPTXSize(prog, ctypes.byref(size)), "nvrtcGetPTXSize")
    ptx = ctypes.create_string_buffer(size.value)
    check(nvrtc, nvrtc.nvrtcGetPTX(prog, ptx), "nvrtcGetPTX")
    nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))
    head = (f"// Made from {os.path.basename(source)} by make_ptx.py (NVRTC {major.value}.{minor.value}, {ARCH}):"
            " do not edit; run `make gpu-ptx`.\n")
    return head + ptx.value.decode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nvrtc", required=True, help="the libnvrtc shared library")
    ap.add_argument("source")
    ap.add_argument("output")
    a = ap.parse_args()
    ptx = compile_ptx(a.nvrtc, a.source)
    with open(a.output, "w") as f:
        f.write(ptx)


if __name__ == "__main__":
    main()
