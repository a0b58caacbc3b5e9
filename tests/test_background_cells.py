"""%%hvd --noblock in a real kernel: the notebook is free while the ranks run the cell, its output and monitor
show under it as they come, and its value and failure where it is waited for (%hvd wait, or the next request to
the ranks)."""
import re
import threading

import pytest

from test_kernel import rank_pids, with_ranks

pytestmark = pytest.mark.timeout(240)

MAGICS = "get_ipython().magics_manager.registry['HvdMagics']"


@pytest.fixture(scope="module")
def kernel():
    k = with_ranks("%%hvd -np 2 --framework torch\nimport os, time, torch, jupyter_hvd.monitor")
    yield k
    k.close()


def until_file(path: str) -> str:
    """Rank code that waits (up to 60 s) for the notebook to create ``path``: it can only when the notebook is
    free while the cell runs."""
    return (f"for _ in range(600):\n    if os.path.exists({path!r}):\n        break\n    time.sleep(0.1)\n"
            f"else:\n    raise TimeoutError('the notebook never created the file')\n")


def until_shown(kernel, msg_id: str, lines: list[str]) -> str:
    """What the notebook shows under request ``msg_id`` once it holds every line, while the notebook runs other
    cells (up to 60 s)."""
    for _ in range(300):
        if all(line in (shown := kernel.shown_under(msg_id)) for line in lines):
            return shown
        kernel.execute("import time; time.sleep(0.2)")
    raise AssertionError(f"never shown under the cell: {lines}; shown, at the end: {shown[-2000:]!r}")


def test_the_notebook_runs_cells_while_the_ranks_run_one_in_the_background(kernel, tmp_path):
    go = str(tmp_path / "go")
    cell = ("%%hvd --noblock -o values\nprint('started', hvd.rank(), flush=True)\n" + until_file(go) +
            "total = hvd.allreduce(torch.ones(1) * hvd.rank(), op=hvd.Sum).item()\nprint('total', total)\n"
            "hvd.rank() * 10 + 7")
    reply, out = kernel.execute(cell)
    background = kernel.last_id
    assert reply["status"] == "ok", out
    assert "runs in the background on 2 ranks: its output shows here as it comes" in out, out
    until_shown(kernel, background, ["[rank 0] started 0", "[rank 1] started 1"])  # before the file exists
    reply, out = kernel.execute("%hvd status")
    assert "in the background (running for" in out, out
    reply, out = kernel.execute("%hvd monitor")
    assert "its monitor is under it" in out, out
    reply, out = kernel.execute(f"open({go!r}, 'w').close()\nprint('the notebook is free')")
    assert reply["status"] == "ok" and "the notebook is free" in out, out
    shown = until_shown(kernel, background, ["[rank 0] total 1.0", "[rank 1] total 1.0", "finished on every rank in"])
    assert re.search(r"\[hvd\] cell \d+ finished on every rank in [\d.]+s: %hvd wait shows its value\n$", shown), shown
    assert "the notebook is free" not in shown and "[rank 0] started 0" not in out, (shown, out)

    reply, out = kernel.execute("%hvd wait")
    assert reply["status"] == "ok", out
    assert "[rank" not in out, out  # shown under the cell already
    assert out.rstrip().endswith("7"), out  # rank 0's value
    assert kernel.execute("print(values)")[1].strip() == "[7, 17]"
    assert "no cell runs in the background" in kernel.execute("%hvd wait")[1]
    reply, out = kernel.execute("%%hvd\nprint('next', total)")  # the ranks kept the cell's variables
    assert reply["status"] == "ok" and "[rank 1] next 1.0" in out, out


def shown_once_before(shown: str, line: str, later: str) -> bool:
    return shown.count(line) == 1 and later in shown and shown.index(line) < shown.index(later)


