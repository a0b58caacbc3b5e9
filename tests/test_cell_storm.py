"""The cell storm: a seeded random sequence of %%hvd and notebook cells in a real kernel (tests/cell_storm.py).

Where the recovery matrix (test_recovery.py) runs each failure once between fixed cells, the storm runs them
in the orders a notebook meets them: a failure right after another, a rank killed after a process set was
removed, a background cell that failed waited for by `%hvd pull`, a job resized while values are pushed. Every
cell checks on the ranks what the earlier cells left there (each rank's variables, the pushed value, the
process sets: kept while the job lives, gone after it was lost), runs collectives checked against numpy, and
must show what the model says (its ranks' lines, its value, the failure and who failed, the ranks started).
The same plan runs with numpy arrays, torch tensors and MXNet NDArrays as the cells' tensors.

JUPYTER_HVD_CELL_STORM_SEED picks another seed, JUPYTER_HVD_CELL_STORM_CELLS another length; a failure names
the seed, the cell and the command that replays it.
"""
import os
import re
import signal
import time

import pytest

from cell_storm import Cell, Planner
from test_kernel import Kernel, describe, tagged, wait_gone

SEED = int(os.environ.get("JUPYTER_HVD_CELL_STORM_SEED", "3"))
CELLS = int(os.environ.get("JUPYTER_HVD_CELL_STORM_CELLS", "40"))
CELL_LIMIT_S = 180.0  # one cell, on a loaded box; past the magic's own 120 s limit on starting ranks
pytestmark = pytest.mark.timeout(60 + 60 * CELLS)


class Storm:
    def __init__(self, seed: int, count: int, framework: str):
        self.seed, self.count, self.framework = seed, count, framework
        self.cells = Planner(seed, framework).cells(count)
        self.kernel = Kernel()
        self.done: list[str] = []
        self.background: tuple | None = None  # (msg id, cell) of the background cell not yet waited for
        self.took: dict[str, list[float]] = {}  # seconds until each cell's reply, by kind

    def fail(self, cell: Cell, why: str, out: str) -> None:
        replay = (f"JUPYTER_HVD_CELL_STORM_SEED={self.seed} JUPYTER_HVD_CELL_STORM_CELLS={self.count} "
                  f".venv/bin/python -m pytest 'tests/test_cell_storm.py::test_cell_storm[{self.framework}]'")
        history = "\n".join(self.done[-8:])
        pytest.fail(f"cell storm seed {self.seed} ({self.framework}), {cell.describe()}: {why}\nreplay: {replay}\n"
                    f"the cells before:\n{history}\nits code:\n{cell.code}\nits output:\n{out[-6000:]}")

    def run(self) -> None:
        reply, out = self.kernel.execute("%load_ext jupyter_hvd")
        assert reply["status"] == "ok", out
        for cell in self.cells:
            self.step(cell)
            self.done.append(cell.describe())

    def step(self, cell: Cell) -> None:
        act = Action(self.kernel, cell)
        began = time.monotonic()
        try:
            reply, out = self.kernel.execute(cell.code, timeout=CELL_LIMIT_S, on_output=act)
        except TimeoutError:
            left = describe(tagged(self.kernel.tag))
            self.fail(cell, f"no reply within {CELL_LIMIT_S:.0f} s; running: {left}", act.text)
        took = time.monotonic() - began
        self.took.setdefault(cell.kind, []).append(took)
        msg_id = self.kernel.last_id
        if cell.background and cell.action:  # its lines come while no cell runs: read them as a notebook would
            deadline = time.monotonic() + CELL_LIMIT_S
            while not act.done and time.monotonic() < deadline:
                self.kernel.execute("pass", timeout=30)
                act(self.kernel.shown_under(msg_id))
                time.sleep(0.05)
        if cell.action and not act.done:
            self.fail(cell, f"its {cell.action[0]} never came: the ranks' lines were not all shown", out)
        if (reply["status"] == "ok") != cell.ok:
            self.fail(cell, f"status {reply['status']}, expected {'ok' if cell.ok else 'error'}", out)
        shown = "\n" + out
        for text in cell.shows:
            if not any(one in shown for one in ((text,) if isinstance(text, str) else text)):
                self.fail(cell, f"{text!r} is not shown", out)
        for text, n in cell.counts.items():
            if shown.count(text) != n:
                self.fail(cell, f"{text!r} is shown {shown.count(text)} times, not {n}", out)
        for text in cell.hides:
            if text in shown:
                self.fail(cell, f"{text!r} is shown", out)
        if cell.then:
            code, texts = cell.then
            reply, then_out = self.kernel.execute(code, timeout=30)
            if reply["status"] != "ok" or any(t not in then_out for t in texts):
                self.fail(cell, f"after it, {code!r} printed {then_out!r}, expected {texts}", out)
        self.settle_background(cell, out)
        if cell.background:
            self.background = (msg_id, cell)
        print(f"{cell.describe()}: {reply['status']} in {took:.1f}s")

    def summary(self) -> str:
        """How long the cells of each kind took to reply, longest first."""
        kinds = sorted(self.took.items(), key=lambda item: -max(item[1]))
        table = ", ".join(f"{kind} {len(t)}x max {max(t):.1f}s" for kind, t in kinds)
        return f"cell storm ({self.framework}, seed {self.seed}, {sum(map(len, self.took.values()))} cells): {table}"

    def settle_background(self, cell: Cell, out: str) -> None:
        """Once a cell waited for the background cell, every line that cell's ranks printed has been shown,
        under it (as they came) or under the cell that waited."""
        if self.background is None or cell.kind == "notebook":
            return
        msg_id, bg = self.background
        self.background = None
        shown = self.kernel.shown_under(msg_id) + out
        for text in bg.later:
            if text not in shown:
                self.fail(cell, f"the background {bg.describe()} never showed {text!r}", shown)


