"""The notebooks in notebooks/ run top to bottom in a real kernel, show what they promise and leave no processes."""
import os
import re
import time
import uuid
from pathlib import Path

import nbformat
import psutil
import pytest
from nbclient import NotebookClient
from test_kernel import TAG, tagged, wait_gone

pytestmark = pytest.mark.timeout(400)

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
CLEANUP_LIMIT_S = 10.0
EPOCH = re.compile(r"^\[rank (\d)\] epoch (\d+): test accuracy ([0-9.]+)$", re.MULTILINE)


def run_notebook(name: str) -> tuple[list[str], nbformat.NotebookNode]:
    """Each code cell's text output and the executed notebook (with its widget state).

    Fails on errors, or on processes left after `%hvd stop` or the kernel's exit.
    """
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    tag = uuid.uuid4().hex
    seen: set[int] = set()
    after_last_cell: list[psutil.Process] = []
    last = max(i for i, cell in enumerate(nb.cells) if cell.cell_type == "code")

    def record(cell, cell_index, execute_reply):
        kernel = {p.pid for p in psutil.Process().children()}
        started = [p for p in tagged(tag) if p.pid not in kernel]
        seen.update(p.pid for p in started)
        if cell_index == last:
            after_last_cell.extend(started)

    client = NotebookClient(nb, timeout=180, kernel_name="python3", on_cell_executed=record, store_widget_state=True,
                            resources={"metadata": {"path": str(NOTEBOOKS)}})
    began = time.monotonic()
    client.execute(env={**os.environ, TAG: tag})
    ran = time.monotonic() - began
    left = wait_gone(tag, CLEANUP_LIMIT_S)
    print(f"\n{name}: ran in {ran:.1f}s; {len(seen)} rank-job processes seen")
    assert len(seen) >= 4, "expected a controller, mpiexec and two ranks"
    assert not after_last_cell, f"still running after %hvd stop: {[p.pid for p in after_last_cell]}"
    assert not left, f"still running after the kernel shut down: {[p.pid for p in left]}"
    return [text_of(cell) for cell in nb.cells if cell.cell_type == "code"], nb


def text_of(cell) -> str:
    """Everything a code cell printed or returned, as text; fails on error outputs."""
    parts = []
    for output in cell.outputs:
        assert output.output_type != "error", "\n".join(output.traceback)
        if output.output_type == "display_data" and not output.data:
            continue  # the place kept for a monitor, in a cell that did not train
        parts.append(output.get("text") or output.get("data", {}).get("text/plain", "") + "\n")
    return "".join(parts)


def final_accuracies(text: str) -> dict[int, float]:
    """The last test accuracy each rank printed."""
    return {int(rank): float(acc) for rank, _, acc in EPOCH.findall(text)}


def test_quickstart_trains_on_two_ranks():
    outputs, nb = run_notebook("01_quickstart.ipynb")
    text = "".join(outputs)
    assert "[hvd] started 2 ranks" in text
    weights = re.findall(r"^\[rank (\d)\] first weights: (.*)$", text, re.MULTILINE)
    assert sorted(rank for rank, _ in weights) == ["0", "1"] and weights[0][1] == weights[1][1]
    epochs = EPOCH.findall(text)
    assert len(epochs) == 10 and {rank for rank, _, _ in epochs} == {"0", "1"}
    accuracies = final_accuracies(text)
    assert accuracies[0] == accuracies[1] >= 0.9, accuracies
    returned = next(out for out in outputs if re.fullmatch(r"0\.\d+\n", out))
    assert float(returned) == pytest.approx(accuracies[0], abs=1e-4)
    assert "[hvd] 2 ranks on this host, API jupyter_hvd.mxnet" in text and "initialised" in text
    assert outputs[-1] == "[hvd] stopped the ranks\n"
    check_monitor_state(nb)
    training = next(cell for cell in nb.cells if "for epoch in range" in cell.source)
    monitor, *lines = training.outputs
    assert "application/vnd.jupyter.widget-view+json" in monitor.get("data", {}), "the monitor comes first"
    assert lines and all(o.output_type == "stream" for o in lines), "every rank line is below the monitor"


def check_monitor_state(nb) -> None:
    """The training cell's monitor widget, as saved in the notebook: both ranks trained and sent events."""
    states = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    monitors = [m["state"] for m in states.values() if m["state"].get("summary", {}).get("ranks")]
    trained = [m for m in monitors
               if m["summary"]["state"] == "finished" and m["summary"]["mean_total_samples_per_s"]]
    assert trained, f"no finished monitor with throughput among {len(monitors)} monitors"
    summary, timeline = trained[-1]["summary"], trained[-1]["timeline"]
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
    assert all(r["mean_samples_per_s"] > 0 and r["samples"] > 0 and r["events"] > 0 for r in summary["ranks"])
    assert all(len(rank["phase"]) > 0 and "COLLECTIVE" in rank["phase"] for rank in timeline["ranks"])


def test_interactive_loop_keeps_ranks_in_step():
    outputs, _ = run_notebook("02_interactive.ipynb")
    text = "".join(outputs)
    assert "(64, 64) mean |w|" in text
    assert "first-layer norm per rank: [" in text and "learning rate per rank: [0.05, 0.05]" in text
    before = re.search(r"^\[rank 1\] checksums before the broadcast: \[(\S+), (\S+)\]$", text, re.MULTILINE)
    after = re.search(r"^\[rank 1\] checksums after the broadcast:  \[(\S+), (\S+)\]$", text, re.MULTILINE)
    assert before and after and before[1] != before[2] and after[1] == after[2] == before[1]
    assert "[hvd] pushed pruned to 2 ranks" in text
    epochs = EPOCH.findall(text)
    assert len(epochs) == 10 and {rank for rank, _, _ in epochs} == {"0", "1"}
    accuracies = final_accuracies(text)
    assert accuracies[0] == accuracies[1] >= 0.9, accuracies
    assert outputs[-1].endswith("[hvd] stopped the ranks\n")


def test_pytorch_notebook_trains_plots_edits_and_trains_on():
    pytest.importorskip("torch")
    outputs, nb = run_notebook("03_pytorch.ipynb")
    text = "".join(outputs)
    assert "[hvd] started 2 ranks" in text
    assert len(re.findall(r"^\[rank [01]\] epoch \d: test accuracy", text, re.MULTILINE)) == 12
    plots = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs
             if "image/png" in o.get("data", {})]
    assert len(plots) == 1, "expected the loss plot"
    assert "learning rate per rank: [0.025, 0.025]" in text
    before = re.search(r"^\[rank 1\] checksums before the broadcast: \[(\S+), (\S+)\]$", text, re.MULTILINE)
    after = re.search(r"^\[rank 1\] checksums after the broadcast:  \[(\S+), (\S+)\]$", text, re.MULTILINE)
    assert before and after and before[1] != before[2] and after[1] == after[2] == before[1]
    assert float(re.findall(r"^0\.\d+$", text, re.MULTILINE)[-1]) >= 0.9
    assert outputs[-1].endswith("[hvd] stopped the ranks\n")
    check_monitor_state(nb)
