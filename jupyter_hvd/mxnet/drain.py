"""What MXNet has already queued runs before the engine stops (hvd.shutdown(), and at exit).

Collectives on NDArrays run inside MXNet's asynchronous engine, so right after a training loop the
last steps may still be queued; stopping the engine under them would fail those steps (each rank's
parameters left wherever its queue stopped, and an MXNetError at the next read, or at exit, where
MXNet's own exit handler printed one on every rank of a script that ended on ``trainer.step()``).
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


def wait_for_queued() -> None:
    """Return once MXNet has run what was queued before the call, or after DRAIN_TIMEOUT_S."""
    waiter = threading.Thread(target=_wait_all, name="jupyter_hvd-drain", daemon=True)
    waiter.start()
    waiter.join(DRAIN_TIMEOUT_S)


basics.drain_before_shutdown(wait_for_queued)
