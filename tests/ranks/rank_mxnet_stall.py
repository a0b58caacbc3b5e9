"""Mismatched names stall; the stall shutdown turns that into EngineAbortedError, an MXNetError, on every rank
(run with a short HOROVOD_STALL_SHUTDOWN_TIME_SECONDS), and the engine then restarts in the same process."""
import os

import mxnet as mx
import numpy as np
import pytest
from mxnet.base import MXNetError

import jupyter_hvd.mxnet as hvd

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:mxnet.*")


def test_name_mismatch_fails_every_rank_then_restart():
    t = mx.nd.ones((4,))
    hvd.allreduce_(t, name=f"only.on.rank.{hvd.rank()}")
    with pytest.raises(hvd.EngineAbortedError, match="stall shutdown") as e:
        t.asnumpy()
    assert isinstance(e.value, MXNetError) and e.value.origin_rank == 0
    hvd.shutdown()
    with pytest.raises(ValueError, match="not been initialized"):
        hvd.allreduce_(mx.nd.ones((2,)))
    os.environ["HOROVOD_STALL_CHECK_DISABLE"] = "1"  # the engine started again need not wait for a late rank
    hvd.init()
    u = mx.nd.ones((4,))
    hvd.allreduce_(u, op=hvd.Sum, name="after.restart")
    np.testing.assert_array_equal(u.asnumpy(), np.full(4, hvd.size(), np.float32))
