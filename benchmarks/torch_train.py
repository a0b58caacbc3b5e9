"""PyTorch data-parallel training throughput: jupyter_hvd.torch against torch's DistributedDataParallel (gloo).

    python benchmarks/torch_train.py [--np 2 4] [--repeat 3] [--steps 60] [--quick] [--channels-last]

Cases, each rank with one compute thread (OMP_NUM_THREADS=1):
  cnn_train   a small CNN (2 conv + 2 dense) on synthetic 28x28 data, batch 64 per rank: hvd.DistributedOptimizer
              and DistributedDataParallel (gloo, CPU) at each rank count, run one after the other in each round
              (their order alternating) so both see the same load; samples/s of the job, the median of the rounds'
              ratios of the two, and the scaling efficiency against one plain torch process (no library) run in
              the same round. The "no communication" row runs plain torch on every rank at once, each training
              on its own: what the machine itself allows at that rank count (the ranks share its memory bandwidth
              and caches), the ceiling for any data-parallel library's efficiency there. "no comm. in
              lockstep" is those runs' rate had every step lasted as long as the slowest rank's same step: the
              ceiling for a synchronous library (each step waits for every rank's gradients) whose
              communication cost nothing; its distance below "no communication" is the machine's own jitter in
              compute. "blocking MPI" trains plain torch ranks that average each gradient with a blocking
              MPI_Allreduce (mpi4py) after backward: the simplest synchronous loop, with no thread of its own.
              For every row, per rank, the time zero_grad + forward + backward took per step; for each row of
              ours, also the time a step waited in synchronize() and its engine thread's CPU time per step
              (where the rest of a step goes besides the model).
              --channels-last trains every case with the model and its input in torch.channels_last (NHWC)
              memory format.
  op_latency  a 4-byte CPU tensor allreduce, one at a time, at np=2: jupyter_hvd.torch's allreduce_, the core's
              on a numpy array, and MPI_Allreduce of the same 4 bytes (mpi4py), in the same job.
Prints a table and one JSON line per case; medians over the rounds.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BATCH = 64


def build(seed: int):
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(32, 64, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(64 * 5 * 5, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))


def train_worker(impl: str, steps: int, port: int, channels_last: bool) -> None:
    """One rank's training loop; rank 0 prints the job's samples/s (every rank's samples over the slowest rank)."""
    import torch
    import torch.nn.functional as F
    from mpi4py import MPI

    torch.set_num_threads(1)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    layout = torch.channels_last if channels_last else torch.contiguous_format
    model = build(0).to(memory_format=layout)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if impl == "jupyter_hvd":
        import jupyter_hvd.torch as hvd

        hvd.init()
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        opt = hvd.DistributedOptimizer(opt, named_parameters=model.named_parameters())
    elif impl == "ddp":
        import torch.distributed as dist

        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=size)
        model = torch.nn.parallel.DistributedDataParallel(model)
    g = torch.Generator().manual_seed(rank)
    x, y = torch.rand(BATCH, 1, 28, 28, generator=g), torch.randint(0, 10, (BATCH,), generator=g)
    x = x.to(memory_format=layout)

    waited, computed = [0.0], [0.0]  # per step: in synchronize(), and in zero_grad + forward + backward

    def step():
        start = time.perf_counter()
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        computed[0] += time.perf_counter() - start
        if impl == "mpi":
            for p in model.parameters():
                comm.Allreduce(MPI.IN_PLACE, p.grad.numpy(), op=MPI.SUM)
                p.grad.div_(size)
        if impl != "jupyter_hvd":
            return opt.step()
        start = time.perf_counter()  # Horovod's pattern for a loop that synchronizes itself
        opt.synchronize()
        waited[0] += time.perf_counter() - start
        with opt.skip_synchronize():
            opt.step()

    for _ in range(5):
        step()
    comm.Barrier()
    waited[0], computed[0], engine_start = 0.0, 0.0, engine_cpu_s()
    start = time.perf_counter()
    step_ends = []
    for _ in range(steps):
        step()
        step_ends.append(time.perf_counter())
    elapsed = comm.allreduce(time.perf_counter() - start, op=MPI.MAX)
    # Plain ranks train on their own. Had each step waited for the slowest rank's (as every synchronous
    # data-parallel step does, its communication aside), a step would have taken the longest of the ranks'
    # n-th steps: the machine's own jitter in compute sets that ceiling below the ranks' free-running one.
    lockstep = {}
    if impl == "plain" and size > 1:
        durations = comm.gather([end - begin for begin, end in zip([start] + step_ends, step_ends)], root=0)
        if rank == 0:
            lockstep = {"lockstep_samples_per_s": size * steps * BATCH / sum(map(max, zip(*durations)))}
    # Where a step's time goes: the model's (forward and backward, slowed by whatever else takes the core), and
    # for ours each rank's wait for its gradients' allreduces (for the slower rank's backward, then the last
    # ones' communication) and its engine thread's CPU time.
    cost = {"compute_ms": computed[0] / steps * 1e3}
    if impl == "jupyter_hvd":
        cost.update(sync_wait_ms=waited[0] / steps * 1e3, engine_cpu_ms=(engine_cpu_s() - engine_start) / steps * 1e3)
    cost = comm.gather(cost, root=0)
    if rank == 0:
        per_rank = {k: [round(c[k], 2) for c in cost] for k in cost[0]}
        print(json.dumps({"samples_per_s": size * steps * BATCH / elapsed, **per_rank, **lockstep}), flush=True)
    if impl == "jupyter_hvd":
        hvd.shutdown()
    elif impl == "ddp":
        dist.destroy_process_group()


