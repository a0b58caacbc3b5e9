"""An abort reaches a rank that is waiting inside a GPU collective: a peer that gives up its part
would otherwise leave it waiting forever. Simulated device only: it keeps a stream busy for
seconds (simcupy.busy), which stands in for a kernel that never ends."""
import threading
import time

import numpy as np
import pytest

import jupyter_hvd as hvd
from device_arrays import SIMULATED, cupy

pytestmark = pytest.mark.skipif(not SIMULATED, reason="needs simcupy.busy to keep a stream busy")


def test_an_abort_reaches_a_rank_waiting_inside_a_gpu_collective():
    cupy.cuda.Device(hvd.local_rank() % cupy.cuda.runtime.getDeviceCount()).use()
    still_works = hvd.allreduce(cupy.ones(3, cupy.float32), op=hvd.Sum, name="g.before")
    np.testing.assert_array_equal(cupy.asnumpy(still_works), np.full(3, hvd.size(), np.float32))
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        if hvd.rank() == 1:
            cupy.busy(5)  # rank 1's tensor is not ready for 5 s: rank 0 waits inside the collective
            threading.Timer(1.0, hvd.abort, ["rank 1 gave up on its stuck stream"]).start()
        x = cupy.ones(4, cupy.float32) * 1.0
        began = time.monotonic()
        with pytest.raises(hvd.EngineAbortedError):
            hvd.allreduce(x, op=hvd.Sum, name="g.stuck")
    assert time.monotonic() - began < 4.0, "the abort did not cut the collective short"
    hvd.shutdown()
    hvd.init()
    got = hvd.allreduce(cupy.ones(3, cupy.float32), op=hvd.Sum, name="g.after")
    np.testing.assert_array_equal(cupy.asnumpy(got), np.full(3, hvd.size(), np.float32))
