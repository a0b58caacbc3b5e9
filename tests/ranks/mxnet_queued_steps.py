"""Training steps still queued in MXNet when hvd.shutdown() is called: they must all run, on every rank.

    python tests/ranks/mxnet_queued_steps.py STEPS

Prints 'checksum RANK VALUE' of the parameters after shutdown; the ranks' values must agree.
"""
import sys

import mxnet as mx
from mxnet import autograd, gluon

import jupyter_hvd.mxnet as hvd

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
hvd.shutdown()  # steps are still queued here
mx.nd.waitall()  # raises if any of them failed
print("checksum", rank, float(sum(p.data().abs().sum().asscalar() for p in net.collect_params().values())),
      flush=True)
