"""A host lost in the middle of an allreduce, under hvdrun and under %%hvd, timed until every rank on the other
hosts is released (shared by the tests and benchmarks/hosts_bench.py)."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import psutil
from cluster_info import REPO, ClusterInfo
from hosts_jobs import JobOutput
from hvdrun_cli import hvdrun_argv

RELEASE_LIMIT_S = 120  # a hang fails the test at this point; the measured times are far below

ALLREDUCE_LOOP = (
    "import numpy as np, jupyter_hvd as hvd\n"
    "hvd.init()\n"
    "x = np.ones(1 << 18, np.float32)\n"
    "hvd.allreduce(x, name='loop')\n"
    "print('looping', hvd.rank(), flush=True)\n"
    "while True:\n"
    "    hvd.allreduce(x, name='loop')\n"
)
TORCH_STEPS = (  # DistributedOptimizer's steps: gradients reduced from autograd hooks while backward runs
    "import torch, jupyter_hvd.torch as hvd\n"
    "hvd.init()\n"
    "model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))\n"
    "hvd.broadcast_parameters(model.state_dict(), root_rank=0)\n"
    "opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1e-3),\n"
    "                               named_parameters=model.named_parameters())\n"
    "x = torch.randn(64, 256)\n"
    "def step():\n"
    "    opt.zero_grad()\n"
    "    model(x).square().mean().backward()\n"
    "    opt.step()\n"
    "step()\n"
    "print('looping', hvd.rank(), flush=True)\n"
    "while True:\n"
    "    step()\n"
)
CELL_LOOP = ("%%hvd\nimport numpy as np\nx = np.ones(1 << 18, np.float32)\nhvd.allreduce(x, name='loop')\n"
             "print('looping', flush=True)\nwhile True:\n    hvd.allreduce(x, name='loop')")


@dataclass
class Loss:
    released_s: float  # from the kill until every rank on the other hosts had ended
    reported_s: float  # from the kill until hvdrun exited, or the cell failed
    output: str


def ranks_on(cluster: ClusterInfo, hosts: list[str]) -> list[psutil.Process]:
    """The rank processes (Python) running on these hosts."""
    return [p for h in hosts for p in cluster.host(h).processes() if p.name().startswith("python")]


def released_after(survivors: list[psutil.Process], began: float) -> float:
    """Seconds from ``began`` until all ``survivors`` have ended (AssertionError past RELEASE_LIMIT_S)."""
    _, alive = psutil.wait_procs(survivors, timeout=RELEASE_LIMIT_S - (time.monotonic() - began))
    assert not alive, f"ranks still running {RELEASE_LIMIT_S} s after the host was lost: {[p.pid for p in alive]}"
    return time.monotonic() - began


def hvdrun_loss(cluster: ClusterInfo, link_down: bool, hosts: str = "h1:2,h2:2", lose: str = "h2",
                script: str = ALLREDUCE_LOOP) -> Loss:
    """Run ``script`` (a loop that prints "looping" once per rank) under hvdrun on ``hosts``, take ``lose`` down
    once every rank loops, and time it."""
    np_ = sum(int(h.split(":")[1]) for h in hosts.split(","))
    proc = subprocess.Popen(hvdrun_argv("-np", str(np_), "-H", hosts, sys.executable, "-c", script),
                            env=cluster.env(), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output = JobOutput(proc)
        output.wait_for("looping", np_, timeout=RELEASE_LIMIT_S)
        others = [h.split(":")[0] for h in hosts.split(",") if not h.startswith(f"{lose}:")]
        survivors = ranks_on(cluster, others)
        began = time.monotonic()
        cluster.kill_host(lose, link_down)
        released = released_after(survivors, began)
        proc.wait(timeout=RELEASE_LIMIT_S)
        return Loss(released, time.monotonic() - began, output.text())
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        cluster.revive(lose)


def notebook_loss(cluster: ClusterInfo, kernel, link_down: bool, lose: str) -> Loss:
    """Run an allreduce loop in a %%hvd cell of ``kernel`` (its ranks running), take ``lose`` down once every rank
    loops, and time it: the cell must fail."""
    began: list[float] = []
    survivors: list[psutil.Process] = []
    ranks = int(kernel.execute("len(get_ipython().magics_manager.registry['HvdMagics'].cluster.ranks)")[1].strip())

    def take_down(text: str) -> None:
        if not began and text.count("looping") >= ranks:
            hosts = {h.name for h in cluster.hosts if h.name != lose}
            survivors.extend(ranks_on(cluster, sorted(hosts)))
            began.append(time.monotonic())
            threading.Thread(target=cluster.kill_host, args=(lose, link_down)).start()

    try:
        reply, out = kernel.execute(CELL_LOOP, timeout=RELEASE_LIMIT_S + 60, on_output=take_down)
        assert began, out
        reported = time.monotonic() - began[0]
        assert reply["status"] == "error", out
        return Loss(released_after(survivors, began[0]), reported, out)
    finally:
        cluster.revive(lose)
