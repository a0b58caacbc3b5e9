"""Everything a rank displays reaches the notebook: run in a real kernel (nbclient), beside ipyparallel's own
%%px on an MPI cluster of 2 engines given the same cells, so each case shows what %%px shows, or more."""
import json
import os
import time
from datetime import datetime

import nbformat
import pytest
from dateutil.parser import isoparse
from nbclient import NotebookClient
from test_kernel import Kernel
from test_notebooks import NOTEBOOKS

pytestmark = pytest.mark.timeout(400)

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# The cases of the table: the same code under %%px and %%hvd (``rank`` is set on both).
TABLE = {
    "tqdm.auto": ("", "import time\nfrom tqdm.auto import tqdm\nfor i in tqdm(range(5), disable=rank != 0):\n"
                      "    time.sleep(0.3)"),
    "markdown": ("", "from IPython.display import display, Markdown\n"
                     "display(Markdown('**hello from rank %d**' % rank))"),
    "figure": ("--rank 0", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9]); plt.show()"),
    "carriage returns": ("", "import time\nfor i in range(3):\n    print('step', i, end='\\r', flush=True)\n"
                             "    time.sleep(0.3)\nprint()"),
    "dataframe": ("", "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})"),
}
# Beyond the table: what %%px loses or cannot do.
MORE = {
    "markdown, every rank": ("--all-displays", TABLE["markdown"][1]),
    "update in place": ("", "import time\nfrom IPython.display import display\nh = display('first', display_id=True)\n"
                            "time.sleep(0.3)\nh.update('second')"),
    "clear_output in a loop": ("", "from IPython.display import clear_output, display\nfor i in range(3):\n"
                                   "    clear_output(wait=True)\n    display('frame %d' % i)\n    time.sleep(0.1)"),
    "clear_output and print in a loop": ("", "print('header')\nfor i in range(3):\n    clear_output(wait=True)\n"
                                             "    print('epoch', i)\n    print('  loss', 1 / (i + 1))\n"
                                             "    time.sleep(0.2)\nif rank == 0:\n    clear_output()\n"
                                             "    print('rank 0 cleared at the end')"),
    "order": ("", "print('before')\ndisplay(Markdown('*middle*'))\nprint('after')"),
    "text tqdm": ("", "from tqdm import tqdm as text_tqdm\nfor i in text_tqdm(range(4), desc='epoch'):\n"
                      "    time.sleep(0.3)"),
    "unknown widget": ("", "display({'%s': {'model_id': 'nowhere', 'version_major': 2, 'version_minor': 0},\n"
                           "         'text/plain': 'a widget from nowhere'}, raw=True)" % WIDGET_VIEW),
    "figure at the end": ("--rank 1", "plt.plot([3, 2, 1])\nNone"),
    "unpicklable result": ("", "class Rich:\n    def _repr_html_(self):\n        return '<b>rich %d</b>' % rank\n"
                               "    def __reduce__(self):\n        raise TypeError('stays on the rank')\nRich()"),
    "help page": ("", "import numpy as np\nnp.ones?"),
    "input": ("--timeout 60", "try:\n    input('name? ')\nexcept Exception as e:\n    print(type(e).__name__, e)"),
    "breakpoint": ("", "import os\nfor i in range(3):\n    breakpoint()\nos.environ['PYTHONBREAKPOINT'] = 'builtins.print'\n"
                       "breakpoint('a debugger of your choice')\ndel os.environ['PYTHONBREAKPOINT']\nimport pdb\n"
                       "pdb.set_trace()\nprint('went on')"),
}
PX_START = """import os
import ipyparallel as ipp
from jupyter_hvd.runner.launch import ROOT_ENV, find_mpiexec
os.environ.update(ROOT_ENV if os.geteuid() == 0 else {})
os.environ["PATH"] = os.path.dirname(find_mpiexec()) + os.pathsep + os.environ["PATH"]
cluster = ipp.Cluster(engines="mpi", n=2, log_level=40, engine_launcher_kwargs={"mpi_args": ["--oversubscribe"]},
                      controller_args=["--HeartMonitor.period=100"])  # registers engines sooner; shows the same
client = cluster.start_and_connect_sync()
client.wait_for_engines(2, timeout=120)"""


