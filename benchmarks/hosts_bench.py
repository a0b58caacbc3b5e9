"""Jobs across the namespace hosts of tests/hosts (run as root): the engine's 64 MiB allreduce across 2 hosts
against raw MPI_Allreduce (mpi4py) on the same buffers in the same job, and how long a lost host takes to
release every rank on the other hosts, under hvdrun and under %%hvd.

    make bench-hosts        # = python tests/hosts/netns_cluster.py run --hosts 3 -- python benchmarks/hosts_bench.py

Prints a table and one JSON line per case. The hosts are network namespaces of one machine joined by veth
pairs and a bridge: the allreduce figures measure the engine against MPI over the kernel's TCP stack, not a
real network.
"""
import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path[:0] = [str(HERE), str(REPO / "tests" / "hosts"), str(REPO / "tests")]
from allreduce_bench import timed  # noqa: E402

NBYTES = 64 << 20
ROUNDS = 5


def worker(calls: int) -> None:
    """On every rank: alternating rounds of MPI_Allreduce and the engine's allreduce_ on 64 MiB; rank 0 prints."""
    from mpi4py import MPI

    import jupyter_hvd as hvd

    hvd.init()
    comm, n = MPI.COMM_WORLD, hvd.size()
    a = np.ones(NBYTES // 4, np.float32)
    b = np.ones(NBYTES // 4, np.float32)
    sides = {"mpi": lambda: comm.Allreduce(MPI.IN_PLACE, a, op=MPI.SUM),
             "hvd": lambda: hvd.allreduce_(b, op=hvd.Sum, name="bench")}
    for fn in sides.values():
        fn()  # warm-up: connections, the engine's ring buffer
    times = {side: [] for side in sides}
    for _ in range(ROUNDS):
        for side, fn in sides.items():
            comm.Barrier()
            times[side] += timed(fn, calls)
    if hvd.rank() == 0:
        med = {side: float(np.median(t)) for side, t in times.items()}
        busbw = {side: 2 * (n - 1) / n * NBYTES / t / 1e9 for side, t in med.items()}
        print(json.dumps({"case": "allreduce_across_hosts", "np": n, "hosts": int(os.environ["JHVD_HOSTS"]),
                          "bytes": NBYTES, "mpi_p50_ms": med["mpi"] * 1e3, "hvd_p50_ms": med["hvd"] * 1e3,
                          "mpi_busbw_GBs": busbw["mpi"], "hvd_busbw_GBs": busbw["hvd"],
                          "hvd_over_mpi_time": med["hvd"] / med["mpi"]}), flush=True)
    hvd.shutdown()


def allreduce(cluster, hosts: str, calls: int) -> dict:
    """Run the worker on ``hosts`` ("h1:1,h2:1"); its JSON line."""
    from hosts_jobs import run_job

    n = sum(int(h.split(":")[1]) for h in hosts.split(","))
    result = run_job(cluster, "-np", str(n), "-H", hosts, "-x", "JHVD_HOSTS", sys.executable, str(Path(__file__)),
                     "--worker", "--calls", str(calls), JHVD_HOSTS=str(len(hosts.split(","))))
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        raise SystemExit(f"the allreduce job on {hosts} failed:\n{result.stdout[-4000:]}")
    return json.loads(lines[-1])


def losses(cluster) -> list[dict]:
    """A host lost mid-allreduce, each way, under hvdrun and under %%hvd: seconds until released."""
    from host_loss_runs import hvdrun_loss, notebook_loss
    from test_kernel import Kernel

    found = []
    for link_down in (False, True):
        how = "link down" if link_down else "processes killed"
        loss = hvdrun_loss(cluster, link_down)
        found.append({"case": "host_lost", "launcher": "hvdrun", "how": how, "released_s": loss.released_s,
                      "reported_s": loss.reported_s})
    os.environ.update({k: v for k, v in cluster.env().items() if k.startswith("PRTE_")})
    for link_down in (False, True):
        how = "link down" if link_down else "processes killed"
        kernel = Kernel()
        try:
            kernel.execute("%load_ext jupyter_hvd")
            reply, out = kernel.execute("%%hvd -np 4 --hosts h1:2,h2:2 --framework none\nhvd.rank()", timeout=240)
            if reply["status"] != "ok":
                raise SystemExit(f"%%hvd did not start:\n{out}")
            loss = notebook_loss(cluster, kernel, link_down, lose="h2")
        finally:
            kernel.close()
        found.append({"case": "host_lost", "launcher": "%%hvd", "how": how, "released_s": loss.released_s,
                      "reported_s": loss.reported_s})
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=5, help="allreduces per round and side (5 rounds each)")
    parser.add_argument("--ranks-per-host", type=int, nargs="+", default=[1], metavar="K",
                        help="ranks on each of the 2 hosts, one case each (default 1)")
    parser.add_argument("--no-loss", action="store_true", help="leave out the lost-host cases")
    args = parser.parse_args()
    if args.worker:
        worker(args.calls)
        return
    if "JHVD_CLUSTER" not in os.environ:
        reason = os.environ.get("JHVD_CLUSTER_UNAVAILABLE", "not on the namespace hosts")
        raise SystemExit(f"{reason}: run `make bench-hosts` as root")
    from cluster_info import ClusterInfo

    cluster = ClusterInfo(json.loads(Path(os.environ["JHVD_CLUSTER"]).read_text()))
    cases = [allreduce(cluster, f"h1:{k},h2:{k}", args.calls) for k in args.ranks_per_host]
    print(f"{'64 MiB allreduce':<24} {'ranks':>5} {'MPI ms':>8} {'engine ms':>10} {'engine/MPI':>11} {'MPI GB/s':>9}")
    for c in cases:
        print(f"{'across 2 hosts':<24} {c['np']:>5} {c['mpi_p50_ms']:>8.1f} {c['hvd_p50_ms']:>10.1f} "
              f"{c['hvd_over_mpi_time']:>11.2f} {c['mpi_busbw_GBs']:>9.2f}")
    lost = [] if args.no_loss else losses(cluster)
    print(f"\n{'host lost mid-allreduce':<24} {'how':<17} {'released s':>10} {'reported s':>10}")
    for c in lost:
        print(f"{c['launcher']:<24} {c['how']:<17} {c['released_s']:>10.1f} {c['reported_s']:>10.1f}")
    print()
    for c in cases + lost:
        print(json.dumps(c))


if __name__ == "__main__":
    main()
