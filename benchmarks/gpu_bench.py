"""GPU benchmarks on one rank: the device fusion buffer's copy bandwidth against a plain
device-to-device copy of the same bytes (goal: 80% or more), NCCL allreduce time per size, and,
where torch is installed, a 4-byte CUDA tensor's allreduce through ``jupyter_hvd.torch`` against
torch.distributed's NCCL in the same process.

Run on one rank (``hvdrun -np 1 python benchmarks/gpu_bench.py``). Prints a table per part and
one JSON line per case. Times of the engine's phases are the device's own (CUDA events); the
end-to-end time also includes negotiation and the Python call. The floor for the allreduce is
CuPy's own NCCL binding on the same buffer, in place as the engine's call is, when CuPy has one.
"""
import argparse
import json
import os
import statistics
import sys
import time

# Fusion of tensors of any size up to 256 MiB in one buffer, set before the engine starts.
os.environ.setdefault("HOROVOD_FUSION_THRESHOLD", str(256 << 20))
os.environ.setdefault("JUPYTER_HVD_FUSION_MAX_TENSOR", str(64 << 20))
os.environ.setdefault("HOROVOD_CYCLE_TIME", "5")

import jupyter_hvd as hvd  # noqa: E402

MiB = 1 << 20


def emit(kind: str, **fields) -> None:
    print(json.dumps({"bench": kind, **fields}), flush=True)


def plain_copy_us(cupy, nbytes: int, pieces: int, repeat: int) -> float:
    """Median device time of copying ``nbytes`` device-to-device, as one copy or ``pieces`` copies."""
    src = cupy.ones(nbytes, cupy.uint8)
    dst = cupy.empty(nbytes, cupy.uint8)
    stream = cupy.cuda.Stream(non_blocking=True)
    step = nbytes // pieces
    times = []
    for _ in range(repeat):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for i in range(pieces):
            cupy.cuda.runtime.memcpyAsync(dst.data.ptr + i * step, src.data.ptr + i * step, step, 3, stream.ptr)
        end.record(stream)
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) * 1000.0)
    return statistics.median(times)


