"""A training-like loop of named allreduces under HOROVOD_AUTOTUNE: every result is checked while the
settings change under it; rank 0 then prints the settings in effect as one METRICS json line.

    python tests/ranks/autotune_steps.py STEPS
"""
import json
import sys

import numpy as np

import jupyter_hvd as hvd

hvd.init()
grads = [np.ones(n, np.float32) for n in (1000, 20000, 300000)]
for step in range(int(sys.argv[1])):
    hs = [hvd.allreduce_async(g * (hvd.rank() + step), op=hvd.Sum, name=f"grad.{i}") for i, g in enumerate(grads)]
    expected = sum(r + step for r in range(hvd.size()))
    for i, h in enumerate(hs):
        out = h.wait()
        assert np.all(out == expected), f"step {step}, grad.{i}: got {out[:3]}..., expected {expected}"
m = hvd.metrics()
if hvd.rank() == 0:
    keys = ("fusion_threshold", "cycle_time_ms", "autotuning", "autotune_settings")
    print("METRICS " + json.dumps({k: m[k] for k in keys}), flush=True)
hvd.shutdown()
