"""The %%hvd magic driven through a real IPython shell on real MPI ranks (2 by default)."""
import _thread
import asyncio
import os
import signal
import threading
import time
import weakref

import ipyparallel
import psutil
import pytest
from IPython.core.error import UsageError

from jupyter_hvd.magic import execution
from jupyter_hvd.magic.cluster import LaunchConfig, RankCluster
from jupyter_hvd.magic.failures import RankError
from jupyter_hvd.magic.magics import HvdMagics
from jupyter_hvd.magic.reaper import tagged

pytestmark = pytest.mark.timeout(180)

HEAD = "%%hvd -np 2 --framework none"  # reuses the running ranks unless they differ


@pytest.fixture(scope="module")
def started(ip):
    """Cold-start two ranks once for the module; yields the output of that first cell."""
    began = time.monotonic()
    result = ip.run_cell(f"{HEAD}\nprint('hello from', hvd.rank(), 'of', hvd.size())")
    assert result.success
    return time.monotonic() - began


def run(ip, capsys, source):
    """Run a cell in the shell; return its ExecutionResult and everything it printed."""
    result = ip.run_cell(source)
    captured = capsys.readouterr()
    return result, captured.out + captured.err


def magics(ip) -> HvdMagics:
    return ip.magics_manager.registry["HvdMagics"]


def cluster_processes():
    """Processes this test process started for ranks: controller, mpiexec/prterun, engines."""
    found = []
    for p in psutil.Process().children(recursive=True):
        try:
            line = " ".join(p.cmdline())
        except psutil.Error:
            continue
        if "ipyparallel" in line or p.name() in ("mpiexec", "prterun", "prted"):
            found.append(p)
    return found


def test_the_line_magic_with_flags_starts_or_keeps_the_ranks_as_an_empty_cell_would(ip, started, capsys):
    """IPython refuses an empty %%hvd cell, suggesting "the line magic %hvd", which then refused '-np'."""
    before = magics(ip).cluster
    result, out = run(ip, capsys, "%hvd -np 2 --framework none")
    assert result.success and magics(ip).cluster is before and out == "", out  # the same job: nothing to do
    result, out = run(ip, capsys, "%hvd -np 1 --framework none")
    assert result.success and "[hvd] started 1 ranks" in out and "monitor" not in out, out
    assert run(ip, capsys, f"{HEAD}\nprint('back', hvd.size())")[1].count("back 2") == 2


def test_cold_start_prefixes_each_ranks_output(ip, started, capsys):
    result, out = run(ip, capsys, f"{HEAD}\nprint('hello from', hvd.rank(), 'of', hvd.size())")
    assert result.success
    assert "[rank 0] hello from 0 of 2" in out
    assert "[rank 1] hello from 1 of 2" in out
    assert started < 60


def test_last_expression_comes_from_rank_0(ip, started, capsys):
    result, _ = run(ip, capsys, f"{HEAD}\nimport os\nhvd.rank() + 100, 'IPP_CONNECTION_INFO' in os.environ")
    assert result.result == (100, False)  # on one host the ranks read the controller's connection file


def test_variables_persist_between_cells(ip, started, capsys):
    run(ip, capsys, f"{HEAD}\nkept = hvd.rank() * 7")
    result, _ = run(ip, capsys, "%%hvd\nkept + 1")
    assert result.result == 1


def test_output_option_stores_every_ranks_value(ip, started, capsys):
    result, _ = run(ip, capsys, f"{HEAD} -o values\n[hvd.rank()] * 2")
    assert result.success
    assert ip.user_ns["values"] == [[0, 0], [1, 1]]


def test_engine_threads_do_not_spin_when_ranks_outnumber_the_cores(ip, started, capsys):
    result, _ = run(ip, capsys, f"{HEAD} -o spins\nimport os\nos.environ.get('JUPYTER_HVD_SPIN_US')")
    assert result.success
    over = 2 > len(os.sched_getaffinity(0))  # two ranks; the kernel and the controller do not count
    assert ip.user_ns["spins"] == [os.environ.get("JUPYTER_HVD_SPIN_US", "0" if over else None)] * 2


def test_rank_option_shows_only_that_rank(ip, started, capsys):
    result, out = run(ip, capsys, f"{HEAD} --rank 1\nprint('only', hvd.rank())\nhvd.rank()")
    assert "[rank 1] only 1" in out
    assert "[rank 0]" not in out
    assert result.result == 1


def test_partial_lines_wait_for_their_newline_and_stderr_is_prefixed(ip, started, capsys):
    source = (
        f"{HEAD}\nimport sys, time\nprint('part', end='', flush=True)\ntime.sleep(0.5)\nprint('-whole')\n"
        "print('oops', file=sys.stderr)\nprint('tail', end='')"
    )
    result, out = run(ip, capsys, source)
    assert result.success
    for rank in (0, 1):
        assert f"[rank {rank}] part-whole" in out
        assert f"[rank {rank}] oops" in out
        assert f"[rank {rank}] tail" in out


def test_a_terminal_shows_rewritten_lines_at_their_end_and_rank_0s_displays(ip, started, capsys):
    source = (
        f"{HEAD}\nimport time\nfrom IPython.display import display\nfor i in range(3):\n"
        "    print('step', i, end='\\r', flush=True)\n    time.sleep(0.3)\nprint()\n"
        "display({'text/plain': f'text of {hvd.rank()}', 'text/html': '<b>html</b>'}, raw=True)"
    )
    result, out = run(ip, capsys, source)
    assert result.success, out
    assert "[rank 0] step 2\n" in out and "[rank 1] step 2\n" in out and "step 0" not in out
    assert "[rank 0]\ntext of 0\n" in out and "text of 1" not in out
    assert "[hvd] 1 output displayed by rank 1 not shown" in out


