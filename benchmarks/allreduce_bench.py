"""Engine allreduce vs raw MPI_Allreduce (mpi4py) on the same buffers, in the same run.

    python benchmarks/allreduce_bench.py [--np 2 4] [--quick]

Prints a table per rank count and one JSON line per case. Cases: in-place allreduce of one
float32 buffer from 4 B to 256 MiB (p50 latency, bus bandwidth = 2(n-1)/n * bytes / time),
a ResNet-50 step: the 299 parameter tensors of Gluon's resnet50_v1 (~102 MB), enqueued
all at once and then waited, against raw MPI called tensor by tensor; a step of 256 small
(1 KiB) tensors, started one by one and as one grouped_allreduce_, against raw MPI the same way;
reducescatter of 4 and 32 MiB against MPI_Reduce_scatter; and an Average of 4 Mi elements in float32,
float16 and bfloat16 (where ml_dtypes is installed) against what MPI offers for it: a float32
MPI_Allreduce, then a numpy division (MPI has no 16-bit float types).
"""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SIZES = [4, 64, 1 << 10, 16 << 10, 256 << 10, 4 << 20, 64 << 20, 256 << 20]


def timed(fn, calls: int) -> list:
    """Per-call times of ``calls`` calls of ``fn``."""
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def worker(quick: bool) -> None:
    """Runs on every rank under hvdrun; rank 0 prints JSON lines."""
    from mpi4py import MPI

    import jupyter_hvd as hvd
    from jupyter_hvd.dtypes import CODES

    hvd.init()
    comm, n, me = MPI.COMM_WORLD, hvd.size(), hvd.rank()
    budget = 0.2 if quick else 0.6
    sizes = SIZES[:-1] if quick else SIZES

    def both(mpi_fn, hvd_fn, warmup):
        """Alternating rounds of each side; each side's median per-call time.

        Every rank must make the same calls, so rank 0 sizes the rounds from the warm-up.
        """
        est = np.median(timed(mpi_fn, warmup) + timed(hvd_fn, warmup))
        calls = comm.bcast(int(np.clip(budget / 6 / max(est, 1e-7), 3, 2000)), root=0)
        res = {"mpi": [], "hvd": []}
        for _ in range(3):
            for side, fn in (("mpi", mpi_fn), ("hvd", hvd_fn)):
                comm.Barrier()
                res[side] += timed(fn, calls)
        return {k: float(np.median(v)) for k, v in res.items()}

    for nbytes in sizes:
        a = np.ones(nbytes // 4, dtype=np.float32)
        b = np.ones(nbytes // 4, dtype=np.float32)
        iters = 1 if nbytes >= (64 << 20) else 20
        t = both(lambda: comm.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM),
                 lambda: hvd.allreduce_(b, op=hvd.Sum, name="bench"), iters)
        busbw = lambda s: 2 * (n - 1) / n * nbytes / s / 1e9  # noqa: E731
        if me == 0:
            print(json.dumps({"case": "allreduce", "np": n, "bytes": nbytes, "mpi_p50_us": t["mpi"] * 1e6,
                              "hvd_p50_us": t["hvd"] * 1e6, "mpi_busbw_GBs": busbw(t["mpi"]),
                              "hvd_busbw_GBs": busbw(t["hvd"]), "hvd_over_mpi_time": t["hvd"] / t["mpi"]}),
                  flush=True)

    shapes = json.loads((HERE / "resnet50_v1_shapes.json").read_text())["shapes"]
    mine = [np.ones(s, dtype=np.float32) for s in shapes]
    raw = [np.ones(s, dtype=np.float32) for s in shapes]

    def mpi_step():
        for t in raw:
            comm.Allreduce(MPI.IN_PLACE, t, op=MPI.SUM)

    def hvd_step():
        hs = [hvd.allreduce_async_(t, op=hvd.Sum, name=f"resnet.{i}") for i, t in enumerate(mine)]
        for h in hs:
            h.wait()

    small = [np.ones(256, dtype=np.float32) for _ in range(256)]
    small_raw = [np.ones(256, dtype=np.float32) for _ in range(256)]

    def mpi_small():
        for x in small_raw:
            comm.Allreduce(MPI.IN_PLACE, x, op=MPI.SUM)

    def hvd_small_each():
        for h in [hvd.allreduce_async_(x, op=hvd.Sum, name=f"small.{i}") for i, x in enumerate(small)]:
            h.wait()

    t = both(mpi_small, hvd_small_each, 2)
    g = both(mpi_small, lambda: hvd.grouped_allreduce_(small, op=hvd.Sum, name="small.group"), 2)
    if me == 0:
        print(json.dumps({"case": "small_tensors_step", "np": n, "tensors": len(small), "mpi_ms": t["mpi"] * 1e3,
                          "hvd_each_ms": t["hvd"] * 1e3, "hvd_grouped_ms": g["hvd"] * 1e3,
                          "grouped_speedup_vs_mpi": g["mpi"] / g["hvd"]}), flush=True)

    for nbytes in (4 << 20, 32 << 20):
        x = np.ones(nbytes // 4, dtype=np.float32)
        block = np.empty(nbytes // 4 // n, dtype=np.float32)
        t = both(lambda: comm.Reduce_scatter(x, block, [block.size] * n, op=MPI.SUM),
                 lambda: hvd.reducescatter(x, op=hvd.Sum, name="rs"), 3)
        if me == 0:
            print(json.dumps({"case": "reducescatter", "np": n, "bytes": nbytes, "mpi_p50_us": t["mpi"] * 1e6,
                              "hvd_p50_us": t["hvd"] * 1e6, "hvd_over_mpi_time": t["hvd"] / t["mpi"]}), flush=True)

    count = 4 << 20
    ref = np.ones(count, dtype=np.float32)

    def mpi_average():
        comm.Allreduce(MPI.IN_PLACE, ref, op=MPI.SUM)
        ref[:] /= n

    for dtype in [dt for dt in CODES if dt.itemsize <= 4 and (dt.kind == "f" or dt.name == "bfloat16")]:
        x = np.ones(count, dtype=dtype)
        t = both(mpi_average, lambda: hvd.allreduce_(x, op=hvd.Average, name=f"average.{dtype.name}"), 3)
        if me == 0:
            print(json.dumps({"case": "average", "np": n, "dtype": dtype.name, "elements": count,
                              "mpi_p50_us": t["mpi"] * 1e6, "hvd_p50_us": t["hvd"] * 1e6,
                              "hvd_over_mpi_time": t["hvd"] / t["mpi"]}), flush=True)

    t = both(mpi_step, hvd_step, 1)
    if me == 0:
        print(json.dumps({"case": "resnet50_step", "np": n, "tensors": len(shapes),
                          "bytes": int(sum(x.nbytes for x in mine)), "mpi_ms": t["mpi"] * 1e3,
                          "hvd_ms": t["hvd"] * 1e3, "hvd_speedup_vs_mpi": t["mpi"] / t["hvd"]}), flush=True)
    hvd.shutdown()


def table(rows: list) -> str:
    """The human-readable summary of the JSON rows of one run."""
    out = []
    for r in rows:
        if r["case"] == "allreduce":
            out.append(f"np={r['np']} {r['bytes']:>10} B   MPI {r['mpi_p50_us']:>10.1f} us {r['mpi_busbw_GBs']:6.2f} GB/s"
                       f"   jupyter_hvd {r['hvd_p50_us']:>10.1f} us {r['hvd_busbw_GBs']:6.2f} GB/s"
                       f"   time ratio {r['hvd_over_mpi_time']:.3f}")
        elif r["case"] == "reducescatter":
            out.append(f"np={r['np']} reducescatter {r['bytes']:>10} B   MPI_Reduce_scatter {r['mpi_p50_us']:>10.1f} us"
                       f"   jupyter_hvd {r['hvd_p50_us']:>10.1f} us   time ratio {r['hvd_over_mpi_time']:.3f}")
        elif r["case"] == "average":
            out.append(f"np={r['np']} Average of {r['elements']} {r['dtype']:>8}   MPI float32 + division "
                       f"{r['mpi_p50_us']:>10.1f} us   jupyter_hvd {r['hvd_p50_us']:>10.1f} us"
                       f"   time ratio {r['hvd_over_mpi_time']:.3f}")
        elif r["case"] == "small_tensors_step":
            out.append(f"np={r['np']} {r['tensors']} tensors of 1 KiB: MPI tensor-by-tensor {r['mpi_ms']:.2f} ms, "
                       f"jupyter_hvd one by one {r['hvd_each_ms']:.2f} ms, grouped {r['hvd_grouped_ms']:.2f} ms, "
                       f"grouped speedup {r['grouped_speedup_vs_mpi']:.2f}x")
        else:
            out.append(f"np={r['np']} ResNet-50 step ({r['tensors']} tensors, {r['bytes'] / 1e6:.0f} MB): "
                       f"MPI tensor-by-tensor {r['mpi_ms']:.1f} ms, jupyter_hvd {r['hvd_ms']:.1f} ms, "
                       f"speedup {r['hvd_speedup_vs_mpi']:.2f}x")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--np", type=int, nargs="+", default=[2, 4])
    p.add_argument("--quick", action="store_true", help="smaller budget, sizes up to 64 MiB")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args.quick)
    for n in args.np:
        cmd = [sys.executable, "-m", "jupyter_hvd.runner.hvdrun", "-np", str(n), sys.executable, __file__, "--worker"]
        env = dict(os.environ, OMP_NUM_THREADS="1")
        res = subprocess.run(cmd + (["--quick"] if args.quick else []), capture_output=True, text=True, env=env,
                             timeout=1800)
        rows = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
        for r in rows:
            print(json.dumps(r))
        print(table(rows))
        if res.returncode:
            sys.exit(f"np={n} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}")


if __name__ == "__main__":
    main()