def test_the_next_request_to_the_ranks_shows_the_background_cell_first(kernel, tmp_path):
    go = str(tmp_path / "go")
    kernel.execute(f"%%hvd --noblock\n" + until_file(go) + "print('background done', hvd.rank())\nbg = hvd.rank()")
    background = kernel.last_id
    kernel.execute(f"open({go!r}, 'w').close()")
    reply, out = kernel.execute("%hvd pull bg --rank 1")
    assert reply["status"] == "ok", out
    # under the cell if it came while the notebook was free, else under the pull, before what it pulled
    shown = kernel.shown_under(background) + out
    assert shown_once_before(shown, "[rank 1] background done 1", "[hvd] pulled bg from rank 1"), shown
    assert kernel.execute("print(bg)")[1].strip() == "1"

    kernel.execute("%%hvd --noblock\nprint('second', hvd.rank())\nf'value of {hvd.rank()}'")
    background = kernel.last_id
    reply, out = kernel.execute("%%hvd\nprint('third', hvd.rank())")
    assert reply["status"] == "ok", out
    assert shown_once_before(kernel.shown_under(background) + out, "[rank 0] second 0", "[rank 0] third 0"), out
    # Its value, as %hvd wait would have returned it: it was lost, and %hvd wait then had nothing to show.
    assert shown_once_before(out, "'value of 0'", "[rank 0] third 0") and "run in the background:" in out, out
    kernel.execute("%%hvd --noblock\n[hvd.rank()] * 3")
    reply, out = kernel.execute("%hvd pull bg")
    assert reply["status"] == "ok" and shown_once_before(out, "[0, 0, 0]", "[hvd] pulled bg from rank 0"), out


def test_a_cell_that_captures_its_output_meanwhile_takes_none_of_the_background_cells(kernel, tmp_path):
    go = str(tmp_path / "go")
    kernel.execute("%%hvd --noblock\nfrom IPython.display import display, HTML\nfor _ in range(600):\n"
                   "    print('tick', flush=True)\n    display(HTML('<i>shown</i>'))\n    time.sleep(0.1)\n"
                   f"    if os.path.exists({go!r}):\n        break\n")
    background = kernel.last_id
    until_shown(kernel, background, ["[rank 0] tick", "[rank 1] tick"])
    before = kernel.shown_under(background).count("[rank 1] tick")
    reply, out = kernel.execute("%%capture captured\nimport time\ntime.sleep(1.5)\nprint('mine')")
    assert reply["status"] == "ok" and out == "", out
    reply, out = kernel.execute("print(repr(captured.stdout), len(captured.outputs))")
    assert out.strip() == "'mine\\n' 0", out
    kernel.execute(f"open({go!r}, 'w').close()")
    assert kernel.execute("%hvd wait")[0]["status"] == "ok"
    assert kernel.shown_under(background).count("[rank 1] tick") > before  # they went under the cell meanwhile


def test_a_background_cell_that_fails_stops_the_next_cell_with_its_error(kernel):
    reply, out = kernel.execute("%%hvd --noblock\nran_after = False\nraise ValueError(f'no data on {hvd.rank()}')")
    assert reply["status"] == "ok", out
    shown = until_shown(kernel, kernel.last_id, ["failed after"])  # said under the cell, though nothing waits
    assert re.search(r"failed after [\d.]+s on ranks 0, 1 \(ValueError\): %hvd wait, or the next request to the "
                     "ranks, shows why", shown), shown
    reply, out = kernel.execute("%%hvd\nran_after = True")
    assert reply["status"] == "error", out
    assert "raised ValueError: no data on" in out and "also failed: rank" in out, out
    reply, out = kernel.execute("%%hvd\nprint('ran after', ran_after)")
    assert reply["status"] == "ok" and "[rank 0] ran after False" in out, out


def test_the_monitor_of_a_background_cell_is_fed_while_the_notebook_is_idle(kernel, tmp_path):
    go = str(tmp_path / "go")
    kernel.execute("%%hvd --noblock\nfor _ in range(20):\n    jupyter_hvd.monitor.step(64)\n    time.sleep(0.05)\n"
                   + until_file(go))
    counted = ("import time\nfor _ in range(600):\n"
               f"    samples = {MAGICS}.background.view.monitor.ranks[1].samples\n"
               "    if samples == 20 * 64:\n        break\n    time.sleep(0.1)\nprint('fed', samples)")
    reply, out = kernel.execute(counted)
    assert "fed 1280" in out, out  # taken from the ranks while no cell waited for them
    kernel.execute(f"open({go!r}, 'w').close()")
    reply, out = kernel.execute("%hvd wait")
    assert reply["status"] == "ok", out


def test_stop_ends_a_background_cell_with_its_ranks(kernel, tmp_path):
    kernel.execute("%%hvd --noblock\ntime.sleep(60)")
    reply, out = kernel.execute("%hvd stop")
    assert "[hvd] stopping %%hvd cell" in out and "[hvd] stopped the ranks" in out, out
    assert "no cell runs in the background" in kernel.execute("%hvd wait")[1]
    reply, out = kernel.execute("%%hvd -np 2\nprint('fresh', hvd.rank())")
    assert reply["status"] == "ok" and "[rank 1] fresh 1" in out, out