def run_cases() -> dict[tuple[str, str], list]:
    """Each case's outputs under %%px and %%hvd, keyed (magic, case), and the saved widget models."""
    cells = ["import os\nos.environ['OMP_NUM_THREADS'] = '1'\n%load_ext jupyter_hvd", PX_START,
             "%%px\nfrom mpi4py import MPI\nrank = MPI.COMM_WORLD.rank"]
    keys = [None, None, None]
    for name, (flags, code) in TABLE.items():
        cells.append(f"%%px {flags.replace('--rank', '--targets')}\n{code}")
        keys.append(("px", name))
    cells += ["cluster.stop_cluster_sync()", "%%hvd -np 2 --framework none\nrank = hvd.rank()"]
    keys += [None, None]
    for name, (flags, code) in {**TABLE, **MORE}.items():
        cells.append(f"%%hvd {flags}\n{code}")
        keys.append(("hvd", name))
    cells.append("%hvd stop")
    keys.append(None)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=180, kernel_name="python3", store_widget_state=True,
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    for cell in nb.cells:
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, "\n".join(errors[0].traceback)
    cases = {key: cell.outputs for key, cell in zip(keys, nb.cells) if key}
    cases["models"] = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    return cases


@pytest.fixture(scope="module")
def cases():
    return run_cases()


def bundles(outputs) -> list[dict]:
    """The MIME bundles a cell shows, in order; a stream as a text/plain bundle, a kept-empty place left out."""
    shown = []
    for output in outputs:
        if output.output_type == "stream":
            shown.append({"text/plain": output.text})
        elif output.get("data"):
            shown.append(dict(output.data))
    return shown


def shown_bundles(outputs) -> list[dict]:
    """The bundles less the note about other ranks' hidden outputs, which is placed when the first of those
    arrives: before or after the shown rank's, as the ranks happen to run."""
    return [b for b in bundles(outputs) if not b.get("text/plain", "").startswith("[hvd] ")]


def text(outputs) -> str:
    """The cell's text, a line per line shown: a rank's lines may come in one stream output or in several (as
    they happen to arrive), which Jupyter shows as one text, with no blank line between."""
    texts = [b.get("text/plain", "") for b in bundles(outputs)]
    return "".join(t if t.endswith("\n") else t + "\n" for t in texts)


def mime_types(outputs) -> set[str]:
    return {mime for bundle in bundles(outputs) for mime in bundle}


def progress_models(models, view) -> list[dict]:
    """The progress-bar models inside the widget a view shows."""
    children = models[view["model_id"]]["state"]["children"]
    states = [models[child.removeprefix("IPY_MODEL_")] for child in children]
    return [s["state"] for s in states if s["model_name"] == "FloatProgressModel"]


def px_rank_outputs(outputs) -> list:
    """%%px's outputs less its own progress bar of the cell's tasks (``%px:   0%| ...``), which it shows when
    the cell runs longer than its progress_after_seconds (2 s): on a busy machine, for any case."""
    return [o for o in outputs if not o.get("data", {}).get("text/plain", "").startswith("%px:")]


@pytest.mark.parametrize("case", TABLE)
def test_each_case_shows_every_mime_type_px_shows(cases, case):
    px, hvd = mime_types(px_rank_outputs(cases[("px", case)])), mime_types(cases[("hvd", case)])
    assert px, f"%%px showed nothing for {case}"
    assert px <= hvd, f"{case}: %%px shows {sorted(px)}, %%hvd {sorted(hvd)}"


def test_tqdm_auto_is_a_progress_bar_that_reaches_its_end(cases):
    views = [b[WIDGET_VIEW] for b in bundles(cases[("hvd", "tqdm.auto")]) if WIDGET_VIEW in b]
    assert len(views) == 1, "one bar: rank 0's (rank 1's is disabled)"
    [bar] = progress_models(cases["models"], views[0])
    assert bar["value"] == bar["max"] == 5
    assert text(cases[("hvd", "tqdm.auto")]).startswith("[rank 0]")