def engine_cpu_s() -> float:
    """CPU seconds the engine thread ("hvd-engine") of this process has run; 0 where it cannot be read."""
    for task in Path("/proc/self/task").glob("*"):
        try:
            if (task / "comm").read_text().strip() == "hvd-engine":
                return int((task / "schedstat").read_text().split()[0]) / 1e9
        except OSError:
            continue
    return 0.0


def latency_worker(iters: int) -> None:
    """Median µs of one 4-byte allreduce: jupyter_hvd.torch's allreduce_, the core's on a numpy array (what the
    torch layer adds is the difference), and raw MPI_Allreduce."""
    import numpy as np
    import torch
    from mpi4py import MPI

    import jupyter_hvd
    import jupyter_hvd.torch as hvd

    hvd.init()
    comm = MPI.COMM_WORLD
    t = torch.ones(1)
    buf, out = np.ones(1, np.float32), np.empty(1, np.float32)

    def timed(op) -> float:
        for _ in range(200):
            op()
        samples = []
        for _ in range(iters):
            start = time.perf_counter()
            op()
            samples.append(time.perf_counter() - start)
        return statistics.median(samples) * 1e6

    results = {}
    for _ in range(3):  # interleaved rounds: the same load for both
        results.setdefault("jupyter_hvd_us", []).append(timed(lambda: hvd.allreduce_(t, name="lat", op=hvd.Sum)))
        comm.Barrier()
        results.setdefault("core_numpy_us", []).append(
            timed(lambda: jupyter_hvd.allreduce_(buf, name="lat.np", op=hvd.Sum)))
        comm.Barrier()
        results.setdefault("mpi_us", []).append(timed(lambda: comm.Allreduce(buf, out, op=MPI.SUM)))
        comm.Barrier()
    if comm.Get_rank() == 0:
        print(json.dumps({k: statistics.median(v) for k, v in results.items()}), flush=True)
    hvd.shutdown()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(np_: int, args: list, env: dict | None = None, timeout: float = 600) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", **(env or {}))
    cmd = [sys.executable, "-m", "jupyter_hvd.runner.hvdrun", "-np", str(np_), sys.executable, __file__, *args]
    out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return json.loads(lines[-1])


# What runs in each round at each rank count: (worker, environment). The engine thread's busy-polling after work
# (JUPYTER_HVD_SPIN_US: 2000 us by default, at most 200 us where its core is contended) takes CPU from the ranks'
# compute threads where they fill the cores: the second row shows training without it. Where they fill them, the
# optimizer also starts the allreduces in step() rather than during backward (JUPYTER_HVD_OVERLAP): the third row
# overlaps them with backward anyway, as Horovod does.
VARIANTS = {"jupyter_hvd": ("jupyter_hvd", {}), "jupyter_hvd spin 0": ("jupyter_hvd", {"JUPYTER_HVD_SPIN_US": "0"}),
            "jupyter_hvd overlap 1": ("jupyter_hvd", {"JUPYTER_HVD_OVERLAP": "1"}),
            "ddp": ("ddp", {}), "blocking MPI": ("mpi", {}), "no communication": ("plain", {})}
