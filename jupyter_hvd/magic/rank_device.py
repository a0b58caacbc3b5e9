"""Rank side: the device a %%hvd rank computes on, chosen by its local rank (Horovod's one GPU per process)."""
from __future__ import annotations

import os
import subprocess
import sys


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
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // local_size)))
    return "cpu"


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
