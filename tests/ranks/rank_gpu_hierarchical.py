"""HOROVOD_HIERARCHICAL_ALLREDUCE=1 gives the results of the flat NCCL allreduce.

The same cases run on an engine started without the variable, then on one started with it. On one
host (or where ranks share a GPU) both are flat; the caller can set JUPYTER_HVD_TEST_RANKS_PER_HOST
so that one machine with a GPU per rank runs the hierarchical steps (reduce-scatter, MPI, allgather).
"""
import os

import numpy as np
import pytest

import jupyter_hvd as hvd
from device_arrays import cupy
from refdata import BOOL, INTS, OPS, data


FLOATS = [np.dtype(t) for t in (np.float16, np.float32, np.float64)]  # CuPy has no bfloat16
SHAPES = [(7,), (1,), (0,), (3, 5), (1000, 3)]  # lengths that do and do not divide by the host size


def run_cases() -> dict:
    """Every op x dtype, scaled reductions, and a fused group, on every set; results on the host."""
    cupy.cuda.Device(hvd.local_rank() % cupy.cuda.runtime.getDeviceCount()).use()
    extra = [hvd.add_process_set(list(range(0, hvd.size(), 2)))] if hvd.size() > 1 else []
    out = {}
    for si, ps in enumerate([hvd.global_process_set] + extra):
        if not ps.included():
            continue
        for dtype in INTS + FLOATS + BOOL:
            for op in OPS:
                if dtype == np.bool_ and op == hvd.Average:
                    continue
                for shape in SHAPES:
                    name = f"h.{si}.{dtype}.{op}.{shape}"
                    x = cupy.asarray(data(hvd.rank(), dtype, shape, len(out), 2 if op == hvd.Product else 4))
                    out[name] = cupy.asnumpy(hvd.allreduce(x, op=op, process_set=ps, name=name))
        for dtype in FLOATS:
            x = cupy.asarray(data(hvd.rank(), dtype, (13,), si))
            for op, pre, post in [(hvd.Sum, 0.5, 2.0), (hvd.Average, 3.0, 1.0), (hvd.Average, 1.0, 0.25)]:
                name = f"h.scale.{si}.{dtype}.{op}.{pre}.{post}"
                out[name] = cupy.asnumpy(hvd.allreduce(x, op=op, prescale_factor=pre, postscale_factor=post,
                                                       process_set=ps, name=name))
        xs = [cupy.asarray(data(hvd.rank(), np.float32, (i + 1, 3), i)) for i in range(12)]
        for i, g in enumerate(hvd.grouped_allreduce(xs, op=hvd.Sum, process_set=ps, name=f"h.grp.{si}")):
            out[f"h.grp.{si}.{i}"] = cupy.asnumpy(g)
    for s in extra:
        assert hvd.remove_process_set(s)
    return out


def restart(hierarchical: bool) -> None:
    hvd.shutdown()
    if hierarchical:
        os.environ["HOROVOD_HIERARCHICAL_ALLREDUCE"] = "1"
    else:
        os.environ.pop("HOROVOD_HIERARCHICAL_ALLREDUCE", None)
    hvd.init()


def test_hierarchical_equals_flat():
    restart(False)
    flat = run_cases()
    restart(True)
    hier = run_cases()
    assert flat.keys() == hier.keys()
    for name, want in flat.items():
        got = hier[name]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        if want.dtype in FLOATS:
            np.testing.assert_allclose(got, want, rtol=1e-3 if want.dtype == np.float16 else 1e-6, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)
