"""The fixed cost of an operation: small allreduces and out-of-place results, against raw MPI in the same run.

    python benchmarks/small_ops_bench.py [--np 2 4] [--calls 3000] [--binding-args "--bind-to none"]

Cases (every rank runs each; rank 0 prints one JSON line per case and a table at the end):
  numpy_4B      a 4-byte float32 allreduce through ``jupyter_hvd`` (``hvd.allreduce``), p50 and p99 of the
                per-call time, against mpi4py's ``Allreduce`` of the same buffer. With it, where the time goes, from
                the engine's own metrics: its mean negotiation (enqueue to execution: the request to rank 0 and
                the response back) and collective time per operation on each rank, and the rest of the mean call
                (the Python layer and handing the result to the caller); named ``tiny``, then with a name of
                20 characters (longer than a string holds in itself, so each copy allocates) and unnamed (a new
                automatic name each call, negotiated in full). Then the short-named one started with
                ``allreduce_async`` and polled with ``hvd.poll`` in a busy loop until done, as a script that does
                other work between polls would.
  mxnet_4B      the same through ``jupyter_hvd.mxnet`` (pushed to MXNet's engine, then ``wait_to_read``),
                in a fresh process and again after a 64 MiB allreduce and the ResNet-50 gradient set; the rest
                of its mean call is MXNet's push, its threads' hand-offs and the wait. Beside it, in the same
                rounds, MXNet's own 4-byte operation into a new NDArray (``nd + 0``, then ``wait_to_read``):
                what MXNet alone costs for such a call, with no collective.
  resnet50_out  the ResNet-50 gradient set (299 float32 tensors, about 102 MB), enqueued with
                ``allreduce_async`` (out of place: into new arrays, and with ``out=`` into preallocated ones)
                and synchronized, against mpi4py's out-of-place ``Allreduce`` into preallocated buffers,
                tensor by tensor; the in-place forms of both too.
  large_out     where torch is installed: a 64 MiB allreduce into a new result through ``jupyter_hvd`` (numpy)
                and ``jupyter_hvd.torch``, against mpi4py's into a preallocated buffer, and torch's in place.
Rounds of each side alternate, so a busy machine slows both alike.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from allreduce_bench import timed

HERE = Path(__file__).resolve().parent


def per_call_us(fn, calls: int) -> np.ndarray:
    """Each call's time in microseconds."""
    return np.array(timed(fn, calls)) * 1e6


def alternate(comm, sides: dict, calls: int, rounds: int = 5) -> dict:
    """Per-call times of each side, in alternating rounds that start together on every rank."""
    got = {k: [] for k in sides}
    for _ in range(rounds):
        for k, fn in sides.items():
            comm.Barrier()
            got[k].append(per_call_us(fn, calls))
    return {k: np.concatenate(v) for k, v in got.items()}


def stats(times: np.ndarray) -> dict:
    return {"p50_us": float(np.percentile(times, 50)), "p99_us": float(np.percentile(times, 99)),
            "mean_us": float(times.mean())}


def engine_phases(hvd, comm, run) -> tuple:
    """Runs ``run``; returns what it returned and, from the engine's metrics, each rank's mean negotiation
    and collective time in microseconds per allreduce that ``run`` made (lists indexed by rank)."""
    before = hvd.metrics()
    result = run()
    after = hvd.metrics()
    n = max(after["ops"]["allreduce"] - before["ops"]["allreduce"], 1)
    mine = [(after[k] - before[k]) / n for k in ("negotiate_us", "collective_us")]
    every = comm.allgather(mine)
    return result, {"negotiate_us": [m[0] for m in every], "collective_us": [m[1] for m in every]}


