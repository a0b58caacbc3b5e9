"""Rank side: the device a %%hvd rank computes on, chosen by its local rank (Horovod's one GPU per process)."""
from __future__ import annotations

import os
import subprocess
import sys

from ..runner.binding import BOUND_VAR


def pin_device(local_rank: int, local_size: int, cpu: bool, framework: str = "none") -> str:
    """Give this rank the GPU of its local rank when GPUs exist, else share the host's cores; return the device.

    The GPU becomes the current CUDA device of the thread that runs the cells, so CuPy arrays made
    in a cell live there (and, with torch, ``"cuda"`` tensors). Every GPU stays visible, as under
    Horovod, so scripts that pick their GPU by ``hvd.local_rank()`` work unchanged.
    """
    gpus = [] if cpu else _visible_gpus()
    if gpus:
        index = local_rank % len(gpus)
        _use_gpu(index, framework)
        return f"gpu:{gpus[index]}"
    if cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    os.environ.setdefault("OMP_NUM_THREADS", str(cpu_threads(local_size)))
    return "cpu"


def cpu_threads(local_size: int) -> int:
    """Threads for a rank's CPU work: the cores mpiexec bound it to, or, where the host's ranks share the cores
    this process may use (unbound: more ranks than cores, a Slurm job's part of a node), an equal part of them.
    The machine's count would give each of 2 ranks 64 threads in an 8-CPU part of a 128-CPU node."""
    usable = len(os.sched_getaffinity(0))
    return max(1, usable if os.environ.get(BOUND_VAR) == "1" else usable // local_size)


def _use_gpu(index: int, framework: str) -> None:
    """Make visible GPU ``index`` current (for torch as well, with ``--framework torch``); where CUDA cannot be
    used here, say why and go on (ops on GPU tensors then give the reason)."""
    from jupyter_hvd import gpu

    if not gpu.cuda_available():
        return
    try:
        gpu.use_device(index)
        if framework == "torch":
            import torch

            torch.cuda.set_device(index)
    except RuntimeError as e:
        print(f"[jupyter_hvd] WARNING: {e}", file=sys.stderr)


def _visible_gpus() -> list[str]:
    """GPU ids this rank may use: CUDA_VISIBLE_DEVICES when set, else those `nvidia-smi -L` lists."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    try:
        listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, _ in enumerate(line for line in listing.splitlines() if line.startswith("GPU "))]
