"""What the live monitor costs: mxnet_train.py's CNN case in %%hvd cells with and without the monitor.

    python benchmarks/monitor_overhead.py [--np 2] [--rounds 4] [--steps 300]

Runs in a real kernel through nbclient, so the whole path is measured: each rank's publisher thread,
the kernel-side merge, and the widget's updates (comm messages the client receives as a browser would).
Cells alternate between --no-monitor and the monitor on the same ranks. Prints a table, the publisher
thread's own CPU time as a fraction of the cell's time (a number the machine's noise does not blur),
and one JSON line.
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

import nbformat
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


def notebook(np: int, rounds: int, steps: int) -> nbformat.NotebookNode:
    cells = ["import os\nos.environ['OMP_NUM_THREADS'] = os.environ['MXNET_CPU_WORKER_NTHREADS'] = '1'\n"
             "%load_ext jupyter_hvd", SETUP.format(np=np)]
    for _ in range(rounds):
        cells += [CELL.format(flags="--no-monitor", steps=steps), CELL.format(flags="", steps=steps)]
    cells.append("%hvd stop")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def result_of(cell) -> float:
    for output in cell.outputs:
        if output.output_type == "execute_result":
            return float(output.data["text/plain"])
    raise RuntimeError(f"no result in {cell.source!r}: {cell.outputs}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--steps", type=int, default=300)
    args = p.parse_args()
    nb = notebook(args.np, args.rounds, args.steps)
    NotebookClient(nb, timeout=900, kernel_name="python3", store_widget_state=True).execute()
    timed = nb.cells[2:-1]
    off = [result_of(c) for c in timed[0::2]]
    on = [result_of(c) for c in timed[1::2]]
    states = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    widgets = len(states)
    summaries = [m["state"]["summary"] for m in states.values() if m["state"].get("summary", {}).get("finished")]
    own = [max(r["monitor_cpu_s"] for r in s["ranks"]) / s["elapsed_s"] for s in summaries]
    print(f"{'round':>5} {'no monitor':>12} {'monitor':>12}  (samples/s, np={args.np})")
    for i, (a, b) in enumerate(zip(off, on)):
        print(f"{i:>5} {a:>12.1f} {b:>12.1f}")
    cost = 1 - statistics.median(on) / statistics.median(off)
    print(f"median {statistics.median(off):>12.1f} {statistics.median(on):>12.1f}  cost {cost:+.1%}; "
          f"{widgets} widget models in the saved state")
    publisher = statistics.median(own) if own else float("nan")
    print(f"the publisher's own CPU time on the busiest rank: {publisher:.2%} of a core (median of {len(own)} cells)")
    print(json.dumps({"case": "monitor_overhead", "np": args.np, "steps": args.steps, "no_monitor": off,
                      "monitor": on, "cost": cost, "publisher_cpu_fraction": own, "widget_models": widgets}))
    if widgets == 0:
        sys.exit("the monitor widget was never shown: is the front end built (make setup)?")


if __name__ == "__main__":
    main()