def worker(calls: int) -> None:
    """Runs on every rank under hvdrun."""
    import mxnet as mx
    from mpi4py import MPI

    import jupyter_hvd as hvd
    import jupyter_hvd.mxnet as mxhvd

    mxhvd.init()
    comm, n, me = MPI.COMM_WORLD, hvd.size(), hvd.rank()

    def emit(row: dict) -> None:
        if me == 0:
            print(json.dumps({"np": n, **row}), flush=True)

    x, y = np.ones(1, np.float32), np.empty(1, np.float32)
    # A short name (kept in the string itself), one copied onto the heap, and the automatic one.
    for variant, name in ((None, "tiny"), ("a 20-character name", "metrics/train/loss20"), ("unnamed", None)):
        t, phases = engine_phases(hvd, comm, lambda: alternate(
            comm, {"mpi": lambda: comm.Allreduce(x, y), "hvd": lambda n=name: hvd.allreduce(x, name=n)}, calls))
        emit({"case": "numpy_4B", **({"after": variant} if variant else {}), "mpi": stats(t["mpi"]),
              "hvd": stats(t["hvd"]), "engine": phases})

    def polled():
        h = hvd.allreduce_async(x, name="tiny.polled")
        while not hvd.poll(h):
            pass
        h.wait()

    t, phases = engine_phases(hvd, comm, lambda: alternate(
        comm, {"mpi": lambda: comm.Allreduce(x, y), "hvd": polled}, calls // 3))
    emit({"case": "numpy_4B", "after": "async, poll() in a loop", "mpi": stats(t["mpi"]), "hvd": stats(t["hvd"]),
          "engine": phases})

    nd = mx.nd.ones((1,))

    def mx_tiny():
        mxhvd.allreduce(nd, name="mx.tiny").wait_to_read()

    mx_sides = {"mpi": lambda: comm.Allreduce(x, y), "hvd": mx_tiny, "mxnet_op": lambda: (nd + 0).wait_to_read()}
    t, phases = engine_phases(hvd, comm, lambda: alternate(comm, mx_sides, calls // 3))
    emit({"case": "mxnet_4B", "after": "fresh", "mpi": stats(t["mpi"]), "hvd": stats(t["hvd"]),
          "mxnet_op": stats(t["mxnet_op"]), "engine": phases})

    big = mx.nd.ones((16 << 20,))
    mxhvd.allreduce_(big, name="mx.big").wait_to_read()
    shapes = json.loads((HERE / "resnet50_v1_shapes.json").read_text())["shapes"]
    grads = [mx.nd.ones(s) for s in shapes]
    for i, g in enumerate(grads):
        mxhvd.allreduce_(g, name=f"mx.resnet.{i}")
    mx.nd.waitall()
    del big, grads
    t, phases = engine_phases(hvd, comm, lambda: alternate(comm, mx_sides, calls // 3))
    emit({"case": "mxnet_4B", "after": "64 MiB + ResNet-50", "mpi": stats(t["mpi"]), "hvd": stats(t["hvd"]),
          "mxnet_op": stats(t["mxnet_op"]), "engine": phases})

    ins = [np.ones(s, np.float32) for s in shapes]
    outs = [np.empty_like(a) for a in ins]

    def mpi_out():
        for a, b in zip(ins, outs):
            comm.Allreduce(a, b, op=MPI.SUM)

    def mpi_in():
        for b in outs:
            comm.Allreduce(MPI.IN_PLACE, b, op=MPI.SUM)

    def hvd_out():
        hs = [hvd.allreduce_async(a, op=hvd.Sum, name=f"resnet.{i}") for i, a in enumerate(ins)]
        for h in hs:
            h.wait()

    hvd_outs = [np.empty_like(a) for a in ins]

    def hvd_into():
        hs = [hvd.allreduce_async(a, op=hvd.Sum, name=f"resnet.{i}", out=o)
              for i, (a, o) in enumerate(zip(ins, hvd_outs))]
        for h in hs:
            h.wait()

    def hvd_in():
        hs = [hvd.allreduce_async_(b, op=hvd.Sum, name=f"resnet.{i}") for i, b in enumerate(outs)]
        for h in hs:
            h.wait()

    t = alternate(comm, {"mpi_out": mpi_out, "hvd_out": hvd_out, "hvd_into": hvd_into, "mpi_in": mpi_in,
                         "hvd_in": hvd_in}, 3)
    emit({"case": "resnet50_out", "bytes": int(sum(a.nbytes for a in ins)),
          **{k: float(np.median(v)) / 1e3 for k, v in t.items()}})
    if importlib.util.find_spec("torch") is not None:
        emit({"case": "large_out", **large_results(comm, hvd)})
    mxhvd.shutdown()


def large_results(comm, hvd) -> dict:
    """A 64 MiB allreduce into a new result, through numpy and torch, against MPI's into a preallocated buffer
    and torch's in place: each side's median time in ms."""
    import torch
    from mpi4py import MPI

    import jupyter_hvd.torch as thvd

    t = torch.ones(16 << 20)
    a, b = t.numpy(), np.empty(16 << 20, np.float32)
    sides = {"mpi_out": lambda: comm.Allreduce(a, b, op=MPI.SUM),
             "numpy_out": lambda: hvd.allreduce(a, op=hvd.Sum, name="large.numpy"),
             "torch_out": lambda: thvd.allreduce(t, op=hvd.Sum, name="large.torch"),
             "torch_in": lambda: thvd.allreduce_(t, op=hvd.Average, name="large.torch_")}
    return {k: float(np.median(v)) / 1e3 for k, v in alternate(comm, sides, 3).items()}


def per_rank(values: list) -> str:
    return " / ".join(f"{v:.1f}" for v in values)


def table(rows: list) -> str:
    out = []
    for r in rows:
        if r["case"] in ("numpy_4B", "mxnet_4B"):
            m, h = r["mpi"], r["hvd"]
            what = r["case"] + (f" ({r['after']})" if "after" in r else "")
            out.append(f"np={r['np']} {what:<36} MPI p50 {m['p50_us']:7.1f} p99 {m['p99_us']:8.1f} us   "
                       f"jupyter_hvd p50 {h['p50_us']:7.1f} p99 {h['p99_us']:8.1f} us   "
                       f"ratio p50 {h['p50_us'] / m['p50_us']:5.1f}x p99 {h['p99_us'] / m['p99_us']:5.1f}x")
            e = r["engine"]
            out.append(f"{'':<6}mean {h['mean_us']:.1f} us: the engine's negotiation {per_rank(e['negotiate_us'])} us "
                       f"and collective {per_rank(e['collective_us'])} us (rank 0 / 1 / ...), the rest on rank 0 "
                       f"{h['mean_us'] - e['negotiate_us'][0] - e['collective_us'][0]:.1f} us")
            if "mxnet_op" in r:
                out.append(f"{'':<6}MXNet's own 4-byte op into a new NDArray, then wait_to_read: p50 "
                           f"{r['mxnet_op']['p50_us']:.1f} us (its push, its threads and the wait, no collective)")
        elif r["case"] == "large_out":
            out.append(f"np={r['np']} 64 MiB into a new result: MPI into a preallocated buffer {r['mpi_out']:.1f} ms, "
                       f"numpy {r['numpy_out']:.1f} ms ({r['numpy_out'] / r['mpi_out']:.2f}x), torch "
                       f"{r['torch_out']:.1f} ms ({r['torch_out'] / r['mpi_out']:.2f}x); torch in place "
                       f"{r['torch_in']:.1f} ms")
        else:
            out.append(f"np={r['np']} ResNet-50 set ({r['bytes'] / 1e6:.0f} MB): out of place MPI {r['mpi_out']:.1f} ms, "
                       f"jupyter_hvd {r['hvd_out']:.1f} ms ({r['hvd_out'] / r['mpi_out']:.2f}x), with out= "
                       f"{r['hvd_into']:.1f} ms ({r['hvd_into'] / r['mpi_out']:.2f}x); in place MPI "
                       f"{r['mpi_in']:.1f} ms, jupyter_hvd {r['hvd_in']:.1f} ms ({r['hvd_in'] / r['mpi_in']:.2f}x)")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--np", type=int, nargs="+", default=[2, 4])
    p.add_argument("--calls", type=int, default=3000, help="calls per round of the 4-byte cases")
    p.add_argument("--binding-args", metavar="ARGS",
                   help='hvdrun\'s, e.g. "--bind-to none" (default: hvdrun\'s placement)')
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args.calls)
    rows = []
    for n in args.np:
        binding = [f"--binding-args={args.binding_args}"] if args.binding_args else []
        cmd = [sys.executable, "-m", "jupyter_hvd.runner.hvdrun", "-np", str(n), *binding, sys.executable, __file__,
               "--worker", "--calls", str(args.calls)]
        env = dict(os.environ, OMP_NUM_THREADS="1", MXNET_CPU_WORKER_NTHREADS="1")
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
        if res.returncode:
            sys.exit(f"np={n} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")
        for line in res.stdout.splitlines():
            if line.startswith("{"):
                rows.append(json.loads(line))
                print(line, flush=True)
    print(table(rows))


if __name__ == "__main__":
    main()