def fusion_case(cupy, count: int, each: int, repeat: int) -> dict:
    """``count`` float32 tensors of ``each`` bytes allreduced together: the engine copies them into
    its device fusion buffer and back out; its MEMCPY phases time those copies on the device."""
    xs = [cupy.ones(each // 4, cupy.float32) for _ in range(count)]
    cupy.cuda.Device().synchronize()
    ins, outs, fused = [], [], []
    for it in range(repeat + 2):
        before = hvd.metrics()
        hvd.grouped_allreduce_async(xs, op=hvd.Sum, name=f"fuse.{count}.{each}").wait()  # one group: one fused buffer
        after = hvd.metrics()
        if it >= 2:  # the first rounds grow the buffer and fill the response cache
            ins.append(after["memcpy_in_us"] - before["memcpy_in_us"])
            outs.append(after["memcpy_out_us"] - before["memcpy_out_us"])
            fused.append(after["fused_tensors"] - before["fused_tensors"])
    total = count * each
    t_in, t_out = statistics.median(ins), statistics.median(outs)
    plain_one = plain_copy_us(cupy, total, 1, repeat)
    plain_pieces = plain_copy_us(cupy, total, count, repeat)
    gbps = lambda us: total / us / 1e3 if us > 0 else float("nan")  # noqa: E731
    return {"tensors": count, "tensor_bytes": each, "bytes": total, "fused_tensors": statistics.median(fused),
            "memcpy_in_us": t_in, "memcpy_out_us": t_out, "plain_copy_us": plain_one,
            "plain_copies_us": plain_pieces, "in_GBps": gbps(t_in), "out_GBps": gbps(t_out),
            "plain_GBps": gbps(plain_one), "in_vs_plain": plain_one / t_in if t_in else float("nan"),
            "out_vs_plain": plain_one / t_out if t_out else float("nan")}


def cupy_nccl(cupy):
    """A one-rank communicator of CuPy's NCCL binding, or None when CuPy has none."""
    try:
        from cupy.cuda import nccl

        if not nccl.available:
            return None
        return nccl.NcclCommunicator(1, nccl.get_unique_id(), 0)
    except Exception:
        return None


def allreduce_case(cupy, comm, nbytes: int, repeat: int) -> dict:
    n = max(nbytes // 4, 1)
    x = cupy.ones(n, cupy.float32)
    e2e, enq, dev, neg = [], [], [], []
    for it in range(repeat + 3):
        before = hvd.metrics()
        t0 = time.perf_counter()
        handle = hvd.allreduce_async_(x, op=hvd.Sum, name=f"ar.{nbytes}")
        t1 = time.perf_counter()
        handle.wait()
        t2 = time.perf_counter()
        if it >= 3:
            after = hvd.metrics()
            e2e.append((t2 - t0) * 1e6)
            enq.append((t1 - t0) * 1e6)
            dev.append(after["collective_us"] - before["collective_us"])
            neg.append(after["negotiate_us"] - before["negotiate_us"])
    blocking = []  # allreduce_: the caller's own thread runs the op while it waits (no hand-off)
    for it in range(repeat + 3):
        t0 = time.perf_counter()
        hvd.allreduce_(x, op=hvd.Sum, name=f"ar_.{nbytes}")
        if it >= 3:
            blocking.append((time.perf_counter() - t0) * 1e6)
    row = {"bytes": n * 4, "engine_us": statistics.median(e2e), "enqueue_us": statistics.median(enq),
           "negotiate_us": statistics.median(neg), "nccl_phase_us": statistics.median(dev),
           "blocking_us": statistics.median(blocking)}
    if comm is not None:
        from cupy.cuda import nccl

        stream = cupy.cuda.Stream(non_blocking=True)
        times = []
        for it in range(repeat + 3):
            t0 = time.perf_counter()
            comm.allReduce(x.data.ptr, x.data.ptr, n, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, stream.ptr)
            stream.synchronize()
            if it >= 3:
                times.append((time.perf_counter() - t0) * 1e6)
        row["raw_nccl_us"] = statistics.median(times)
    return row


def torch_small_case(calls: int) -> dict:
    """A 4-byte float32 CUDA tensor allreduced end to end (until torch's current stream has the result):
    ``jupyter_hvd.torch`` out of place and in place, against torch.distributed's NCCL (one rank, in place),
    in alternating rounds; p50 and p99 of each call in microseconds."""
    import socket

    import torch
    import torch.distributed as dist

    import jupyter_hvd.torch as thvd

    device = torch.device("cuda", torch.cuda.current_device())
    t = torch.ones(1, device=device)
    stream = torch.cuda.current_stream(device)
    sides = {"jupyter_hvd": lambda: thvd.allreduce(t, op=thvd.Sum, name="torch.tiny"),
             "jupyter_hvd_inplace": lambda: thvd.allreduce_(t, op=thvd.Sum, name="torch.tiny_")}
    if dist.is_available() and dist.is_nccl_available():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1,
                                device_id=device)
        sides["torch_nccl"] = lambda: dist.all_reduce(t)
    times = {k: [] for k in sides}
    for _ in range(5):
        for k, fn in sides.items():
            for it in range(calls + 20):
                t0 = time.perf_counter()
                fn()
                stream.synchronize()
                if it >= 20:
                    times[k].append((time.perf_counter() - t0) * 1e6)
    if dist.is_initialized():
        dist.destroy_process_group()
    pct = lambda v, q: sorted(v)[int(q * (len(v) - 1))]  # noqa: E731
    return {k: {"p50_us": pct(v, 0.5), "p99_us": pct(v, 0.99)} for k, v in times.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--max-bytes", type=int, default=256 * MiB)
    ap.add_argument("--small-calls", type=int, default=400, help="calls per round of the 4-byte torch case")
    args = ap.parse_args()
    try:
        import cupy
    except ImportError:
        print("gpu_bench: CuPy is not installed; nothing to measure")
        return 2
    if not hvd.nccl_built():
        print(f"gpu_bench: NCCL is not usable here: {hvd.gpu_status()['reason']}")
        return 2
    hvd.init()
    cupy.cuda.Device(hvd.local_rank() % cupy.cuda.runtime.getDeviceCount()).use()
    st = hvd.gpu_status()
    print(f"# device {cupy.cuda.Device().id}: {cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)['name']}"
          f" | CUDA runtime {st['cuda_runtime']['version']} | driver CUDA {st['driver']} | NCCL {st['nccl']['version']}")

    for batched in (True, False):  # batched copies (the copy kernel where it loads), then a copy per tensor
        if not batched:
            hvd.shutdown()
            os.environ["HOROVOD_BATCH_D2D_MEMCOPIES"] = "0"
            hvd.init()
        how = "a copy per tensor"
        if batched:
            fusion_case(cupy, 2, 4096, 1)  # the engine's first GPU op loads the copy kernel
            kernel = hvd.gpu_status()["copy_kernel"]
            how = "the copy kernel" if kernel == "loaded" else f"the runtime's copies, no copy kernel: {kernel}"
        print(f"\n## Device fusion buffer ({how}): copy bandwidth vs one plain device-to-device copy of the same bytes")
        print(f"{'tensors':>8} {'each':>10} {'total MiB':>10} {'fused':>6} {'in GB/s':>9} {'out GB/s':>9} "
              f"{'plain GB/s':>10} {'in/plain':>9} {'out/plain':>9} {'N copies us':>12}")
        for count, each in [(16, 16 * MiB), (64, 1 * MiB), (256, 256 << 10), (1024, 64 << 10), (2048, 4 << 10)]:
            if count * each > args.max_bytes:
                continue
            r = fusion_case(cupy, count, each, args.repeat)
            print(f"{count:>8} {each:>10} {r['bytes'] / MiB:>10.1f} {r['fused_tensors']:>6.0f} {r['in_GBps']:>9.1f} "
                  f"{r['out_GBps']:>9.1f} {r['plain_GBps']:>10.1f} {r['in_vs_plain']:>9.0%} "
                  f"{r['out_vs_plain']:>9.0%} {r['plain_copies_us']:>12.1f}")
            emit("gpu_fusion_copy", copies=how, **r)

    print("\n## One-rank allreduce (float32, in place): engine end to end with allreduce_async_ + wait (and its enqueue"
          " call, and the engine's time from enqueue to execution), blocking allreduce_, its NCCL"
          " phase on the device, raw NCCL")
    comm = cupy_nccl(cupy)
    print(f"{'bytes':>11} {'engine us':>10} {'enqueue us':>11} {'negotiate us':>13} {'blocking us':>12} "
          f"{'nccl phase us':>14} {'raw nccl us':>12}")
    size = 4
    while size <= args.max_bytes:
        calls = args.repeat * 10 if size <= 64 << 10 else args.repeat if size <= 16 * MiB else max(args.repeat // 4, 3)
        r = allreduce_case(cupy, comm, size, calls)
        raw = f"{r['raw_nccl_us']:>12.1f}" if "raw_nccl_us" in r else f"{'n/a':>12}"
        print(f"{r['bytes']:>11} {r['engine_us']:>10.1f} {r['enqueue_us']:>11.1f} {r['negotiate_us']:>13.1f} "
              f"{r['blocking_us']:>12.1f} {r['nccl_phase_us']:>14.1f} {raw}")
        emit("gpu_allreduce_1rank", **r)
        size *= 4
    try:
        import torch  # noqa: F401
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        r = torch_small_case(args.small_calls)
        print("\n## One-rank 4-byte CUDA tensor allreduce, end to end (torch's current stream synchronized)")
        for k, v in r.items():
            print(f"{k:>20}: p50 {v['p50_us']:7.1f} us  p99 {v['p99_us']:8.1f} us")
        emit("torch_cuda_4B_1rank", **r)
    hvd.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