def test_markdown_shows_rank_0s_and_names_the_ranks_not_shown(cases):
    shown = [b["text/markdown"] for b in bundles(cases[("hvd", "markdown")]) if "text/markdown" in b]
    assert shown == ["**hello from rank 0**"]
    assert "1 output displayed by rank 1 not shown" in text(cases[("hvd", "markdown")])
    every = [b["text/markdown"] for b in bundles(cases[("hvd", "markdown, every rank")]) if "text/markdown" in b]
    assert sorted(every) == ["**hello from rank 0**", "**hello from rank 1**"]
    px = [b["text/markdown"] for b in bundles(cases[("px", "markdown")]) if "text/markdown" in b]
    assert sorted(px) == sorted(every)


def test_figures_from_plt_show_and_from_the_end_of_a_cell(cases):
    for case, rank in (("figure", 0), ("figure at the end", 1)):
        shown = shown_bundles(cases[("hvd", case)])
        assert [b["text/plain"] for b in shown if "image/png" in b] == ["<Figure size 640x480 with 1 Axes>"], case
        assert shown[0] == {"text/plain": f"[rank {rank}]"}, "a figure is labelled with its rank"


def test_a_line_rewritten_with_carriage_returns_shows_its_last_state_per_rank(cases):
    lines = text(cases[("hvd", "carriage returns")]).splitlines()
    assert sorted(lines) == ["[rank 0] step 2", "[rank 1] step 2"], lines
    assert "step 2" in text(cases[("px", "carriage returns")])


def test_a_dataframe_result_is_an_html_table(cases):
    [result] = [o for o in cases[("hvd", "dataframe")] if o.output_type == "execute_result"]
    assert "<table" in result.data["text/html"]


def test_a_display_updated_in_place_shows_its_last_value(cases):
    outputs = cases[("hvd", "update in place")]
    shown = shown_bundles(outputs)
    assert shown == [{"text/plain": "[rank 0]"}, {"text/plain": "'second'"}]
    assert [b for b in bundles(outputs) if b not in shown] == [
        {"text/plain": "[hvd] 1 output displayed by rank 1 not shown: rich outputs come from rank 0 (--rank R shows "
                       "rank R's, --all-displays every rank's)"}]


def test_clear_output_in_a_loop_keeps_one_output_in_place(cases):
    shown = [b["text/plain"] for b in shown_bundles(cases[("hvd", "clear_output in a loop")])]
    assert shown[:2] == ["[rank 0]", "'frame 2'"], shown


def test_clear_output_empties_the_lines_the_rank_printed_since_its_first_clear(cases):
    """As in a kernel, where the loop shows one epoch's lines, redrawn; %%px shows every line. Each rank's
    clear empties its own lines only; those it printed before its first clear stay."""
    shown = text(cases[("hvd", "clear_output and print in a loop")]).splitlines()
    assert sorted(shown) == ["[rank 0] header", "[rank 0] rank 0 cleared at the end", "[rank 1]   loss 0.3333333333333333",
                             "[rank 1] epoch 2", "[rank 1] header"], shown


def test_displays_keep_their_order_among_the_ranks_lines(cases):
    shown = [line for b in bundles(cases[("hvd", "order")])
             for line in ([b["text/markdown"]] if "text/markdown" in b else b["text/plain"].splitlines(True))]
    rank0 = [s for s in shown if "rank 1" not in s and "[hvd]" not in s]
    assert rank0 == ["[rank 0] before\n", "[rank 0]", "*middle*", "[rank 0] after\n"], shown


def test_a_text_tqdm_bar_becomes_a_progress_bar_per_rank(cases):
    shown = [b for b in bundles(cases[("hvd", "text tqdm")]) if WIDGET_VIEW in b]
    # in the order the ranks first drew them, as their lines are
    assert sorted(b["text/plain"][:18] for b in shown) == ["[rank 0] epoch: 10", "[rank 1] epoch: 10"]
    for bundle in shown:
        [bar] = progress_models(cases["models"], bundle[WIDGET_VIEW])
        assert bar["value"] == 100 and bar["bar_style"] == "success"


