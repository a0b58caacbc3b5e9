"""Thousands of MXNet operations refused at once: each read raises MXNetError, and the rank survives."""
import mxnet as mx
import numpy as np
import pytest
from mxnet.base import MXNetError

import jupyter_hvd.mxnet as hvd

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:mxnet.*")


def test_a_burst_of_refused_allreduces_raises_and_the_engine_works_on():
    hvd.init()
    x = mx.nd.ones((1,))
    for _ in range(10):
        # One name for all: while one is in flight, the others are refused on MXNet's worker threads at once.
        outs = [hvd.allreduce(x, name="burst") for _ in range(5000)]
        with pytest.raises(MXNetError, match="already in flight"):
            mx.nd.waitall()
        del outs
    t = mx.nd.ones((3,))
    hvd.allreduce_(t, op=hvd.Sum, name="after.burst")
    np.testing.assert_array_equal(t.asnumpy(), np.full(3, hvd.size(), np.float32))
