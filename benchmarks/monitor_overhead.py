"""What the live monitor costs: mxnet_train.py's CNN case in %%hvd cells with and without the monitor.

    python benchmarks/monitor_overhead.py [--np 2] [--pairs 8] [--steps 200]

Runs in a real kernel through nbclient, so the whole path is measured: each rank's publisher thread,
the controller relaying its batches, the kernel-side merge, and the widget's updates (comm messages the
client receives as a browser would). Cells run in interleaved pairs on the same ranks, the order
alternating (off, on, on, off, ...) so that a drift in the machine's load favours neither side. Reported:

- throughput: each pair's cost (1 - monitored / unmonitored samples/s), its median and spread; on a
  shared machine the spread between cells is far wider than the monitor's cost, hence the pairs;
- CPU: the CPU time the monitor adds (the publisher threads' own, plus what the kernel and the
  controller use beyond an unmonitored cell) as a share of the ranks' CPU time, a figure the
  machine's noise does not blur. On a machine whose cores the ranks fill, it is what training loses.
"""
import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import nbformat
import psutil
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
SETUP = f"""%%hvd -np {{np}}
import sys
sys.path.insert(0, {str(ROOT / "benchmarks")!r})
from mxnet_train import cnn_train
hvd.init()
cnn_train(hvd, 20)["samples_per_s"]  # warm up
"""
CELL = "%%hvd {flags}\ncnn_train(hvd, {steps})['samples_per_s']"
ROLES = ("kernel", "controller", "ranks")


def notebook(np: int, order: list[bool], steps: int) -> nbformat.NotebookNode:
    cells = ["import os\nos.environ['OMP_NUM_THREADS'] = os.environ['MXNET_CPU_WORKER_NTHREADS'] = '1'\n"
             "%load_ext jupyter_hvd", SETUP.format(np=np)]
    cells += [CELL.format(flags="" if monitored else "--no-monitor", steps=steps) for monitored in order]
    cells.append("%hvd stop")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def cpu_by_role() -> dict[str, float]:
    """CPU seconds used so far by the kernel this script started, its ipyparallel controller and its ranks."""
    used = dict.fromkeys(ROLES, 0.0)
    for process in psutil.Process().children(recursive=True):
        try:
            line = " ".join(process.cmdline())
            seconds = sum(process.cpu_times()[:2])
        except psutil.Error:
            continue
        if "ipykernel_launcher" in line:
            used["kernel"] += seconds
        elif "ipyparallel.controller" in line:
            used["controller"] += seconds
        elif "jupyter_hvd.magic.rank_main" in line:
            used["ranks"] += seconds
    return used


def result_of(cell) -> float:
    for output in cell.outputs:
        if output.output_type == "execute_result":
            return float(output.data["text/plain"])
    raise RuntimeError(f"no result in {cell.source!r}: {cell.outputs}")


def spread(values: list[float]) -> str:
    q = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return f"median {statistics.median(values):+.1%}, quartiles {q[0]:+.1%} .. {q[2]:+.1%}, " \
           f"range {min(values):+.1%} .. {max(values):+.1%}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--pairs", type=int, default=8)
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args()
    order = [monitored for i in range(args.pairs) for monitored in ((False, True) if i % 2 == 0 else (True, False))]
    nb = notebook(args.np, order, args.steps)
    first = 2
    before: dict[int, dict[str, float]] = {}
    spent: dict[int, dict[str, float]] = {}

    def started(cell, cell_index, **_):
        before[cell_index] = cpu_by_role()

    def finished(cell, cell_index, **_):
        after = cpu_by_role()
        spent[cell_index] = {role: after[role] - before[cell_index][role] for role in ROLES}

    load = os.getloadavg()[0]
    NotebookClient(nb, timeout=900, kernel_name="python3", store_widget_state=True, on_cell_execute=started,
                   on_cell_executed=finished).execute()
    timed = list(enumerate(nb.cells[first:first + len(order)], start=first))
    rates = [result_of(cell) for _, cell in timed]
    cpu = [spent[index] for index, _ in timed]
    off = [r for r, m in zip(rates, order) if not m]
    on = [r for r, m in zip(rates, order) if m]
    costs = [1 - b / a for a, b in zip(off, on)]  # pair i: its unmonitored and its monitored cell

    states = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    summaries = [m["state"]["summary"] for m in states.values() if m["state"].get("summary", {}).get("finished")]
    publisher_s = [sum(r["monitor_cpu_s"] for r in s["ranks"]) for s in summaries]

    def mean_over(monitored: bool, role: str) -> float:
        return statistics.mean(c[role] for c, m in zip(cpu, order) if m == monitored)

    ranks_s = mean_over(True, "ranks")
    added = {role: mean_over(True, role) - mean_over(False, role) for role in ("kernel", "controller")}
    added["publishers"] = statistics.mean(publisher_s) if publisher_s else float("nan")
    cpu_cost = sum(added.values()) / ranks_s

    print(f"{'pair':>4} {'no monitor':>12} {'monitor':>12} {'cost':>7}  (samples/s, np={args.np}, "
          f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end)")
    for i, (a, b, c) in enumerate(zip(off, on, costs)):
        print(f"{i:>4} {a:>12.1f} {b:>12.1f} {c:>+7.1%}")
    print(f"throughput cost per pair: {spread(costs)} ({len(costs)} pairs)")
    print(f"CPU per monitored cell: ranks {ranks_s:.2f}s; added by the monitor: "
          + ", ".join(f"{role} {seconds:.3f}s" for role, seconds in added.items())
          + f"; {cpu_cost:.2%} of the ranks' CPU time")
    print(json.dumps({"case": "monitor_overhead", "np": args.np, "steps": args.steps, "no_monitor": off,
                      "monitor": on, "pair_costs": costs, "median_cost": statistics.median(costs),
                      "cpu_added_s": added, "ranks_cpu_s": ranks_s, "cpu_cost": cpu_cost,
                      "widget_models": len(states)}))
    if not summaries:
        sys.exit("the monitor widget was never shown: is the front end built (make setup)?")


if __name__ == "__main__":
    main()