def test_interrupting_the_wait_interrupts_the_ranks_and_keeps_them(kernel):
    pids = rank_pids(kernel.execute("%hvd status")[1])
    kernel.execute("%%hvd --noblock\nimport time\nfor _ in range(600):\n    print('waiting', flush=True)\n    time.sleep(0.1)")
    until_shown(kernel, kernel.last_id, ["[rank 0] waiting", "[rank 1] waiting"])
    sent = []

    def interrupt_once_both_wait(text: str) -> None:  # the wait shows what the ranks print from now on
        if not sent and "[rank 0] waiting" in text and "[rank 1] waiting" in text:
            sent.append(True)
            kernel.km.interrupt_kernel()

    reply, out = kernel.execute("%hvd wait", timeout=90, on_output=interrupt_once_both_wait)
    assert sent and reply["status"] == "error", out
    assert "the kernel was interrupted" in out and "KeyboardInterrupt" in out, out
    reply, out = kernel.execute("%%hvd\nprint('after', hvd.rank())")
    assert reply["status"] == "ok" and "[rank 1] after 1" in out and "[hvd] started" not in out, out
    assert rank_pids(kernel.execute("%hvd status")[1]) == pids and len(pids) == 2  # the same processes


TICKS = "%%hvd --noblock\nimport time\nfor i in range(600):\n    print('tick', i, flush=True)\n    time.sleep(0.1)"


def test_interrupting_the_idle_notebook_interrupts_the_background_cell_and_keeps_the_ranks(kernel):
    pids = rank_pids(kernel.execute("%hvd status")[1])
    kernel.execute(TICKS)
    background = kernel.last_id
    until_shown(kernel, background, ["[rank 0] tick 1", "[rank 1] tick 1"])
    kernel.km.interrupt_kernel()  # no cell runs: the stop button of an idle notebook
    shown = until_shown(kernel, background, ["stopped after"])
    assert re.search(r"\[hvd\] cell \d+ stopped after [\d.]+s: the kernel was interrupted while no cell ran, which "
                     r"sent SIGINT to its ranks", shown), shown
    reply, out = kernel.execute("%hvd wait")
    assert reply["status"] == "error" and "sent SIGINT to ranks 0, 1" in out and "KeyboardInterrupt" in out, out
    reply, out = kernel.execute("%%hvd\nprint('stopped at', i)")
    assert reply["status"] == "ok" and "[rank 1] stopped at" in out, out
    assert rank_pids(kernel.execute("%hvd status")[1]) == pids  # the same processes, their variables kept


def test_interrupting_a_notebook_cell_leaves_the_background_cell_running(kernel):
    kernel.execute(TICKS)
    background = kernel.last_id
    until_shown(kernel, background, ["[rank 1] tick 1"])
    timer = threading.Timer(1.0, kernel.km.interrupt_kernel)
    timer.start()
    reply, out = kernel.execute("import time\ntime.sleep(30)")
    timer.join()
    assert reply["status"] == "error" and "KeyboardInterrupt" in out, out
    reply, out = kernel.execute("%hvd status")
    assert "in the background (running for" in out, out
    kernel.km.interrupt_kernel()  # now idle: the background cell's turn
    until_shown(kernel, background, ["stopped after"])
    assert kernel.execute("%hvd wait")[0]["status"] == "error"


def test_a_rank_that_dies_in_the_background_is_said_under_the_cell_and_at_the_wait(kernel):
    kernel.execute("%%hvd --noblock\nimport os, signal, time\nprint('going', flush=True)\nif hvd.rank() == 1:\n"
                   "    time.sleep(0.5)\n    os.kill(os.getpid(), signal.SIGKILL)\n"
                   "hvd.allreduce(torch.ones(1), name='never')")
    shown = until_shown(kernel, kernel.last_id, ["[rank 1] going", "cannot finish"])
    assert re.search(r"\[hvd\] cell \d+ cannot finish: rank 1 \(pid \d+ on \S+\) died \([\d.]+s into the cell\)",
                     shown), shown
    reply, out = kernel.execute("%hvd status")
    assert "in the background (stopped: rank 1 (pid" in out, out
    reply, out = kernel.execute("%hvd wait")
    assert reply["status"] == "error" and "died" in out and "The job was stopped" in out, out
    reply, out = kernel.execute("%%hvd\nprint('again', hvd.rank())")
    assert reply["status"] == "ok" and "[hvd] started" in out and "[rank 1] again 1" in out, out
