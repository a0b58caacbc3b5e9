"""shutdown() for MXNet: what MXNet has already queued runs before the engine stops.

Collectives on NDArrays run inside MXNet's asynchronous engine, so right after a training loop the
last steps may still be queued; stopping the engine under them would fail those steps (each rank's
parameters left wherever its queue stopped, and an MXNetError at the next read or at exit).
"""
import threading

import mxnet as mx
from mxnet.base import MXNetError

from .. import basics

DRAIN_TIMEOUT_S = 60.0  # longest wait for queued work (a rank that never submits would hold it forever)


def _wait_all() -> None:
    try:
        mx.nd.waitall()
    except MXNetError:  # a failed operation raises again where its output is read
        pass


def shutdown() -> None:
    """Stop the engine (job-wide, as in Horovod) once MXNet has run what was queued before the call,
    or after DRAIN_TIMEOUT_S; init() may be called again afterwards."""
    if basics.is_initialized():
        waiter = threading.Thread(target=_wait_all, name="jupyter_hvd-drain", daemon=True)
        waiter.start()
        waiter.join(DRAIN_TIMEOUT_S)
    basics.shutdown()
