"""Training steps still queued in MXNet when hvd.shutdown() is called, or when the script ends without
calling it: they must all run, on every rank.

    python tests/ranks/mxnet_queued_steps.py STEPS [at-exit]

Prints 'checksum RANK VALUE' of the parameters after shutdown (with at-exit: at exit, after the engine's
own shutdown and before MXNet's); the ranks' values must agree.
"""
import atexit
import sys

import mxnet as mx
from mxnet import autograd, gluon

import jupyter_hvd.mxnet as hvd

at_exit = sys.argv[2:] == ["at-exit"]


def checksum() -> None:
    mx.nd.waitall()  # raises if any of them failed
    print("checksum", rank, float(sum(p.data().abs().sum().asscalar() for p in net.collect_params().values())),
          flush=True)


if at_exit:
    atexit.register(checksum)  # registered after MXNet's exit handler and before init()'s: runs between them
hvd.init()
rank = hvd.rank()
mx.random.seed(rank)
net = gluon.nn.Dense(4, in_units=64)
net.initialize(mx.init.Xavier())
hvd.broadcast_parameters(net.collect_params(), root_rank=0)
trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
x = mx.nd.random.uniform(shape=(32, 64))  # different data per rank
for _ in range(int(sys.argv[1])):
    with autograd.record():
        loss = (net(x) ** 2).mean()
    loss.backward()
    trainer.step(32)
if not at_exit:
    hvd.shutdown()  # steps are still queued here
    checksum()