def test_status_lists_ranks(ip, started, capsys):
    _, out = run(ip, capsys, "%hvd status")
    cluster = magics(ip).cluster
    assert "2 ranks" in out
    for info in cluster.ranks:
        assert str(info.pid) in out
    assert "initialised" in out and "cpu" in out


def test_a_value_made_from_what_the_cells_defined_comes_back(ip, started, capsys, tmp_path):
    """A cell ending in an instance of a class made in a cell (as ``model`` after ``class Net``), or a function:
    its plain pickle names the rank's ``__main__``, which the notebook cannot load; the cell hung. So did one
    of a module only the ranks have, which the notebook now shows as the ranks render it."""
    result, out = run(ip, capsys, f"{HEAD} --timeout 20 -o points\nclass Point:\n    def __init__(self, x):\n"
                                  "        self.x = x\n    def __repr__(self):\n        return f'Point({self.x})'\n"
                                  "[Point(hvd.rank()), 3]")
    assert result.success, out
    assert repr(result.result) == "[Point(0), 3]" and [p[0].x for p in ip.user_ns["points"]] == [0, 1]
    result, out = run(ip, capsys, f"{HEAD} --timeout 20\ndef twice(x):\n    return 2 * x\ntwice")
    assert result.success and result.result(4) == 8, out
    module = tmp_path / "only_on_the_ranks.py"
    module.write_text("class Shape:\n    def __repr__(self):\n        return 'a Shape'\n")
    result, out = run(ip, capsys, f"{HEAD} --timeout 20\nimport sys\nsys.path.insert(0, {str(tmp_path)!r})\n"
                                  "import only_on_the_ranks\n{'shape': only_on_the_ranks.Shape()}")
    assert result.success and repr(result.result) == "{'shape': a Shape}", out  # the rank's rendering of it


def test_the_ranks_import_and_open_files_from_where_the_notebook_does(ip, started, capsys, tmp_path, monkeypatch):
    """A notebook that adds to sys.path (``sys.path.insert(0, "lib")``) or moves (``%cd data``) expects its next
    cell to import and open from there; the ranks used to keep the path and directory they started with."""
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helpers_of_this_notebook.py").write_text("ANSWER = 42\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.txt").write_text("in data")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend("lib")  # relative, as notebooks write it
    result, out = run(ip, capsys, f"{HEAD} --timeout 20\nimport helpers_of_this_notebook, os\n"
                                  "print('answer', helpers_of_this_notebook.ANSWER, os.getcwd())")
    assert result.success, out
    assert all(f"[rank {r}] answer 42 {tmp_path}" in out for r in range(2)), out
    result, out = run(ip, capsys, f"{HEAD} --timeout 20\nos.chdir('lib')")  # a rank's own move stays...
    result, out = run(ip, capsys, f"{HEAD} --timeout 20\nprint('at', os.getcwd())")
    assert all(f"[rank {r}] at {tmp_path / 'lib'}" in out for r in range(2)), out
    monkeypatch.chdir(tmp_path / "data")  # ...until the notebook moves
    result, out = run(ip, capsys, f"{HEAD} --timeout 20\nprint('read', open('x.txt').read())")
    assert result.success, out
    assert all(f"[rank {r}] read in data" in out for r in range(2)), out


def test_autoreload_and_other_run_cell_hooks_work_on_the_ranks(ip, started, capsys, tmp_path):
    """``%autoreload 2`` reloads edited modules from IPython's ``pre_run_cell`` event, which fired only in the
    notebook: the ranks kept the old code (``%%px`` reloads it)."""
    module = tmp_path / "edited_in_an_editor.py"
    module.write_text("X = 1\n")
    result, out = run(ip, capsys, f"{HEAD} --timeout 20\n%load_ext autoreload\n%autoreload 2\nimport sys\n"
                                  f"sys.path.insert(0, {str(tmp_path)!r})\nimport edited_in_an_editor\nran = []\n"
                                  "get_ipython().events.register('post_run_cell', lambda r: ran.append(r.success))")
    assert result.success, out
    module.write_text("X = 5\n")
    os.utime(module, (time.time() + 2, time.time() + 2))  # a newer time, however coarse the clock
    result, out = run(ip, capsys, f"{HEAD} --timeout 20\nprint('X is', edited_in_an_editor.X)")
    assert all(f"[rank {r}] X is 5" in out for r in range(2)), out
    run(ip, capsys, f"{HEAD} --timeout 20\n1 / 0")
    result, out = run(ip, capsys, f"{HEAD} --timeout 20\n%autoreload 0\nprint('ran', ran)")
    assert all(f"[rank {r}] ran [True, True, False]" in out for r in range(2)), out


def test_a_pasted_script_that_reads_its_command_line_gets_its_defaults(ip, started, capsys):
    """argparse's parse_args() in a cell read the engine's own options and stopped every rank with
    "unrecognized arguments: --mpi --IPEngine.enable_nanny=False --log-level=WARN"."""
    result, out = run(ip, capsys, f"{HEAD}\nimport argparse\nif __name__ == '__main__':\n"
                                  "    p = argparse.ArgumentParser()\n    p.add_argument('--epochs', type=int, default=3)\n"
                                  "    print('epochs', p.parse_args().epochs)")
    assert result.success, out
    assert "[rank 0] epochs 3" in out and "[rank 1] epochs 3" in out, out


def test_push_and_pull(ip, started, capsys):
    ip.user_ns["shared"] = {"lr": 0.1}
    _, out = run(ip, capsys, "%hvd push shared")
    assert "pushed shared" in out
    run(ip, capsys, f"{HEAD}\nmine = (shared['lr'], hvd.rank())\nsize = hvd.size()")
    result, out = run(ip, capsys, "%hvd pull mine")
    assert result.result == (0.1, 0) and ip.user_ns["mine"] == (0.1, 0)
    assert "pulled mine from rank 0" in out
    result, out = run(ip, capsys, "%hvd pull mine size --rank 1")
    assert result.result is None and (ip.user_ns["mine"], ip.user_ns["size"]) == ((0.1, 1), 2)
    assert "pulled mine, size from rank 1" in out
    ip.user_ns["kept"] = "notebook's"
    result, out = run(ip, capsys, "%hvd pull kept missing_name --rank 1")
    assert not result.success
    assert "rank 1: NameError" in out and "Traceback" not in out
    assert ip.user_ns["kept"] == "notebook's"  # nothing is set unless every name came back


