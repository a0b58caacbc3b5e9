"""Run with HOROVOD_STALL_CHECK_TIME_SECONDS=1: a late rank triggers a stall warning naming it."""
import os
import time

import numpy as np
import pytest

import jupyter_hvd as hvd


SHUTDOWN = bool(os.environ.get("HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"))


@pytest.mark.skipif(SHUTDOWN, reason="a late rank would be aborted")
def test_late_rank_is_reported_then_completes():
    """Rank 1 submits only once rank 0 has reported the stall (told with an MPI message), and it completes."""
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    if hvd.rank() == 1:
        world.recv(source=0, tag=78)
    handle = hvd.allreduce_async(np.ones(2, np.float32), name="stuck", op=hvd.Sum)
    if hvd.rank() == 0:
        deadline = time.monotonic() + 60
        while hvd.metrics()["stalls"] < 1:
            assert time.monotonic() < deadline, "no stall reported"
            time.sleep(0.05)
        world.send("reported", dest=1, tag=78)
    np.testing.assert_array_equal(handle.wait(timeout=60), np.full(2, hvd.size()))
    if hvd.rank() == 0:
        events, _ = hvd.drain_events()
        assert any(e.phase == "STALL" and "stuck" in e.name for e in events)


@pytest.mark.skipif(not SHUTDOWN, reason="needs stall shutdown")
def test_stall_shutdown_aborts_every_rank():
    if hvd.rank() == 1:
        deadline = time.monotonic() + 60
        with pytest.raises(hvd.EngineAbortedError, match="stall shutdown"):
            while time.monotonic() < deadline:  # until rank 0's stall shutdown reaches this rank
                hvd.check_running()
                time.sleep(0.05)
        with pytest.raises(hvd.EngineAbortedError, match="stall shutdown"):
            hvd.allreduce(np.ones(2), name="too.late")
    else:
        with pytest.raises(hvd.EngineAbortedError, match="stall shutdown.*never.sent"):
            hvd.allreduce(np.ones(2), name="never.sent")
