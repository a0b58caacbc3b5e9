"""``hvdrun --check-build``: what this installation can run, in horovodrun's layout."""

from __future__ import annotations

import importlib.metadata
import subprocess

from jupyter_hvd.runner.launch import find_mpiexec


def _mark(ok: bool) -> str:
    return "[X]" if ok else "[ ]"


def _mxnet() -> tuple[bool, str]:
    """Whether jupyter_hvd.mxnet can be used, and MXNet's version, or why not."""
    from jupyter_hvd.basics import mxnet_unavailable_reason

    reason = mxnet_unavailable_reason()
    if reason:
        return False, reason
    try:
        return True, importlib.metadata.version("mxnet")
    except importlib.metadata.PackageNotFoundError:
        return True, "version unknown"


def _mpi() -> tuple[bool, str]:
    """Whether mpiexec is there, with its version line and path, or why not."""
    try:
        mpiexec = find_mpiexec()
    except RuntimeError as exc:
        return False, str(exc)
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{mpiexec} --version failed: {exc}"
    first = out.splitlines()[0].strip() if out.strip() else "version unknown"
    return True, f"{first}, {mpiexec}"


def report() -> str:
    """The text hvdrun --check-build prints."""
    import jupyter_hvd

    mx_ok, mx_info = _mxnet()
    mpi_ok, mpi_info = _mpi()
    gpu = jupyter_hvd.gpu_status()
    nccl_info = (f"NCCL {gpu['nccl']['version']}" if gpu["nccl_available"] else gpu["reason"])
    lines = [
        f"jupyter_hvd v{jupyter_hvd.__version__} (the Horovod 0.28 API):",
        "",
        "Available Frameworks:",
        f"    {_mark(True)} NumPy and DLPack tensors (jupyter_hvd)",
        f"    {_mark(mx_ok)} MXNet (jupyter_hvd.mxnet): {mx_info}",
        "",
        "Available Controllers:",
        f"    {_mark(mpi_ok)} MPI: {mpi_info}",
        f"    {_mark(False)} Gloo",
        "",
        "Available Tensor Operations:",
        f"    {_mark(gpu['nccl_available'])} NCCL: {nccl_info}",
        f"    {_mark(False)} DDL",
        f"    {_mark(False)} CCL",
        f"    {_mark(mpi_ok)} MPI",
        f"    {_mark(False)} Gloo",
    ]
    return "\n".join(lines)