def test_push_sends_what_the_notebook_defined_by_value(ip, started, capsys):
    run(ip, capsys, "class Point:\n    def __init__(self, x):\n        self.x = x\n    def norm(self):\n"
                    "        return abs(self.x) * SCALE\nSCALE = 10\np = Point(-3)\ndef twice(v):\n    return 2 * v")
    _, out = run(ip, capsys, "%hvd push p twice")
    assert "[hvd] pushed p, twice to 2 ranks" in out, out
    run(ip, capsys, "%hvd push Point")  # a push of its own: the ranks still take p for a Point
    result, out = run(ip, capsys, f"{HEAD} -o got\np.norm(), twice(hvd.rank()), isinstance(p, Point)")
    assert result.success, out
    assert ip.user_ns["got"] == [(30, 0, True), (30, 2, True)]


def test_push_names_what_cannot_be_sent_and_every_ranks_reason(ip, started, capsys, tmp_path, monkeypatch):
    ip.user_ns.update(lock=threading.Lock(), fine=1)
    result, out = run(ip, capsys, "%hvd push fine lock")
    assert not result.success
    assert "cannot send to the ranks, so nothing was sent: 'lock' (lock): TypeError: cannot pickle" in out, out
    assert run(ip, capsys, f"{HEAD}\n'fine' in globals()")[0].result is False
    run(ip, capsys, "%hvd push fine")
    (tmp_path / "only_in_the_kernel.py").write_text("class Thing:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # importable here, not on the ranks: pickled by reference
    run(ip, capsys, "import only_in_the_kernel\nthing = only_in_the_kernel.Thing()\nfine = 2")
    result, out = run(ip, capsys, "%hvd push fine thing")
    assert not result.success
    for rank in (0, 1):
        assert (f"rank {rank}: TransferError: could not load 'thing': ModuleNotFoundError: No module named "
                "'only_in_the_kernel' (no variable was set on this rank)") in out, out
    assert run(ip, capsys, f"{HEAD}\nfine")[0].result == 1  # all or nothing


def test_a_transfer_slower_than_the_timeout_is_waited_for_with_a_note(ip, started, capsys):
    """A large value over a slow network takes longer than any fixed timeout: the transfer goes on."""
    run(ip, capsys, "import time\nclass SlowToLoad:\n    def __reduce__(self):\n        return (time.sleep, (1.5,))")
    cluster = magics(ip).cluster
    cluster.push({"slow": ip.user_ns["SlowToLoad"]()}, timeout=0.2)  # the ranks take 1.5 s to load it
    out = capsys.readouterr().err
    assert "[hvd] ranks 0, 1 still busy with the transfer after 0.2s" in out, out
    run(ip, capsys, f"{HEAD}\nimport time\nclass SlowToSend:\n    def __reduce__(self):\n        time.sleep(1.5)\n"
                    "        return (int, (hvd.rank() + 5,))\nout = SlowToSend()")
    assert cluster.pull(["out"], 1, timeout=0.2) == [6]
    out = capsys.readouterr().err
    assert "[hvd] rank 1 still busy with the transfer after 0.2s" in out, out


def test_pull_brings_what_a_cell_defined_by_value(ip, started, capsys):
    result, out = run(ip, capsys, f"{HEAD}\nclass Sample:\n    def __init__(self, rank):\n        self.rank = rank\n"
                                  "    def twice(self):\n        return 2 * self.rank\nsample = Sample(hvd.rank())")
    assert result.success, out
    result, out = run(ip, capsys, "%hvd pull sample Sample --rank 1")
    assert result.success and "[hvd] pulled sample, Sample from rank 1" in out, out
    sample, cls = ip.user_ns["sample"], ip.user_ns["Sample"]
    assert sample.twice() == 2 and isinstance(sample, cls)
    result, out = run(ip, capsys, f"{HEAD}\nimport threading\nlock = threading.Lock()")
    result, out = run(ip, capsys, "%hvd pull lock")
    assert not result.success
    assert "rank 0: TransferError: cannot send to the notebook, so nothing was sent: 'lock' (lock)" in out, out


def test_a_bad_flag_is_one_clear_message_and_the_ranks_keep_running(ip, started, capsys):
    """Without -np, --rank is checked against the running job's ranks (more bad flags: test_magic_flags.py)."""
    result, out = run(ip, capsys, "%%hvd --rank 5\nprint('never runs')")
    assert not result.success and isinstance(result.error_in_exec, UsageError)
    assert "--rank must be between 0 and 1" in out
    assert "Traceback" not in out and "never runs" not in out
    assert run(ip, capsys, f"{HEAD}\nhvd.rank()")[0].result == 0


def test_start_timeout_is_a_clear_error_leaves_no_processes_and_is_kept(ip, started, capsys):
    # Shorter than the controller takes to write its connection file, so it runs out with mpiexec and the
    # ranks already started.
    result, out = run(ip, capsys, f"{HEAD} --restart --start-timeout 0.3\nhvd.rank()")
    assert not result.success and "could not start 2 ranks: " in out and "within 0.3s" in out, out
    assert cluster_processes() == []
    result, out = run(ip, capsys, "%%hvd\nhvd.rank()")  # the next start gets as long
    assert not result.success and "within 0.3s" in out, out
    result, out = run(ip, capsys, f"{HEAD} --start-timeout 120\nhvd.rank()")
    assert result.success and result.result == 0 and "[hvd] started 2 ranks" in out, out


def test_a_start_step_that_runs_out_of_time_is_stopped_before_it_starts_anything(ip, started, capsys, monkeypatch):
    """A step of the start (here the controller's, on a machine busy enough to take a second to get to it) that
    outlasts --start-timeout is cancelled before the error: it went on in the background, and started a
    controller once the cell had failed and stopped the job, left running for the kernel's life."""
    begin = ipyparallel.Cluster.start_controller

    async def late(self, **kwargs):
        await asyncio.sleep(1.0)
        return await begin(self, **kwargs)

    monkeypatch.setattr(ipyparallel.Cluster, "start_controller", late)
    result, out = run(ip, capsys, f"{HEAD} --restart --start-timeout 0.3\nhvd.rank()")
    assert not result.success and "could not start 2 ranks: the controller did not start within 0.3s" in out, out
    time.sleep(2.0)  # past the second the step waited: were it still going, the controller would run now
    assert cluster_processes() == []
    monkeypatch.undo()
    result, out = run(ip, capsys, f"{HEAD} --start-timeout 120\nhvd.rank()")
    assert result.success and result.result == 0, out


def test_a_listen_setting_that_names_nothing_here_fails_before_anything_starts(ip, started, capsys, monkeypatch):
    """Open MPI's launcher would only say that it found no interface, after the controller had started."""
    monkeypatch.setenv("JUPYTER_HVD_LISTEN", "nosuch0")
    result, out = run(ip, capsys, f"{HEAD} --restart\nhvd.rank()")
    assert not result.success and ("could not start 2 ranks: JUPYTER_HVD_LISTEN: no interface or network of this "
                                   "host is in 'nosuch0' (this host has lo 127.0.0.1") in out, out
    assert cluster_processes() == []
    monkeypatch.delenv("JUPYTER_HVD_LISTEN")
    result, out = run(ip, capsys, f"{HEAD}\nhvd.rank()")
    assert result.success and result.result == 0, out


def test_a_controller_that_stalls_as_it_writes_its_connection_file_still_starts_the_job():
    """A controller descheduled on a busy machine (two notebooks starting jobs at once on 2 cores) failed
    starts long before the start timeout: ipyparallel's client gives a silent controller 10 s, an engine 5 s,
    and a connection file it reads half-written half a second more. Here the controller is stopped for longer
    than those from the moment its connection file appears (often before it has written it whole)."""
    running = set(cluster_processes())
    cluster = RankCluster(LaunchConfig(np=2))
    stalled = threading.Event()

    def stall_the_controller():
        while (launcher := cluster._cluster.controller) is None or getattr(launcher, "process", None) is None:
            time.sleep(0.001)
        while not os.path.exists(launcher.connection_files["client"]):
            pass
        launcher.process.send_signal(signal.SIGSTOP)
        stalled.set()
        time.sleep(12)
        try:
            launcher.process.send_signal(signal.SIGCONT)
        except psutil.NoSuchProcess:  # the start failed and stopped it: the test says so
            pass

    threading.Thread(target=stall_the_controller, daemon=True).start()
    try:
        cluster.start()
        assert stalled.is_set() and len(cluster.ranks) == 2
    finally:
        cluster.stop()
    assert set(cluster_processes()) <= running


def test_exception_on_rank_1_is_reported_and_next_cell_works(ip, started, capsys):
    source = f"{HEAD}\nif hvd.rank() == 1:\n    raise ValueError('bad batch on rank 1')\n'fine'"
    result, out = run(ip, capsys, source)
    assert not result.success
    assert out.splitlines()[0].startswith("rank 1 raised ValueError: bad batch on rank 1")
    assert "<hvd cell" in out and "run_cell" not in out
    assert "ipyparallel" not in out, out  # the rank's own runner frames are left out
    result, out = run(ip, capsys, f"{HEAD}\nprint('next', hvd.rank())\nhvd.rank()")
    assert result.success and result.result == 0
    assert "[rank 1] next 1" in out


def test_unnamed_ops_work_in_the_cell_after_one_rank_raised_before_one(ip, started, capsys):
    """Rank 0 numbers an unnamed op that rank 1 never reaches; the next cell's unnamed op must match."""
    source = (f"{HEAD}\nimport numpy as np\nif hvd.rank() == 1:\n    raise ValueError('boom')\n"
              "hvd.allreduce(np.ones(1, np.float32))")
    result, out = run(ip, capsys, source)
    assert not result.success and out.splitlines()[0] == "rank 1 raised ValueError: boom"
    result, out = run(ip, capsys, "%%hvd --timeout 30\nprint(hvd.allreduce(np.ones(1, np.float32), op=hvd.Sum))")
    assert result.success, out
    assert "[rank 0] [2.]" in out and "[rank 1] [2.]" in out


def test_process_sets_made_before_a_failed_cell_work_in_the_next(ip, started, capsys):
    result, out = run(ip, capsys, f"{HEAD}\nimport numpy as np\nfirst = hvd.add_process_set([0])\n"
                                  "second = hvd.add_process_set([1])\nhvd.remove_process_set(first)")
    assert result.success, out
    result, out = run(ip, capsys, f"{HEAD}\nif hvd.rank() == 0:\n    raise ValueError('boom')\n"
                                  "hvd.allreduce(np.ones(1), process_set=second)")
    assert not result.success and out.splitlines()[0] == "rank 0 raised ValueError: boom"
    result, out = run(ip, capsys, f"{HEAD} --timeout 30 -o got\nif second.included():\n"
                                  "    mine = [float(hvd.allreduce(np.ones(1), op=hvd.Sum, process_set=second)[0]),\n"
                                  "            float(hvd.allreduce(np.ones(1), name='x', process_set=second)[0])]\n"
                                  "else:\n    mine = None\nsecond.process_set_id, first.process_set_id, mine")
    assert result.success, out
    assert ip.user_ns["got"] == [(1, None, None), (1, None, [1.0, 1.0])]  # registered again in order, new id
    result, out = run(ip, capsys, f"{HEAD}\nhvd.allreduce(np.ones(1), process_set=first)")
    assert "process set [0] is not registered; call hvd.add_process_set() first" in out
    assert run(ip, capsys, f"{HEAD}\nhvd.remove_process_set(second)")[0].result is True


def test_horovods_init_with_process_sets_registers_them_in_a_cell_run_twice(ip, started, capsys):
    """The engine runs before the cell; Horovod's `hvd.init(process_sets=[...])` registers the sets all the same,
    and the cell run again binds its new objects to them."""
    source = (f"{HEAD} --timeout 30 -o got\nimport numpy as np\nsolo = hvd.ProcessSet([0])\n"
              "hvd.init(process_sets=[solo])\n"
              "solo.process_set_id, hvd.allreduce(np.ones(1), process_set=solo).tolist() if solo.included() else None")
    ids = set()
    for _ in range(2):
        result, out = run(ip, capsys, source)
        assert result.success, out
        (id0, reduced0), (id1, reduced1) = ip.user_ns["got"]
        assert id0 == id1 is not None and (reduced0, reduced1) == ([1.0], None)
        ids.add(id0)
    assert len(ids) == 1
    assert run(ip, capsys, f"{HEAD}\nhvd.remove_process_set(solo)")[0].result is True


def test_raise_while_peer_waits_in_allreduce_aborts_the_peer(ip, started, capsys):
    source = (
        f"{HEAD}\nimport numpy as np, time\n"
        "if hvd.rank() == 1:\n    time.sleep(0.5)\n    raise RuntimeError('rank 1 gave up')\n"
        "hvd.allreduce(np.ones(4), name='never_matched')"
    )
    began = time.monotonic()
    result, out = run(ip, capsys, source)
    assert time.monotonic() - began < 5
    assert not result.success
    assert out.splitlines()[0] == "rank 1 raised RuntimeError: rank 1 gave up"
    assert "aborted ranks: rank 0 (EngineAbortedError)" in out
    result, _ = run(ip, capsys, f"{HEAD}\nimport numpy as np\nfloat(hvd.allreduce(np.ones(2) * hvd.rank())[0])")
    assert result.success and result.result == 0.5


def test_peer_outside_collectives_is_interrupted_after_grace(ip, started, capsys, monkeypatch):
    monkeypatch.setattr(execution, "FAILURE_GRACE_S", 1.0)  # the peer sleeps on whatever the grace
    source = f"{HEAD}\nimport time\nif hvd.rank() == 1:\n    raise KeyError('k')\ntime.sleep(60)"
    began = time.monotonic()
    result, out = run(ip, capsys, source)
    assert time.monotonic() - began < 15
    assert out.splitlines()[0] == "rank 1 raised KeyError: 'k'"
    assert "aborted ranks: rank 0 (KeyboardInterrupt)" in out
    assert "ranks still running 1s after rank 1 failed: sent SIGINT to ranks 0\n" in out, out  # not rank 1, idle
    assert run(ip, capsys, f"{HEAD}\nhvd.rank()")[0].result == 0


def test_timeout_cuts_a_sleeping_cell_off(ip, started, capsys):
    began = time.monotonic()
    result, out = run(ip, capsys, f"{HEAD} --timeout 2\nimport time\ntime.sleep(60)")
    assert time.monotonic() - began < 8
    assert not result.success
    assert "TimeoutError: cell exceeded --timeout 2s" in out
    assert run(ip, capsys, f"{HEAD}\n'alive'")[0].result == "alive"


def test_timeout_frees_a_rank_blocked_in_a_collective(ip, started, capsys):
    source = (
        f"{HEAD} --timeout 2\nimport numpy as np, time\n"
        "if hvd.rank() == 0:\n    hvd.allreduce(np.ones(3), name='lonely')\nelse:\n    time.sleep(60)"
    )
    began = time.monotonic()
    result, out = run(ip, capsys, source)
    assert time.monotonic() - began < 10
    assert not result.success and "--timeout 2s" in out
    result, _ = run(ip, capsys, f"{HEAD}\nimport numpy as np\nfloat(hvd.allreduce(np.ones(1))[0])")
    assert result.success and result.result == 1.0


def test_kernel_interrupt_signals_the_ranks(ip, started, capsys):
    timer = threading.Timer(1.5, _thread.interrupt_main)
    timer.start()
    began = time.monotonic()
    result, out = run(ip, capsys, f"{HEAD}\nimport time\ntime.sleep(60)")
    timer.join()
    assert time.monotonic() - began < 10
    assert not result.success
    assert out.splitlines()[0] == "the kernel was interrupted: sent SIGINT to ranks 0, 1"
    assert "KeyboardInterrupt" in out
    assert run(ip, capsys, f"{HEAD}\nhvd.rank()")[0].result == 0


def interrupt_an_awaiting_cell(ip, capsys) -> str:
    """Interrupt the kernel 1.5 s into a cell that awaits for a minute; the cell must stop, each rank running
    its finally block. Returns what the cell showed."""
    timer = threading.Timer(1.5, _thread.interrupt_main)
    timer.start()
    result, out = run(ip, capsys, f"{HEAD}\ntry:\n    await asyncio.sleep(60)\nfinally:\n"
                                  "    print('finally', hvd.rank(), flush=True)")
    timer.join()
    assert not result.success and "the kernel was interrupted" in out and "[rank 1] finally 1" in out, out
    return out


def test_a_cell_awaits_at_its_top_level_as_in_a_notebook(ip, started, capsys):
    """Top-level await, as a kernel and %%px run it: the value, tasks going on in later awaiting cells, a
    failure and an interrupt that cancel the cell's coroutine (its finally runs), and the cell after."""
    result, out = run(ip, capsys, f"{HEAD}\nimport asyncio, numpy as np\nticks = []\n"
                                  "async def tick():\n    while True:\n        ticks.append(1)\n"
                                  "        await asyncio.sleep(0.01)\n"
                                  "background = asyncio.create_task(tick())\n"
                                  "total = await asyncio.to_thread(hvd.allreduce, np.ones(1) * hvd.rank(),\n"
                                  "                                op=hvd.Sum)\n"
                                  "await asyncio.sleep(0.05)\nfloat(total[0])")
    assert result.success and result.result == 1.0, out
    before = run(ip, capsys, f"{HEAD}\nlen(ticks)")[0].result
    result, out = run(ip, capsys, f"{HEAD}\nawait asyncio.sleep(0.2)\nlen(ticks) - {before}, background.done()")
    assert result.success and result.result[0] > 2 and not result.result[1], out
    before = after = run(ip, capsys, f"{HEAD}\nlen(ticks)")[0].result
    for _ in range(40):  # however busy the machine: the task only has to move between cells at all
        time.sleep(0.25)
        after = run(ip, capsys, f"{HEAD}\nlen(ticks)")[0].result
        if after > before + 2:
            break
    assert after > before + 2, "the task stood still between cells, which a kernel's does not"
    result, out = run(ip, capsys, f"{HEAD}\nif hvd.rank() == 1:\n    raise ValueError('in an awaiting cell')\n"
                                  "await asyncio.sleep(60)")
    assert not result.success and "rank 1 raised ValueError: in an awaiting cell" in out, out
    interrupt_an_awaiting_cell(ip, capsys)
    result, out = run(ip, capsys, f"{HEAD}\nawait asyncio.sleep(0)\nhvd.rank(), background.done()")
    assert result.success and result.result == (0, False), out
    assert run(ip, capsys, f"{HEAD}\nbackground.cancel()\nawait asyncio.sleep(0)\nbackground.cancelled()")[0].result


def test_an_interrupt_while_a_task_of_the_cell_computes_stops_the_cell_not_the_task(ip, started, capsys):
    """Python raises KeyboardInterrupt in whatever code runs when SIGINT comes: here, nearly always a step of a
    task that computes for 0.2 s at a time, which that ended (rarely, in the test above too)."""
    result, out = run(ip, capsys, f"{HEAD}\nimport asyncio, time\n"
                                  "async def compute():\n    while True:\n        until = time.monotonic() + 0.2\n"
                                  "        while time.monotonic() < until:\n            pass\n"
                                  "        await asyncio.sleep(0.001)\n"
                                  "busy = asyncio.create_task(compute())\nawait asyncio.sleep(0)\nbusy.done()")
    assert result.success and result.result is False, out
    out = interrupt_an_awaiting_cell(ip, capsys)
    assert "KeyboardInterrupt" in out, out
    result, out = run(ip, capsys, f"{HEAD}\nawait asyncio.sleep(0)\nbusy.done()")
    assert result.success and result.result is False, out
    assert run(ip, capsys, f"{HEAD}\nbusy.cancel()\nawait asyncio.sleep(0.3)\nbusy.cancelled()")[0].result


def test_an_interrupt_that_lands_in_a_finalizer_is_not_lost(ip, started, capsys, monkeypatch):
    """A KeyboardInterrupt raised inside a finalizer is printed and dropped by Python; the magic's own
    SIGINT handler only counts, so the interrupt still stops the cell."""
    from jupyter_hvd.magic import execution

    real_wait = execution.wait_a_little

    def wait_with_a_slow_finalizer(results):
        doomed = type("Doomed", (), {})()
        weakref.finalize(doomed, time.sleep, 0.3)
        del doomed  # the finalizer runs here, in the main thread, where most of the waiting now happens
        real_wait(results)

    monkeypatch.setattr(execution, "wait_a_little", wait_with_a_slow_finalizer)
    timer = threading.Timer(1.5, _thread.interrupt_main)
    timer.start()
    began = time.monotonic()
    result, out = run(ip, capsys, f"{HEAD}\nimport time\ntime.sleep(20)")
    timer.join()
    assert time.monotonic() - began < 10, out
    assert not result.success and out.splitlines()[0] == "the kernel was interrupted: sent SIGINT to ranks 0, 1"


def test_a_second_interrupt_stops_ranks_that_ignore_the_first(ip, started, capsys):
    handler = signal.getsignal(signal.SIGINT)
    timers = [threading.Timer(t, _thread.interrupt_main) for t in (1.5, 2.5)]
    for t in timers:
        t.start()
    began = time.monotonic()
    result, out = run(ip, capsys, f"{HEAD}\nimport signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                  "time.sleep(30)")
    for t in timers:
        t.join()
    assert time.monotonic() - began < 15, out
    assert not result.success
    assert "interrupted twice: ranks 0, 1 did not finish, so the job was stopped" in out
    assert signal.getsignal(signal.SIGINT) is handler  # the magic's counting handler is gone again
    result, out = run(ip, capsys, f"{HEAD}\nhvd.rank()")
    assert result.success and result.result == 0


def test_an_engine_the_cells_shut_down_stays_down_after_a_failed_cell(ip, started, capsys):
    """The restart after a failed cell started an engine that a cell had shut down (hvd.shutdown(), as a script's
    last line), so cells found it running or not depending on whether one had failed in between."""
    assert run(ip, capsys, f"{HEAD}\nhvd.shutdown()")[0].success
    result, out = run(ip, capsys, f"{HEAD}\nimport numpy as np\nhvd.allreduce(np.ones(1))")
    assert not result.success and "not been initialized; use hvd.init()" in out, out
    result, out = run(ip, capsys, f"{HEAD}\nhvd.is_initialized()")
    assert result.success and result.result is False, out
    result, out = run(ip, capsys, f"{HEAD}\nhvd.init()\nfloat(hvd.allreduce(np.ones(1), op=hvd.Sum)[0])")
    assert result.success and result.result == 2.0, out


def test_every_cell_has_hvd_though_a_cell_deleted_it(ip, started, capsys):
    """`del hvd` or `%reset -f` in a cell left every later cell failing with a bare NameError."""
    assert run(ip, capsys, f"{HEAD}\ndel hvd")[0].success
    result, out = run(ip, capsys, f"{HEAD}\nhvd.rank()")
    assert result.success and result.result == 0, out
    assert run(ip, capsys, f"{HEAD}\n%reset -f")[0].success
    result, out = run(ip, capsys, f"{HEAD}\nhvd.size()")
    assert result.success and result.result == 2, out
    result, out = run(ip, capsys, f"{HEAD}\nhvd = 'mine'\nNone")
    assert run(ip, capsys, f"{HEAD}\nhvd")[0].result == "mine"  # a value of the cells' own stays
    assert run(ip, capsys, f"{HEAD}\ndel hvd")[0].success


def test_killed_rank_is_reported_and_next_cell_restarts(ip, started, capsys):
    victim = magics(ip).cluster.ranks[1].pid
    timer = threading.Timer(1.0, os.kill, (victim, signal.SIGKILL))
    timer.start()
    began = time.monotonic()
    result, out = run(ip, capsys, f"{HEAD}\nimport time\ntime.sleep(60)")
    assert time.monotonic() - began < 11
    assert not result.success
    assert f"rank 1 (pid {victim}" in out and "died" in out
    result, out = run(ip, capsys, f"{HEAD}\nprint('reborn', hvd.rank())\nhvd.size()")
    assert result.success and result.result == 2
    assert "[hvd] started 2 ranks" in out and "[rank 1] reborn 1" in out
    assert victim not in [r.pid for r in magics(ip).cluster.ranks]


def test_exit_in_a_cell_stops_the_job_as_it_ends_a_kernel_and_the_next_cell_restarts(ip, started, capsys):
    """exit() or quit() in a cell ends the ranks, as it ends a notebook's kernel and %%px's engines; an
    engine's own exit() stopped its event loop, and a later cell hung."""
    before = [r.pid for r in magics(ip).cluster.ranks]
    result, out = run(ip, capsys, f"{HEAD}\nimport numpy as np\nif hvd.rank() == 1:\n    exit()\n"
                                  "print('went on', hvd.rank(), hvd.allreduce(np.ones(1), op=hvd.Sum), flush=True)")
    assert not result.success
    assert "[rank 1] went on 1 [2.]" in out, out  # the cell runs to its end, as in a kernel
    assert ("rank 1 called exit() or quit(), which end the ranks as they end a notebook's kernel: the job was stopped; "
            "the next %%hvd cell starts new ranks.") in out, out
    assert not [pid for pid in before if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]
    result, out = run(ip, capsys, f"{HEAD}\nquit(keep_kernel=True)\nkept = hvd.rank()")
    assert result.success and "[hvd] started 2 ranks" in out
    result, out = run(ip, capsys, f"{HEAD}\nquit()\nkept")
    assert not result.success and "ranks 0, 1 called exit()" in out, out
    result, out = run(ip, capsys, f"{HEAD}\nhvd.size()")  # the tests after this one find ranks running
    assert result.success and result.result == 2 and "[hvd] started 2 ranks" in out


def test_a_child_signal_handler_that_raises_between_cells_leaves_the_ranks_running(ip, started, capsys):
    """torch's DataLoader installs a SIGCHLD handler that raises when a worker fails: a worker failing after
    its cell (one left starting when the cell was interrupted) raised in the rank's idle event loop and ended
    the rank. In a cell the handler still raises."""
    before, began = [r.pid for r in magics(ip).cluster.ranks], time.time()
    fail = "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep({}); raise SystemExit(1)'])"
    result, out = run(ip, capsys, f"{HEAD}\nimport signal, subprocess, sys, time\n"
                                  "def loud(signum, frame):\n    raise RuntimeError('a child failed')\n"
                                  f"signal.signal(signal.SIGCHLD, loud)\nchild = {fail.format(0.3)}")
    assert result.success, out
    children = [c for pid in before for c in psutil.Process(pid).children() if c.create_time() >= began - 1]
    assert len(children) == 2, children
    deadline = time.monotonic() + 60
    while not all(c.status() == psutil.STATUS_ZOMBIE for c in children):  # the child fails between cells
        assert time.monotonic() < deadline, [c.status() for c in children]
        time.sleep(0.05)
    result, out = run(ip, capsys, f"{HEAD}\nchild.wait()")
    assert result.success and result.result == 1, out
    assert [r.pid for r in magics(ip).cluster.ranks] == before
    result, out = run(ip, capsys, f"{HEAD}\n{fail.format(0)}\ntime.sleep(5)")
    assert not result.success and "raised RuntimeError: a child failed" in out, out
    run(ip, capsys, f"{HEAD}\nsignal.signal(signal.SIGCHLD, signal.SIG_DFL)")


def test_a_dead_heart_monitor_stops_the_job_and_the_next_cell_restarts(ip, started, capsys):
    """The controller's heart monitor is a process of its own (a dead controller: see test_recovery.py)."""
    cluster = magics(ip).cluster
    heart = psutil.Process(cluster._cluster.controller.process.pid).children()[0]
    folder = cluster._profile_dir
    timer = threading.Timer(1.0, heart.kill)
    timer.start()
    began = time.monotonic()
    result, out = run(ip, capsys, f"{HEAD}\nimport time\ntime.sleep(30)")
    assert time.monotonic() - began < 11, out
    assert not result.success
    assert (f"the ipyparallel controller's heart monitor (pid {heart.pid}) died. The job was stopped; "
            "the next %%hvd cell starts new ranks.") in out, out
    assert tagged(folder) == [] and not os.path.exists(folder)
    result, out = run(ip, capsys, f"{HEAD}\nhvd.size()")
    assert result.success and result.result == 2 and "[hvd] started 2 ranks" in out


def test_x_sets_variables_on_the_ranks_and_a_different_set_restarts(ip, started, capsys, monkeypatch):
    # ipykernel captures what the engine writes to fd 2 only outside pytest: let these ranks think so.
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    result, out = run(ip, capsys, f"{HEAD} -x HOROVOD_LOG_LEVEL=debug -x HOROVOD_LOG_HIDE_TIME=1 -x EMPTY=\n"
                                  "import os, numpy as np\nhvd.allreduce(np.ones(2), name='seen')\n"
                                  "os.environ['HOROVOD_LOG_LEVEL'], os.environ['EMPTY']")
    assert result.success and result.result == ("debug", "")
    assert "restarting the ranks (changed -x)" in out
    assert "[rank 1] [jupyter_hvd rank 1] DEBUG: allreduce 'seen', 16 B, " in out
    _, out = run(ip, capsys, "%hvd status")
    assert "EMPTY=, HOROVOD_LOG_HIDE_TIME=1, HOROVOD_LOG_LEVEL=debug" in out
    for i in range(4):  # a line the engine writes as a cell ends shows under that cell, not the next
        _, out = run(ip, capsys, f"%%hvd\nimport numpy as np\nhvd.allreduce(np.ones(2), name='cell.{i}')")
        assert f"[rank 0] [jupyter_hvd rank 0] DEBUG: allreduce 'cell.{i}'" in out, out
        assert f"'cell.{i - 1}'" not in out, out
    result, out = run(ip, capsys, "%%hvd\nimport os\nos.environ['HOROVOD_LOG_LEVEL']")  # kept without flags
    assert result.result == "debug" and "restarting" not in out


def test_restart_and_stop_leave_no_processes(ip, started, capsys):
    before = [r.pid for r in magics(ip).cluster.ranks]
    _, out = run(ip, capsys, "%hvd restart")
    assert "restarting the ranks (--restart): the variables they held are lost" in out
    assert set(before).isdisjoint(r.pid for r in magics(ip).cluster.ranks)
    assert cluster_processes()
    _, out = run(ip, capsys, "%hvd stop")
    assert "stopped" in out
    assert cluster_processes() == []
    assert "no ranks running" in run(ip, capsys, "%hvd status")[1]
    result, out = run(ip, capsys, "%%hvd\nhvd.rank()")
    assert result.success and "[hvd] started 2 ranks" in out


def test_ranks_placed_with_hosts_get_the_connection_in_their_environment(ip, started, capsys):
    """--hosts takes the path of a job on several hosts: ranks start after the controller, told where it is
    (on one host they read the controller's connection file: test_last_expression_comes_from_rank_0). Last in
    the module, so that no later test has to start ranks on one host again; one rank, so that a 1-rank job
    runs end to end too."""
    result, out = run(ip, capsys, "%%hvd -np 1 --hosts localhost:1 --framework none\n"
                                  "import os\n'IPP_CONNECTION_INFO' in os.environ, hvd.size()")
    assert result.success, out
    assert "restarting the ranks (changed -np, --hosts" in out
    assert result.result == (True, 1)


def test_a_cell_that_ends_before_its_output_is_collected_keeps_the_order(ip, started, capsys, monkeypatch):
    """The ranks may finish a short cell before the kernel starts collecting its output (a busy kernel): what
    came back meanwhile must not lose the order of lines and displays."""
    from jupyter_hvd.magic import output

    listen = output.RankOutput.listen

    def slow_listen(self, *args):
        time.sleep(1.0)  # the ranks run the cell meanwhile
        listen(self, *args)

    monkeypatch.setattr(output.RankOutput, "listen", slow_listen)
    source = f"{HEAD}\nprint('before')\ndisplay('middle %d' % hvd.rank())\nprint('after')"
    result, out = run(ip, capsys, source)
    assert result.success
    assert [line for line in out.splitlines() if line.startswith(("[rank 0]", "'middle 0'"))] == [
        "[rank 0] before", "[rank 0]", "'middle 0'", "[rank 0] after"], out


def test_outside_a_kernel_a_background_cell_shows_its_output_where_it_is_waited_for(ip, started, capsys, tmp_path):
    """A terminal cannot put a thread's lines under a cell, so they wait: nothing of the cell prints meanwhile."""
    go = tmp_path / "go"
    result, out = run(ip, capsys, f"{HEAD} --noblock\nimport os, time\nprint('early', hvd.rank(), flush=True)\n"
                                  f"while not os.path.exists({str(go)!r}):\n    time.sleep(0.05)\nprint('late')")
    assert result.success and "its output shows here" not in out and "%hvd wait shows the rest" in out, out
    time.sleep(1.0)  # the ranks print 'early' meanwhile
    result, out = run(ip, capsys, "print('the notebook runs')")
    assert out == "the notebook runs\n", out
    go.touch()
    result, out = run(ip, capsys, "%hvd wait")
    assert result.success, out
    assert out.index("[hvd] the end of %%hvd cell") < out.index("[rank 1] early 1") < out.index("[rank 1] late"), out


def test_a_bad_argument_on_one_rank_is_reported_as_that_ranks_failure(ip, started, capsys):
    """Rank 1's allreduce fails its own checks and tells rank 0, whose allreduce then fails saying so: the
    report leads with rank 1's error, whichever rank's came back first, and lists rank 0's as a consequence."""
    source = f"{HEAD}\nimport numpy as np\nhvd.allreduce(None if hvd.rank() == 1 else np.ones(2), name='metric')"
    result, out = run(ip, capsys, source)
    assert not result.success
    assert out.splitlines()[0] == ("rank 1 raised TypeError: allreduce: expected a numpy array or a DLPack tensor, "
                                   "got NoneType"), out
    assert "aborted ranks: rank 0 (PeerArgumentError)" in out, out
    result, out = run(ip, capsys, f"{HEAD} --timeout 30\nprint(hvd.allreduce(np.ones(1), op=hvd.Sum))")
    assert result.success and "[rank 0] [2.]" in out and "[rank 1] [2.]" in out, out
