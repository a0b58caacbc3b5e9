"""Data-parallel PyTorch training of a small CNN on scikit-learn's digits (8x8 images, 10 classes).

Horovod's PyTorch skeleton with ``import jupyter_hvd.torch as hvd``:

    hvdrun -np 2 python examples/torch_mnist.py
    python examples/torch_mnist.py            # one rank
    hvdrun -np 2 python examples/torch_mnist.py --fp16-allreduce --cuda   # gradients as float16, on GPUs
    python examples/torch_mnist.py --num-proc 2   # starts 2 ranks itself (jupyter_hvd.run, Horovod's horovod.run)
"""
import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits

import jupyter_hvd
import jupyter_hvd.torch as hvd


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=32, help="samples per rank and step")
    p.add_argument("--lr", type=float, default=0.025, help="learning rate of one rank (scaled by the rank count)")
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--fp16-allreduce", action="store_true", help="send gradients as float16")
    p.add_argument("--cuda", action="store_true", help="train on this rank's GPU (hvd.local_rank())")
    p.add_argument("--num-proc", type=int, help="start this many ranks and train on them (without hvdrun)")
    p.add_argument("--hosts", help="with --num-proc: hosts and slots, e.g. host1:2,host2:2")
    return p.parse_args()


def load_shards(seed: int):
    """This rank's share of the training set, and of the held-out test set (images as N x 1 x 8 x 8)."""
    digits = load_digits()
    x = torch.from_numpy((digits.images / 16.0).astype(np.float32)[:, None])
    y = torch.from_numpy(digits.target.astype(np.int64))
    order = torch.from_numpy(np.random.default_rng(seed).permutation(len(y)))
    split = int(0.8 * len(y))
    train, test = order[:split], order[split:]
    mine = lambda idx: idx[hvd.rank()::hvd.size()]  # noqa: E731 - shard by rank
    return (x[mine(train)], y[mine(train)]), (x[mine(test)], y[mine(test)])


def build_model() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 2 * 2, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


@torch.no_grad()
def evaluate(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Accuracy over every rank's test shard."""
    model.eval()
    correct = (model(x).argmax(dim=1) == y).sum()
    model.train()
    total = hvd.allreduce(torch.stack([correct.double(), torch.tensor(len(y), dtype=torch.float64,
                                                                      device=correct.device)]),
                          op=hvd.Sum, name="eval")
    return (total[0] / total[1]).item()


def train(args: argparse.Namespace) -> float:
    """Train on this rank; the final test accuracy."""
    hvd.init()
    torch.manual_seed(args.seed + hvd.rank())
    device = torch.device("cpu")
    if args.cuda:
        torch.cuda.set_device(hvd.local_rank() % torch.cuda.device_count())
        device = torch.device("cuda", torch.cuda.current_device())

    (x_train, y_train), (x_test, y_test) = load_shards(args.seed)
    x_test, y_test = x_test.to(device), y_test.to(device)
    model = build_model().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr * hvd.size(), momentum=args.momentum)
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                         compression=compression)

    for epoch in range(args.epochs):
        start, loss_sum = time.perf_counter(), 0.0
        order = torch.randperm(len(y_train))
        for i in range(0, len(order), args.batch_size):
            rows = order[i:i + args.batch_size]
            data, target = x_train[rows].to(device), y_train[rows].to(device)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(data), target)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * len(rows)
        rate = len(order) / (time.perf_counter() - start)
        accuracy = evaluate(model, x_test, y_test)
        print(f"[rank {hvd.rank()}] epoch {epoch + 1}/{args.epochs}: train loss {loss_sum / len(order):.4f}, "
              f"test accuracy {accuracy:.4f}, {rate:.0f} samples/s", flush=True)
    if hvd.rank() == 0:
        print(f"final test accuracy: {accuracy:.4f} on {hvd.size()} rank(s)", flush=True)
    return accuracy


def main() -> None:
    args = parse_args()
    if args.num_proc:  # as Horovod's examples do with horovod.run
        accuracies = jupyter_hvd.run(train, args=(args,), num_proc=args.num_proc, hosts=args.hosts)
        print(f"the ranks' test accuracies: {', '.join(f'{a:.4f}' for a in accuracies)}")
    else:
        train(args)


if __name__ == "__main__":
    main()
