"""MXNet data-parallel training throughput: jupyter_hvd.mxnet against horovod.mxnet on the same machine.

    python benchmarks/mxnet_train.py [--impl jupyter_hvd horovod] [--np 1 2] [--repeat 3] [--quick]

Cases, each rank with one compute thread (OMP_NUM_THREADS=1, MXNET_CPU_WORKER_NTHREADS=1):
  cnn_train      a small CNN (2 conv + 2 dense) on synthetic 28x28 data, batch 64 per rank, with
                 DistributedTrainer: samples/s at each rank count and the scaling efficiency against np=1.
  resnet50_step  the parameter arrays of gluon's resnet50_v1 (~25M parameters), each allreduced in place
                 with hvd.allreduce_, all enqueued and then waited; against the transport floor, one raw
                 MPI_Allreduce of the same bytes (mpi4py), in the same run.
``--impl horovod`` runs the same worker with ``import horovod.mxnet as hvd`` under ``--horovod-python``.
Prints a table and one JSON line per case.
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BATCH = 64


def cnn_step(hvd):
    """One DistributedTrainer step of a small CNN on a fixed synthetic batch, as a function."""
    import mxnet as mx
    from mxnet import autograd, gluon
    from mxnet.gluon import nn

    mx.random.seed(hvd.rank())
    net = nn.HybridSequential()
    net.add(nn.Conv2D(32, 3, activation="relu"), nn.MaxPool2D(2), nn.Conv2D(64, 3, activation="relu"),
            nn.MaxPool2D(2), nn.Flatten(), nn.Dense(128, activation="relu"), nn.Dense(10))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)  # deferred: sent at the first forward
    trainer = hvd.DistributedTrainer(net.collect_params(), "sgd", {"learning_rate": 0.01, "momentum": 0.9})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x = mx.nd.random.uniform(shape=(BATCH, 1, 28, 28))
    y = mx.nd.random.randint(0, 10, shape=(BATCH,)).astype("float32")

    def step():
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(BATCH)

    return step


def cnn_train(hvd, steps: int) -> dict:
    """Throughput of DistributedTrainer steps on a small CNN (warm-up steps excluded)."""
    import mxnet as mx

    step = cnn_step(hvd)
    for _ in range(5):
        step()
    mx.nd.waitall()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    mx.nd.waitall()
    elapsed = time.perf_counter() - start
    return {"case": "cnn_train", "steps": steps, "samples_per_s_per_rank": BATCH * steps / elapsed,
            "samples_per_s": BATCH * steps / elapsed * hvd.size(), "ms_per_step": elapsed / steps * 1e3}


def resnet50_arrays():
    """One NDArray per parameter of resnet50_v1 (shapes set by a training-mode forward pass)."""
    import mxnet as mx
    from mxnet import autograd
    from mxnet.gluon.model_zoo.vision import resnet50_v1

    net = resnet50_v1()
    net.initialize(mx.init.Xavier())
    with autograd.train_mode():  # training mode keeps the weights in MXNet's plain layout
        net(mx.nd.zeros((1, 3, 64, 64))).wait_to_read()
    return [p.data() for p in net.collect_params().values()]


def resnet50_allreduce(hvd):
    """A step that allreduces every ResNet-50 parameter array in place, all enqueued then waited, as a
    function; and the arrays."""
    import mxnet as mx

    arrays = resnet50_arrays()
    for a in arrays:
        a[:] = 1.0

    def step():
        for i, a in enumerate(arrays):
            hvd.allreduce_(a, op=hvd.Sum, name=f"resnet.{i}")
        mx.nd.waitall()

    return step, arrays


def resnet50_step(hvd, iters: int) -> dict:
    """Median time of the ResNet-50 allreduce step."""
    import numpy as np

    step, arrays = resnet50_allreduce(hvd)
    nbytes = sum(a.size * 4 for a in arrays)
    times = []
    for i in range(iters + 2):
        start = time.perf_counter()
        step()
        if i >= 2:
            times.append(time.perf_counter() - start)
    row = {"case": "resnet50_step", "tensors": len(arrays), "params": int(nbytes // 4), "bytes": int(nbytes),
           "iters": iters, "ms": float(np.median(times)) * 1e3}
    row.update(mpi_floor(nbytes, iters))
    return row


def mpi_floor(nbytes: int, iters: int) -> dict:
    """The transport floor: one raw MPI_Allreduce of all the bytes in one buffer (when mpi4py is there)."""
    try:
        from mpi4py import MPI
    except ImportError:
        return {}
    import numpy as np

    buf = np.ones(nbytes // 4, dtype=np.float32)
    comm = MPI.COMM_WORLD
    times = []
    for i in range(iters + 1):
        comm.Barrier()
        start = time.perf_counter()
        comm.Allreduce(MPI.IN_PLACE, buf, op=MPI.SUM)
        if i:
            times.append(time.perf_counter() - start)
    return {"mpi_floor_ms": float(np.median(times)) * 1e3}


def worker(impl: str, quick: bool) -> None:
    """Runs on every rank; rank 0 prints one JSON line per case."""
    if impl == "horovod":
        import horovod.mxnet as hvd
    else:
        import jupyter_hvd.mxnet as hvd
    hvd.init()
    rows = [cnn_train(hvd, 15 if quick else 60), resnet50_step(hvd, 3 if quick else 10)]
    if hvd.rank() == 0:
        for row in rows:
            print(json.dumps(dict(row, impl=impl, np=hvd.size())), flush=True)
    hvd.shutdown()


def table(rows: list) -> str:
    """A human-readable summary of all runs."""
    out = [f"{'impl':<12} {'np':>3}  {'cnn samples/s':>14} {'per rank':>9} {'eff.':>6}   "
           f"{'resnet50 step ms':>16} {'MPI floor ms':>13}"]
    by_key = {(r["impl"], r["np"], r["case"]): r for r in rows}
    for impl, n in sorted({(r["impl"], r["np"]) for r in rows}):
        cnn, res = by_key.get((impl, n, "cnn_train"), {}), by_key.get((impl, n, "resnet50_step"), {})
        eff = cnn.get("scaling_efficiency")
        out.append(f"{impl:<12} {n:>3}  {cnn.get('samples_per_s', float('nan')):>14.0f} "
                   f"{cnn.get('samples_per_s_per_rank', float('nan')):>9.0f} "
                   f"{'' if eff is None else f'{eff:.2f}':>6}   {res.get('ms', float('nan')):>16.1f} "
                   f"{res.get('mpi_floor_ms', float('nan')):>13.1f}")
    return "\n".join(out)


def run(impl: str, n: int, python: str, quick: bool) -> list:
    """One hvdrun job of ``n`` ranks running the worker under ``python``; its JSON rows."""
    cmd = [sys.executable, "-m", "jupyter_hvd.runner.hvdrun", "-np", str(n), python, str(Path(__file__).resolve()),
           "--worker", "--impl", impl] + (["--quick"] if quick else [])
    env = dict(os.environ, OMP_NUM_THREADS="1", MXNET_CPU_WORKER_NTHREADS="1", PYTHONWARNINGS="ignore")
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800)
    if res.returncode:
        sys.exit(f"{impl} np={n} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
    return [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]


def best(rows: list) -> dict:
    """The best of repeated runs of one case: on a shared machine, noise only ever slows a run down."""
    if rows[0]["case"] == "cnn_train":
        return max(rows, key=lambda r: r["samples_per_s"])
    return min(rows, key=lambda r: r["ms"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--impl", nargs="+", choices=["jupyter_hvd", "horovod"], default=["jupyter_hvd"])
    p.add_argument("--np", type=int, nargs="+", default=[1, 2])
    p.add_argument("--repeat", type=int, default=1, help="runs per configuration (interleaved); the best is kept")
    p.add_argument("--horovod-python", default=sys.executable,
                   help="interpreter with horovod.mxnet installed, for --impl horovod (default: this one)")
    p.add_argument("--quick", action="store_true", help="fewer steps")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args.impl[0], args.quick)
    runs: dict = {}  # (impl, np, case) -> rows of every repetition
    for _ in range(args.repeat):
        for impl in args.impl:
            python = args.horovod_python if impl == "horovod" else sys.executable
            for n in sorted(args.np):
                for row in run(impl, n, python, args.quick):
                    runs.setdefault((impl, n, row["case"]), []).append(row)
    rows = [dict(best(rs), runs=len(rs)) for rs in runs.values()]
    for row in rows:
        if row["case"] == "cnn_train":
            base = runs.get((row["impl"], 1, "cnn_train"))
            if base:
                row["scaling_efficiency"] = row["samples_per_s"] / (row["np"] * best(base)["samples_per_s"])
        print(json.dumps(row), flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