def test_a_widget_this_kernel_cannot_show_falls_back_to_its_text(cases):
    shown = bundles(cases[("hvd", "unknown widget")])
    assert {"text/plain": "a widget from nowhere"} in shown
    assert not any(WIDGET_VIEW in b for b in shown)


def test_an_unpicklable_result_keeps_its_rich_repr(cases):
    [result] = [o for o in cases[("hvd", "unpicklable result")] if o.output_type == "execute_result"]
    assert result.data["text/html"] == "<b>rich 0</b>"


def test_a_help_page_shows_as_the_cells_output(cases):
    """``obj?`` pages its help; a kernel sends the page to the notebook's pager, %%px drops it."""
    assert "Return a new array of given shape and type" in text(cases[("hvd", "help page")])


def test_input_on_every_rank_says_how_to_give_the_ranks_a_value(cases):
    """mpiexec hands its stdin to rank 0, and a kernel's stdin is a pipe nobody types into: rank 0 waited
    forever in input() while rank 1 read an end of file."""
    lines = sorted(text(cases[("hvd", "input")]).splitlines())
    assert lines == [f"[rank {r}] StdinNotImplementedError rank {r} cannot read what you type (its stdin is closed, "
                     "as every rank's is); read it in a notebook cell and send it to the ranks with %hvd push NAME"
                     for r in (0, 1)], lines


def test_breakpoint_and_pdb_set_trace_warn_once_per_place_and_the_cell_goes_on(cases):
    said = text(cases[("hvd", "breakpoint")])
    for r in (0, 1):
        assert said.count(f"RuntimeWarning: breakpoint() skipped on rank {r}: nobody can type") == 1, said
        assert said.count(f"RuntimeWarning: pdb.set_trace() skipped on rank {r}: nobody can type") == 1, said
        assert f"[rank {r}] a debugger of your choice" in said and f"[rank {r}] went on" in said


def sent_at(msg) -> float | None:
    """When the kernel sent ``msg`` (its header's date), in seconds; None where the date does not parse. A
    client that reads late reads a second's messages bunched, so the time it reads them at cannot say how often
    they were sent. jupyter_client gives the dates as datetimes, until ipyparallel's client is imported: it turns
    that off for the whole process, so in a full run they are strings."""
    sent = msg["header"].get("date")
    if isinstance(sent, str):
        try:
            sent = isoparse(sent)
        except ValueError:
            return None
    return sent.timestamp() if isinstance(sent, datetime) else None


def test_progress_bars_update_while_the_cell_runs():
    """A text tqdm on a rank moves its bar while the cell runs, at most 10 times a second."""
    kernel = Kernel()
    try:
        kernel.execute("%load_ext jupyter_hvd")
        reply, out = kernel.execute("%%hvd -np 2 --framework none\nimport time")
        assert reply["status"] == "ok", out
        values, began = [], time.monotonic()

        def record(msg):
            if msg["msg_type"] == "comm_msg":
                state = msg["content"]["data"].get("state", {})
                if "value" in state and isinstance(state["value"], float):
                    values.append((sent_at(msg), state["value"]))

        code = "%%hvd --rank 0\nfrom tqdm import tqdm\nfor i in tqdm(range(20)):\n    time.sleep(0.15)"
        reply = kernel.kc.execute_interactive(code, timeout=120, output_hook=record)
        ended = time.monotonic()
        assert reply["content"]["status"] == "ok"
        moving = sorted({v for _, v in values if 0 < v < 100})
        print(f"\n{len(values)} bar updates in {ended - began:.1f}s: {moving}")
        assert len(moving) >= 3, f"the bar moved only through {moving} while the cell ran"
        timed = [t for t, _ in values if t is not None]
        assert len(timed) >= len(values) / 2, f"the kernel's send times did not parse: {values}"
        per_second = max(sum(1 for t in timed if start <= t < start + 1) for start in timed)
        assert per_second <= 10, f"{per_second} updates within one second"
    finally:
        kernel.close()