# The "no communication" runs' steps as if each had waited for the slowest rank's (train_worker).
LOCKSTEP = "no comm. in lockstep"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--np", type=int, nargs="+", default=[2, 4])
    p.add_argument("--repeat", type=int, default=3, help="rounds; each runs every case once")
    p.add_argument("--steps", type=int, default=60, help="timed steps per run")
    p.add_argument("--quick", action="store_true", help="one round of 20 steps")
    p.add_argument("--channels-last", action="store_true", help="model and input in channels_last format")
    p.add_argument("--worker", choices=["plain", "jupyter_hvd", "ddp", "mpi", "latency"], help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker == "latency":
        return latency_worker(2000 if not args.quick else 300)
    if args.worker:
        return train_worker(args.worker, args.steps, args.port, args.channels_last)
    if args.quick:
        args.repeat, args.steps = 1, 20

    rates: dict = {}
    costs: dict = {}  # (variant, np) -> each round's per-rank costs of a step
    for r in range(args.repeat):
        layout = ["--channels-last"] if args.channels_last else []
        rates.setdefault("plain", []).append(launch(1, ["--worker", "plain", "--steps", str(args.steps), *layout]))
        for np_ in args.np:
            names = list(VARIANTS)
            for name in names[r % len(names):] + names[:r % len(names)]:  # a different one first each round
                worker, env = VARIANTS[name]
                run = ["--worker", worker, "--steps", str(args.steps), "--port", str(free_port())]
                run += layout
                result = launch(np_, run, env)
                rates.setdefault((name, np_), []).append(result["samples_per_s"])
                if "lockstep_samples_per_s" in result:
                    rates.setdefault((LOCKSTEP, np_), []).append(result["lockstep_samples_per_s"])
                costs.setdefault((name, np_), []).append(result)
    plain = [x["samples_per_s"] for x in rates["plain"]]
    print(f"{'case':<12}{'np':>4}{'impl':>22}{'samples/s':>12}{'efficiency':>12}{'vs DDP':>9}")
    print(f"{'cnn_train':<12}{1:>4}{'plain torch':>22}{statistics.median(plain):>12.0f}")
    for np_ in args.np:
        runs = {name: rates[name, np_] for name in (*VARIANTS, LOCKSTEP)}
        # Each round ran every variant back to back: medians of per-round ratios are the least disturbed by the
        # load changing between rounds. Efficiency: against the plain process of the same round.
        ratio = {name: statistics.median(a / b for a, b in zip(v, runs["ddp"])) for name, v in runs.items()}
        eff = {name: statistics.median(a / (np_ * b) for a, b in zip(v, plain)) for name, v in runs.items()}
        for name, v in runs.items():
            print(f"{'cnn_train':<12}{np_:>4}{name:>22}{statistics.median(v):>12.0f}{eff[name]:>12.1%}"
                  f"{ratio[name]:>9.2f}")
        cost = {name: {k: [round(statistics.median(c[k][i] for c in costs[name, np_]), 2) for i in range(np_)]
                       for k in costs[name, np_][0] if k.endswith("_ms")} for name in VARIANTS}
        for name, c in cost.items():
            ours = (f", waits in synchronize {c['sync_wait_ms']} ms, engine thread CPU {c['engine_cpu_ms']} ms"
                    if "sync_wait_ms" in c else "")
            print(f"{'':<16}{name} per step, by rank: forward + backward {c['compute_ms']} ms{ours}")
        print(json.dumps({"case": "cnn_train", "np": np_, "per_rank_ms": cost,
                          "plain_1rank_samples_per_s": round(statistics.median(plain)),
                          "samples_per_s": {n: round(statistics.median(v)) for n, v in runs.items()},
                          "scaling_efficiency": {n: round(v, 3) for n, v in eff.items()},
                          "ratio_vs_ddp": {n: round(v, 3) for n, v in ratio.items()},
                          "runs": {n: [round(x) for x in v] for n, v in runs.items()},
                          "plain_runs": [round(x) for x in plain]}))
    lat = launch(2, ["--worker", "latency"] + (["--quick"] if args.quick else []))
    print(f"{'op_latency':<12}{2:>4}  4-byte allreduce: jupyter_hvd.torch {lat['jupyter_hvd_us']:.1f} us, "
          f"core on numpy {lat['core_numpy_us']:.1f} us, MPI {lat['mpi_us']:.1f} us; "
          f"overhead vs MPI {lat['jupyter_hvd_us'] - lat['mpi_us']:.1f} us")
    print(json.dumps({"case": "op_latency", "np": 2, "bytes": 4, **{k: round(v, 2) for k, v in lat.items()}}))


if __name__ == "__main__":
    main()
