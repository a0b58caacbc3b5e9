"""Data-parallel Gluon training of a small CNN on scikit-learn's digits (8x8 images, 10 classes).

Horovod's MXNet skeleton with ``import jupyter_hvd.mxnet as hvd``:

    hvdrun -np 2 python examples/mxnet_mnist.py
    python examples/mxnet_mnist.py            # one rank
"""
import argparse
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn
from sklearn.datasets import load_digits

import jupyter_hvd.mxnet as hvd


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=32, help="samples per rank and step")
    p.add_argument("--lr", type=float, default=0.05, help="learning rate of one rank (scaled by the rank count)")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--distributed-optimizer", action="store_true",
                   help="wrap the optimizer in hvd.DistributedOptimizer instead of using hvd.DistributedTrainer")
    return p.parse_args()


def load_shards(seed: int):
    """This rank's share of the training set, and of the held-out test set (images as N x 1 x 8 x 8)."""
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    y = digits.target.astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(y))
    split = int(0.8 * len(y))
    train, test = order[:split], order[split:]
    mine = lambda idx: idx[hvd.rank()::hvd.size()]  # noqa: E731 - shard by rank
    return (x[mine(train)], y[mine(train)]), (x[mine(test)], y[mine(test)])


def build_model() -> nn.HybridSequential:
    net = nn.HybridSequential()
    net.add(nn.Conv2D(16, kernel_size=3, padding=1, activation="relu"), nn.MaxPool2D(pool_size=2),
            nn.Conv2D(32, kernel_size=3, padding=1, activation="relu"), nn.MaxPool2D(pool_size=2),
            nn.Flatten(), nn.Dense(64, activation="relu"), nn.Dense(10))
    return net


def evaluate(model: nn.HybridSequential, data: mx.io.NDArrayIter, context: mx.Context) -> float:
    """Accuracy over every rank's test shard."""
    metric = mx.metric.Accuracy()
    data.reset()
    for batch in data:
        metric.update([batch.label[0].as_in_context(context)], [model(batch.data[0].as_in_context(context))])
    correct, seen = metric.sum_metric, metric.num_inst
    total = hvd.allreduce(mx.nd.array([correct, seen], dtype=np.float64), op=hvd.Sum, name="eval")
    correct, seen = total.asnumpy()
    return correct / seen


def main() -> None:
    args = parse_args()
    hvd.init()
    mx.random.seed(args.seed + hvd.rank())
    context = mx.cpu(hvd.local_rank())  # jupyter_hvd.mxnet reduces NDArrays in host memory

    (x_train, y_train), (x_test, y_test) = load_shards(args.seed)
    train_data = mx.io.NDArrayIter(x_train, y_train, args.batch_size, shuffle=True)
    test_data = mx.io.NDArrayIter(x_test, y_test, args.batch_size)

    model = build_model()
    model.initialize(mx.init.Xavier(), ctx=context)
    model.hybridize()
    params = model.collect_params()
    hvd.broadcast_parameters(params, root_rank=0)  # shapes are deferred: sent after the first forward pass

    lr = args.lr * hvd.size()  # linear scaling with the number of ranks
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    if args.distributed_optimizer:
        opt = mx.optimizer.create("sgd", learning_rate=lr, momentum=args.momentum,
                                  rescale_grad=1.0 / args.batch_size)
        trainer = gluon.Trainer(params, hvd.DistributedOptimizer(opt), kvstore=None)
    else:
        opt = mx.optimizer.create("sgd", learning_rate=lr, momentum=args.momentum)
        trainer = hvd.DistributedTrainer(params, opt)

    for epoch in range(args.epochs):
        train_data.reset()
        start, samples, loss_sum = time.perf_counter(), 0, mx.nd.zeros((1,), ctx=context)
        for batch in train_data:
            data = batch.data[0].as_in_context(context)
            label = batch.label[0].as_in_context(context)
            with autograd.record():
                loss = loss_fn(model(data), label)
            loss.backward()
            trainer.step(args.batch_size)
            loss_sum += loss.sum()
            samples += data.shape[0]
        train_loss = loss_sum.asscalar() / samples
        rate = samples / (time.perf_counter() - start)
        accuracy = evaluate(model, test_data, context)
        print(f"[rank {hvd.rank()}] epoch {epoch + 1}/{args.epochs}: train loss {train_loss:.4f}, "
              f"test accuracy {accuracy:.4f}, {rate:.0f} samples/s", flush=True)
    if hvd.rank() == 0:
        print(f"final test accuracy: {accuracy:.4f} on {hvd.size()} rank(s)", flush=True)


if __name__ == "__main__":
    main()