@pytest.mark.parametrize("requests", ["", "%hvd pull x --rank 0", "y = 5\n%hvd push y\n%hvd status"],
                         ids=["none", "pull", "push and status"])
def test_what_the_ranks_print_between_cells_shows_in_the_next_cell(tmp_path, requests):
    """A thread (or an asyncio task) a cell started prints after the cell ended: a kernel shows it under the
    cell running then; the ranks' lines were dropped, since ipyparallel's client forgets a request once done.
    And a rank files what it prints under the last request it ran: after ``%hvd pull`` (or push, or status) its
    lines went under that request, and were dropped."""
    kernel = Kernel()
    go, done = tmp_path / "go", tmp_path / "done"
    try:
        kernel.execute("%load_ext jupyter_hvd")
        reply, out = kernel.execute(
            "%%hvd -np 2 --framework none\nimport os, threading, time\nx = hvd.rank()\ndef later():\n"
            f"    while not os.path.exists({str(go)!r}):\n        time.sleep(0.05)\n"
            "    for i in range(3):\n        print('late', i, flush=True)\n        time.sleep(0.05)\n"
            f"    open({str(done)!r} + str(hvd.rank()), 'w').close()\n"
            "threading.Thread(target=later, daemon=True).start()\nprint('started')")
        assert reply["status"] == "ok" and "late" not in out, out
        if requests:
            reply, out = kernel.execute(requests)
            assert reply["status"] == "ok" and "late" not in out, out
        reply, out = kernel.execute(  # the notebook runs a cell of its own meanwhile
            f"import os, time\nopen({str(go)!r}, 'w').close()\ndeadline = time.monotonic() + 60\n"
            f"while not all(os.path.exists({str(done)!r} + r) for r in '01') and time.monotonic() < deadline:\n"
            "    time.sleep(0.05)\ntime.sleep(0.5)")
        assert reply["status"] == "ok", out
        reply, out = kernel.execute("%%hvd\nprint('next')")
        assert reply["status"] == "ok", out
        for rank in (0, 1):
            mine = [line for line in out.splitlines() if line.startswith(f"[rank {rank}]")]
            assert mine == [f"[rank {rank}] late {i}" for i in range(3)] + [f"[rank {rank}] next"], out
        reply, out = kernel.execute("%%hvd\nprint('after')")
        assert sorted(out.split()) == sorted("[rank 0] after [rank 1] after".split()), out  # shown once only
    finally:
        kernel.close()


def test_many_lines_reach_the_notebook_in_order_in_few_messages():
    """Thousands of printed lines arrive whole and in each rank's order, a batch of lines per message (as
    %%px's arrive): a message per line made 50,000 lines per rank take 26 s where %%px took 0.4 s."""
    kernel = Kernel()
    try:
        kernel.execute("%load_ext jupyter_hvd")
        reply, out = kernel.execute("%%hvd -np 2 --framework none\nimport sys")
        assert reply["status"] == "ok", out
        streams = {"stdout": [], "stderr": []}

        def record(msg):
            if msg["msg_type"] == "stream":
                streams[msg["content"]["name"]].append(msg["content"]["text"])

        lines = 5000
        code = (f"%%hvd\nfor i in range({lines}):\n    print(i)\n"
                "    if i % 1000 == 999:\n        print('mark', i, file=sys.stderr)")
        reply = kernel.kc.execute_interactive(code, timeout=120, output_hook=record)
        assert reply["content"]["status"] == "ok"
        for rank in (0, 1):
            printed = [line for text in streams["stdout"] for line in text.splitlines()
                       if line.startswith(f"[rank {rank}] ")]
            assert printed == [f"[rank {rank}] {i}" for i in range(lines)]
            marks = [line for text in streams["stderr"] for line in text.splitlines()
                     if line.startswith(f"[rank {rank}] ")]
            assert marks == [f"[rank {rank}] mark {i}" for i in range(999, lines, 1000)]
        messages = len(streams["stdout"]) + len(streams["stderr"])
        print(f"\n{2 * lines} lines and 10 marks in {messages} stream messages")
        assert messages < lines // 10, f"{messages} stream messages for {2 * lines} lines"
    finally:
        kernel.close()

