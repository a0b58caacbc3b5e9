"""Engine settings for one segment of a storm: environment variables the engine reads at init."""
import os
import tempfile

import numpy as np

# Every variable a segment may set; the others are unset, so each segment starts from the defaults.
VARIABLES = ("HOROVOD_FUSION_THRESHOLD", "HOROVOD_CACHE_CAPACITY", "HOROVOD_CYCLE_TIME",
             "JUPYTER_HVD_FUSION_MAX_TENSOR", "JUPYTER_HVD_RING_ALLREDUCE_BYTES", "JUPYTER_HVD_SYNC_REDUCE_BYTES",
             "JUPYTER_HVD_SPIN_US", "JUPYTER_HVD_CARRY_BYTES", "HOROVOD_TIMELINE", "HOROVOD_TIMELINE_MARK_CYCLES",
             "HOROVOD_AUTOTUNE", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE",
             "HOROVOD_BATCH_D2D_MEMCOPIES", "JUPYTER_HVD_GPU_STAGING")


def _pick(rng: np.random.Generator, choices: list):
    return choices[int(rng.integers(len(choices)))]


def draw(rng: np.random.Generator, features: frozenset, gpu: bool) -> dict:
    """One segment's settings; '' leaves a variable at its default. The same on every rank."""
    s = {
        # off, a few tensors, the default (128 MiB)
        "HOROVOD_FUSION_THRESHOLD": _pick(rng, ["0", "1", "64", "4096", "65536", "", ""]),
        # off, tiny (constant replacement), the default (1024)
        "HOROVOD_CACHE_CAPACITY": _pick(rng, ["0", "1", "2", "5", "", ""]),
        "HOROVOD_CYCLE_TIME": _pick(rng, ["0", "0.1", "", "3"]),
        # tensors larger than this are never fused: tiny, the default (64 KiB), larger than any tensor here
        "JUPYTER_HVD_FUSION_MAX_TENSOR": _pick(rng, ["0", "8", "100", "", str(64 << 20)]),
        # the engine's own ring allreduce from 1 byte (odd counts, blocks of zero elements) or the default
        "JUPYTER_HVD_RING_ALLREDUCE_BYTES": _pick(rng, ["1", "1000", "", "", "0"]),
        "JUPYTER_HVD_SYNC_REDUCE_BYTES": _pick(rng, ["0", "1", ""]),
        "JUPYTER_HVD_SPIN_US": _pick(rng, ["0", "", "50"]),
        # small allreduces as collectives, carried up to the default (256 bytes in all), or up to 1 MiB
        "JUPYTER_HVD_CARRY_BYTES": _pick(rng, ["0", "", "", str(1 << 20)]),
    }
    if "timeline" in features and rng.random() < 0.25:
        s["HOROVOD_TIMELINE"] = "@"  # a file of this run's, made by apply()
        s["HOROVOD_TIMELINE_MARK_CYCLES"] = _pick(rng, ["0", "1"])
    if "autotune" in features and rng.random() < 0.15:
        s.update(HOROVOD_AUTOTUNE="1", HOROVOD_AUTOTUNE_WARMUP_SAMPLES="1", HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE="3")
        s["HOROVOD_FUSION_THRESHOLD"] = s["HOROVOD_CYCLE_TIME"] = ""  # what autotune tunes
    if gpu:
        s["HOROVOD_BATCH_D2D_MEMCOPIES"] = _pick(rng, ["0", ""])
        s["JUPYTER_HVD_GPU_STAGING"] = _pick(rng, ["1", "", "", ""])
    return {k: v for k, v in s.items() if v}


def apply(settings: dict, workdir: str) -> None:
    """Put ``settings`` into this process's environment (the engine reads it at init)."""
    for var in VARIABLES:
        os.environ.pop(var, None)
    for var, value in settings.items():
        if var == "HOROVOD_TIMELINE":
            value = tempfile.mktemp(prefix="timeline.", suffix=".json", dir=workdir)
        os.environ[var] = value


def describe(settings: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(settings.items())) or "defaults"