class Action:
    """Watches a cell's output and, once every rank has printed its waiting line, interrupts the kernel or
    kills the chosen rank with SIGKILL, once."""

    def __init__(self, kernel: Kernel, cell: Cell):
        self.kernel, self.cell, self.done = kernel, cell, cell.action is None
        self.text = ""  # the output so far, for the report of a cell that never replies

    def __call__(self, text: str) -> None:
        self.text = text
        if self.done:
            return
        kind, waiting, *rest = self.cell.action
        found = re.findall(rf"\[rank (\d+)\] {waiting} \d+ (\d+)\n", text)
        if len(found) < rest[-1]:
            return
        self.done = True
        if kind == "interrupt":
            self.kernel.km.interrupt_kernel()
        else:
            pids = {int(rank): int(pid) for rank, pid in found}
            os.kill(pids[rest[0]], signal.SIGKILL)


@pytest.mark.parametrize("framework", ["none", "torch", "mxnet"])
def test_cell_storm(framework, request):
    """The same plan with numpy arrays (`--framework none`), torch tensors or MXNet NDArrays as the cells'
    tensors (MXNet's collectives return at once, and their failures come where the result is read). Prints
    how long each kind of cell took."""
    if framework != "none":
        pytest.importorskip(framework)
    storm = Storm(SEED, CELLS, framework)
    try:
        storm.run()
    finally:
        with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
            print("\n" + storm.summary())
        storm.kernel.kc.stop_channels()
        storm.kernel.km.shutdown_kernel(now=False)
        left = wait_gone(storm.kernel.tag, 20)
        storm.kernel.close()
    assert not left, f"still running after the kernel's shutdown: {describe(left)}"


def test_the_plan_depends_on_the_seed_alone():
    def plan(seed):
        return [(c.kind, c.code, c.shows, c.action) for c in Planner(seed).cells(60)]
    assert plan(5) == plan(5)
    assert plan(5) != plan(6)
    kinds = {c.kind for seed in range(8) for c in Planner(seed).cells(60)}
    assert kinds >= {"start", "ops", "background", "stopped", "raise", "bad", "interrupt", "timeout", "stall", "kill",
                     "exit", "restart", "resize", "push", "pull", "set", "notebook", "wait", "shutdown", "downop",
                     "init", "status"}, kinds
