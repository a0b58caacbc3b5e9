"""The engine on real MPI ranks: each rank-side pytest module at 2 and 4 ranks, with timeouts."""
import json
import os
import re
import subprocess
import sys

import pytest

from multirank import run_rank_tests, run_ranks

from jupyter_hvd.runner.launch import ROOT_ENV

pytestmark = pytest.mark.timeout(400)


# The rank modules that need no settings of their own, by rank count: each count is one job (the ranks start
# once and share one engine session), whose timeout gives each module its own 180 s. rank_abort.py shuts the
# engine down and starts it again, so it runs last.
MODULE_TIMEOUT_S = 180
RANK_MODULES = {
    2: ["rank_ops.py", "rank_errors.py", "rank_refusals.py", "rank_set_names.py", "rank_horovod_semantics.py",
        "rank_join.py", "rank_idle_engine.py", "rank_init_sets.py", "rank_abort.py"],
    3: ["rank_refusals.py", "rank_set_names.py", "rank_horovod_semantics.py", "rank_join.py", "rank_init_sets.py"],
    4: ["rank_ops.py", "rank_errors.py", "rank_refusals.py", "rank_set_names.py", "rank_join.py", "rank_abort.py"],
}


@pytest.mark.parametrize("np_", [pytest.param(n, marks=pytest.mark.timeout(MODULE_TIMEOUT_S * len(m) + 60))
                                 for n, m in RANK_MODULES.items()])
def test_rank_modules(np_):
    run_rank_tests(np_, RANK_MODULES[np_], timeout=MODULE_TIMEOUT_S * len(RANK_MODULES[np_]))


def test_engine_restart_after_a_failed_cell_on_3_ranks():
    run_rank_tests(3, "rank_engine_restart.py")


def test_ops_identical_with_fusion_disabled():
    run_rank_tests(2, "rank_ops.py", env={"HOROVOD_FUSION_THRESHOLD": "0"})


def test_ops_with_a_barrier_before_every_allreduce_and_reducescatter():
    run_rank_tests(2, "rank_ops.py", env={"JUPYTER_HVD_SYNC_REDUCE_BYTES": "1"})


@pytest.mark.parametrize("np_", [2, 3, 4])
def test_ops_with_every_allreduce_around_the_ring(np_):
    """In place and out of place (from the input straight into the output), none carried."""
    run_rank_tests(np_, "rank_ops.py", env={"JUPYTER_HVD_RING_ALLREDUCE_BYTES": "1", "JUPYTER_HVD_CARRY_BYTES": "0"})


@pytest.mark.parametrize("carry", ["0", str(1 << 20)], ids=["never", "1MiB"])
def test_ops_with_small_allreduces_as_collectives_and_larger_ones_carried(carry):
    run_rank_tests(3, "rank_ops.py", env={"JUPYTER_HVD_CARRY_BYTES": carry})


def test_ops_with_cache_disabled_and_tiny_fusion_buffer():
    run_rank_tests(2, "rank_ops.py", env={"HOROVOD_CACHE_CAPACITY": "0", "HOROVOD_FUSION_THRESHOLD": "64"})


def test_stall_warning_names_the_missing_rank():
    out = run_rank_tests(3, "rank_stall.py", env={"HOROVOD_STALL_CHECK_TIME_SECONDS": "1"}, show_output=True)
    assert "stall detected: tensor 'stuck'" in out and "ranks that have not submitted it: 1" in out


def test_stall_shutdown_aborts_all_ranks():
    run_rank_tests(2, "rank_stall.py", env={"HOROVOD_STALL_CHECK_TIME_SECONDS": "1",
                                            "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": "2"})


@pytest.mark.parametrize("np_", [2, 4])
def test_timeline_file(tmp_path, np_):
    path = tmp_path / "timeline.json"
    run_rank_tests(np_, "rank_timeline.py", env={"HOROVOD_TIMELINE": str(path)})
    trace = json.loads(path.read_text())
    assert {e["pid"] for e in trace["traceEvents"]} == set(range(np_))


@pytest.mark.parametrize("np_", [1, 2])
def test_timeline_of_a_job_shorter_than_the_forwarding_period_is_written(tmp_path, np_):
    path = tmp_path / "timeline.json"
    script = tmp_path / "short.py"
    script.write_text("import numpy as np, jupyter_hvd as hvd\n"
                      "hvd.init(); hvd.allreduce(np.ones(4), name='short'); hvd.shutdown()\n")
    run_ranks(np_, [str(script)], env={"HOROVOD_TIMELINE": str(path)})
    events = json.loads(path.read_text())["traceEvents"]
    assert any(e["pid"] == 0 and e["name"] == "ALLREDUCE" for e in events), events
    stops = [e["name"] for e in events if e.get("args", {}).get("tensor", "").endswith("shut the engine down")]
    assert stops and set(stops) == {"SHUTDOWN"}, events  # a stop, not an abort


def test_a_dynamic_timeline_is_written_only_once_started(tmp_path):
    """HOROVOD_TIMELINE=DYNAMIC is Horovod's "no timeline until hvd.start_timeline()": it was taken for a file
    name, and each job wrote a timeline to ./DYNAMIC."""
    path = tmp_path / "started.json"
    script = tmp_path / "dynamic.py"
    script.write_text("import os, numpy as np, jupyter_hvd as hvd\n"
                      f"os.chdir({str(tmp_path)!r}); hvd.init(); hvd.allreduce(np.ones(4), name='before')\n"
                      f"hvd.start_timeline({str(path)!r}); hvd.allreduce(np.ones(4), name='during')\n"
                      "hvd.shutdown()  # writes what the ranks sent on\n")
    run_ranks(2, [str(script)], env={"HOROVOD_TIMELINE": "DYNAMIC"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dynamic.py", "started.json"]
    tensors = {e.get("args", {}).get("tensor") for e in json.loads(path.read_text())["traceEvents"]}
    assert "during" in tensors and "before" not in tensors, tensors


def test_stop_timeline_right_after_the_ops_writes_rank_0s_events_of_them(tmp_path):
    """Rank 0 wrote its events once per forwarding period, and stop_timeline() closed the file without the
    last ones: a timeline started and stopped around a few ops held none of them."""
    path = tmp_path / "short.json"
    script = tmp_path / "start_stop.py"
    script.write_text("import numpy as np, jupyter_hvd as hvd\n"
                      f"hvd.init(); hvd.start_timeline({str(path)!r})\n"
                      "for i in range(3):\n    hvd.allreduce(np.ones(4), name=f'op.{i}')\n"
                      "hvd.stop_timeline(); hvd.barrier(); hvd.allreduce(np.ones(4), name='after'); hvd.shutdown()\n")
    run_ranks(2, [str(script)])
    tensors = {e.get("args", {}).get("tensor") for e in json.loads(path.read_text())["traceEvents"] if e["pid"] == 0}
    assert {"op.0", "op.1", "op.2"} <= tensors and "after" not in tensors, tensors


UNEVEN = ("import time, numpy as np, jupyter_hvd as hvd\nhvd.init()\nlast = hvd.size() - 1\ntry:\n"
          "    for step in range(3 if hvd.rank() == last else 5):  # the last rank has less data\n"
          "        if step == 3: time.sleep({late})\n"
          "        hvd.allreduce(np.ones(3), name='grad')\n"
          "    print('rank', hvd.rank(), 'done')\n"
          "except hvd.EngineShutdownError as exc:\n"
          "    print('rank', hvd.rank(), 'failed:', exc)\n")


@pytest.mark.parametrize("np_, late", [(2, 0), (2, 1), (3, 0), (3, 1)])
def test_a_rank_that_ends_first_fails_its_peers_ops_saying_why_and_what_to_do(tmp_path, np_, late):
    """Horovod's message lists the causes; ours said only 'rank 1 shut the engine down'. With late=1 the other
    ranks queue their 4th op after the last rank's stop notice reached them: that op failed with the bare
    message. At 3 ranks rank 1 hears of it from rank 2 and from rank 0, whichever comes first."""
    script = tmp_path / "uneven.py"
    script.write_text(UNEVEN.format(late=late))
    out = run_ranks(np_, [str(script)]).stdout
    last = np_ - 1
    assert f"rank {last} done" in out, out
    for rank in range(last):
        assert (f"rank {rank} failed: rank {last} shut the engine down (hvd.shutdown(), or the end of its program) "
                "before every rank had submitted this operation; where ranks run different numbers of collectives "
                "(uneven data), end each rank's loop with hvd.join()") in out, out


def test_a_rank_that_ends_on_an_exception_fails_its_peers_ops_naming_it(tmp_path):
    """Its atexit shutdown told the peers 'rank 1 shut the engine down ... uneven data ... hvd.join()': the
    advice for a rank that ended its loop early, where it had failed. Its traceback is still printed."""
    script = tmp_path / "raises.py"
    script.write_text("import sys, numpy as np, jupyter_hvd as hvd\n"
                      "hvd.init()\n"
                      "if hvd.rank() == 1:\n"
                      "    raise ValueError('bad batch on rank 1')\n"
                      "hvd.allreduce(np.ones(2), name='waits')\n")
    out = run_ranks(2, [str(script)], check=False).stdout
    assert "ValueError: bad batch on rank 1" in out, out
    assert "EngineAbortedError: engine aborted by rank 1: rank 1 raised ValueError: bad batch on rank 1" in out, out
    assert "shut the engine down" not in out, out

WAITS_WHILE_ITS_PEER_RAISES = """
import sys, threading, time, numpy as np, jupyter_hvd as hvd
hvd.init()
threading.Thread(target=time.sleep, args=(60,), daemon=True).start()  # a progress bar's monitor, for one
if hvd.rank() == 0:
    raise RuntimeError('boom on rank 0')
if sys.argv[1] == 'handle':
    handle = hvd.allreduce_async(np.ones(3), name='waits')
    hvd.synchronize(handle)
hvd.allreduce(np.ones(3), name='waits')
"""


@pytest.mark.parametrize("call", ["blocking", "handle"])
def test_a_peers_failure_ends_the_script_with_its_traceback_alone(tmp_path, call):
    """An uncaught error's traceback keeps the frames it passed to the end of the program (here a daemon thread
    still runs, as tqdm's monitor does); the native operation in them was reported 'leaked' by nanobind, after
    the traceback, as in Horovod's imagenet example when another rank failed."""
    script = tmp_path / "waits.py"
    script.write_text(WAITS_WHILE_ITS_PEER_RAISES)
    out = run_ranks(2, [str(script), call], check=False).stdout
    assert "EngineAbortedError: engine aborted by rank 0: rank 0 raised RuntimeError: boom on rank 0" in out, out
    assert "leaked" not in out, out


def test_init_starts_mpi_itself_where_the_script_told_mpi4py_not_to(tmp_path):
    """Horovod's pattern for scripts that start MPI themselves, or let Horovod do it: with
    `mpi4py.rc.initialize = False`, init() found MPI unstarted and the job aborted. Now init() starts it (with
    the threads the engine needs), a second init() after shutdown() reuses it, and it is finalised at exit,
    so the job ends cleanly."""
    script = tmp_path / "no_mpi_init.py"
    script.write_text(
        "import mpi4py\nmpi4py.rc.initialize = False\n"
        "import numpy as np, jupyter_hvd as hvd\n"
        "for run in range(2):\n"
        "    hvd.init()\n"
        "    print('run', run, 'rank', hvd.rank(), 'sum', hvd.allreduce(np.ones(1), op=hvd.Sum)[0], flush=True)\n"
        "    hvd.shutdown()\n"
        "from mpi4py import MPI\nassert MPI.Query_thread() == MPI.THREAD_MULTIPLE and not MPI.Is_finalized()\n")
    out = run_ranks(2, [str(script)]).stdout
    assert sorted(re.findall(r"run \d rank \d sum 2\.0", out)) == [f"run {r} rank {k} sum 2.0" for r in range(2)
                                                                   for k in range(2)], out


def test_one_rank_job_and_an_op_before_init(tmp_path):
    script = tmp_path / "solo.py"
    script.write_text(
        "import numpy as np, jupyter_hvd as hvd\n"
        "try:\n    hvd.allreduce(np.ones(2))\nexcept ValueError as e:\n    print('before init:', e)\n"
        "hvd.init(); print('size', hvd.size(), 'sum', hvd.allreduce(np.ones(2), op=hvd.Sum))\n")
    res = run_ranks(1, [str(script)])
    assert "before init: jupyter_hvd has not been initialized; use hvd.init()." in res.stdout
    assert "size 1 sum [1. 1.]" in res.stdout


def test_a_process_started_without_mpiexec_is_a_one_rank_job_that_listens_nowhere():
    """No launcher: MPI starts as a singleton on its own transport alone (no TCP one, so no listening socket),
    unless the transports were chosen. The jobs it launches afterwards (a notebook that called ``hvd.init()``,
    then runs ``%%hvd``) choose their own: they once inherited the singleton's and their ranks could not
    reach each other."""
    code = ("import os, subprocess, sys, numpy as np, psutil, jupyter_hvd as hvd\nhvd.init()\n"
            "listening = [c.laddr for c in psutil.Process().net_connections('inet') if c.status == psutil.CONN_LISTEN]\n"
            "print(hvd.size(), hvd.allreduce(np.ones(2), op=hvd.Sum), os.environ.get('OMPI_MCA_btl'), bool(listening))\n"
            "job = [sys.executable, '-m', 'jupyter_hvd.runner.hvdrun', '-np', '2', sys.executable, '-c',\n"
            "       'import numpy as np, jupyter_hvd as hvd; hvd.init(); print(hvd.allreduce(np.ones(1), op=hvd.Sum))']\n"
            "print(subprocess.run(job, capture_output=True, text=True, timeout=60).stdout.split())")
    for chosen, seen in ((None, "None False"), ("self,sm", "self,sm False"), ("self,tcp", "self,tcp True")):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_"))}
        env.update(ROOT_ENV)
        if chosen:
            env["OMPI_MCA_btl"] = chosen
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr
        lone, launched = res.stdout.splitlines()
        assert lone.split() == ["1", "[1.", "1.]", *seen.split()]
        if chosen is None:
            assert launched == "['[2.]', '[2.]']", res.stderr


# A host tensor type as a framework registers one (torch.Tensor is: jupyter_hvd/torch/tensors.py), over a numpy
# array's memory; `shape` is a tuple unless `list_shape`, and `cpu` says whether it is in host memory.
_HOST_TENSOR_TYPE = """
import numpy as np, jupyter_hvd as hvd
from jupyter_hvd import _C
from jupyter_hvd.dtypes import CODES
class Tensor:
    def __init__(self, a, list_shape=False, cpu=True):
        self.a, self.dtype, self.is_cpu = a, a.dtype, cpu
        self.shape = list(a.shape) if list_shape else a.shape
    def is_contiguous(self): return self.a.flags.c_contiguous
    def element_size(self): return self.a.itemsize
    def data_ptr(self): return self.a.ctypes.data
def unsupported(dtype, what):
    raise TypeError(f"{what}: unsupported dtype {dtype}")
_C.add_host_tensor_type(Tensor, {np.dtype(np.float32): CODES[np.dtype(np.float32)]}, unsupported)
def submit(x, out):
    return _C.submit(int(_C.OpType.allreduce), "allreduce", [x], [out], ["x"], 0, int(_C.ReduceOp.Sum), -1, 1.0, 1.0,
                     [], True)
hvd.init()
x, y = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3)), Tensor(np.zeros((2, 3), np.float32))
print("in place", submit(x, x).wait(-1.0), x.a.ravel().tolist())
print("out of place", submit(x, y).wait(-1.0), y.a.ravel().tolist())
for bad, out in ((Tensor(x.a, list_shape=True), None), (Tensor(x.a, cpu=False), None),
                 (x, Tensor(np.zeros(4, np.float64)))):
    try:
        submit(bad, out)
    except (TypeError, ValueError) as e:
        print(f"{type(e).__name__}: {e}")
"""


def test_a_registered_host_tensor_type_is_read_through_its_methods():
    """submit reads a registered type's tensors by their methods (shape, element size, data pointer), writes them
    in place or into another, and refuses one whose shape is not a tuple, one not in host memory, and an output of
    another size in bytes (an output's element size is its own: 4 float64 are 32 bytes, not 16)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_"))}
    env.update(ROOT_ENV)
    res = subprocess.run([sys.executable, "-c", _HOST_TENSOR_TYPE], env=env, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[:2] == ["in place 0 [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]", "out of place 0 [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]"]
    assert lines[2] == "TypeError: a host tensor's shape must be a tuple", lines
    assert lines[3] == "ValueError: tensor 'x': the input array must be a contiguous tensor in host memory", lines
    assert lines[4] == "ValueError: tensor 'x': the output array has 32 bytes, the input 24", lines


@pytest.mark.parametrize("launcher", ["SLURM_STEP_NUM_TASKS=2", "PMI_SIZE=3", "SLURM_STEP_NUM_TASKS=1"])
def test_a_process_that_mpi_started_alone_among_several_is_refused(launcher):
    """srun -n 2 without PMIx (or another MPI's mpiexec) starts each process as MPI's only one: each trained
    as a job of its own, silently. The launcher's count (as srun and PMI launchers set it) says so."""
    name, count = launcher.split("=")
    code = ("import jupyter_hvd as hvd\ntry:\n    hvd.init()\n    print('started', hvd.size())\n"
            "except RuntimeError as e:\n    print('refused:', e)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_", "PMI_", "SLURM_"))}
    env.update(ROOT_ENV, **{name: count})
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    if count == "1":
        assert res.stdout.strip() == "started 1"
    else:
        assert res.stdout.startswith(f"refused: hvd.init(): this process is one of {count} that its launcher "
                                     f"started ({launcher}), but MPI started it alone"), res.stdout
        assert f"hvdrun -np {count}" in res.stdout


def test_init_on_a_subset_communicator(tmp_path):
    script = tmp_path / "sub.py"
    script.write_text(
        "import numpy as np, jupyter_hvd as hvd\nfrom mpi4py import MPI\n"
        "w = MPI.COMM_WORLD\nsub = w.Split(w.rank % 2, w.rank)\n"
        "hvd.init(sub)\nprint('world', w.rank, 'sub', hvd.rank(), hvd.size(), hvd.allreduce(np.ones(1), op=hvd.Sum))\n"
        "hvd.shutdown(); hvd.init([0, 1, 2, 3]); print('list', hvd.size())\n")
    res = run_ranks(4, [str(script)])
    assert res.stdout.count("sub") == 4 and "[2.]" in res.stdout and res.stdout.count("list 4") == 4


def test_a_bad_setting_is_a_value_error_naming_the_variable(tmp_path):
    script = tmp_path / "bad_env.py"
    script.write_text("import jupyter_hvd as hvd\n"
                      "try:\n    hvd.init()\nexcept ValueError as e:\n    print('refused:', e)\n")
    res = run_ranks(2, [str(script)], env={"HOROVOD_FUSION_THRESHOLD": "64MB"})
    assert res.stdout.count("refused: HOROVOD_FUSION_THRESHOLD='64MB': expected an integer >= 0") == 2, res.stdout


LOGGED = ("import numpy as np, jupyter_hvd as hvd\nhvd.init()\n"
          "hvd.allreduce(np.ones(3, np.float32), name='x', op=hvd.Sum)\nhvd.shutdown()\n")


def test_horovod_log_level_shows_what_the_engine_does(tmp_path):
    script = tmp_path / "logged.py"
    script.write_text(LOGGED)
    out = run_ranks(2, [str(script)], env={"HOROVOD_LOG_LEVEL": "trace", "HOROVOD_LOG_HIDE_TIME": "1"}).stdout
    for rank in (0, 1):
        assert f"[jupyter_hvd rank {rank}] INFO: engine started: rank {rank} of 2 (local {rank} of 2" in out, out
        assert f"[jupyter_hvd rank {rank}] TRACE: enqueued allreduce 'x' float32 [3] in process set 0" in out, out
        assert f"[jupyter_hvd rank {rank}] DEBUG: allreduce 'x', 12 B, " in out, out
        assert re.search(rf"\[jupyter_hvd rank {rank}\] INFO: stopping: rank [01] shut the engine down", out), out
        assert out.count(f"[jupyter_hvd rank {rank}] INFO: stopping: ") == 1, out  # whichever rank stopped first
    assert "[jupyter_hvd rank 0] TRACE: rank 1 submitted 1 new and 0 cached requests" in out, out
    with_time = run_ranks(1, [str(script)], env={"HOROVOD_LOG_LEVEL": "info"}).stdout
    assert re.search(r"\[jupyter_hvd \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6} rank 0\] INFO: engine started", with_time)
    assert "DEBUG" not in with_time


def test_by_default_the_engine_logs_only_warnings(tmp_path):
    script = tmp_path / "quiet.py"
    script.write_text(LOGGED)
    assert "[jupyter_hvd" not in run_ranks(2, [str(script)]).stdout
    bad = run_ranks(1, [str(script)], env={"HOROVOD_LOG_LEVEL": "loud"}, check=False)
    assert bad.returncode != 0
    assert "ValueError: HOROVOD_LOG_LEVEL='loud': expected one of trace, debug, info, warning, error, fatal" in bad.stdout


INTERRUPTED = ("import os, signal, threading, time, numpy as np, jupyter_hvd as hvd\n"
               "from jupyter_hvd import handles\n"
               "hvd.init()\n"
               "x = np.arange(1 << 16, dtype=np.float32)\n"
               "if hvd.rank() == 0:\n"
               "    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
               "    try:\n"
               "        hvd.allreduce(x, name='late', op=hvd.Sum)\n"
               "        raise SystemExit('the blocking allreduce was not interrupted')\n"
               "    except KeyboardInterrupt:\n"
               "        (natives, (ins, outs)), = handles._orphans.values()\n"
               "        assert ins[0] is x and outs[0].shape == x.shape and not natives.poll()\n"
               "        out = outs[0]\n"
               "else:\n"
               "    time.sleep(1.5)\n"
               "    out = hvd.allreduce(x, name='late', op=hvd.Sum)\n"
               "hvd.barrier()\n"
               "assert np.array_equal(out, 2 * x)\n"
               "hvd.barrier()  # the next op lets go of the finished orphan's arrays\n"
               "assert not handles._orphans\n"
               "print('rank', hvd.rank(), 'ok')\n"
               "hvd.shutdown()\n")


def test_an_interrupted_blocking_call_keeps_its_arrays_until_the_engine_is_done_with_them(tmp_path):
    """Ctrl-C in a blocking call leaves the operation in flight: its input and the output the engine writes
    must outlive the call, as a dropped handle's do, and be let go once it completes."""
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED)
    out = run_ranks(2, [str(script)]).stdout
    assert "rank 0 ok" in out and "rank 1 ok" in out, out


PINNED = ("import os, jupyter_hvd as hvd\nhvd.init()  # returns once the engine thread is named and placed\n"
          "for t in os.listdir('/proc/self/task'):\n"
          "    try:  # short-lived threads of MPI may end meanwhile\n"
          "        named = open(f'/proc/self/task/{t}/comm').read().strip() == 'hvd-engine'\n"
          "    except FileNotFoundError:\n"
          "        continue\n"
          "    if named:\n"
          "        cores = [l.split()[1] for l in open(f'/proc/self/task/{t}/status') if l.startswith('Cpus_allowed_list')]\n"
          "        own = [l.split()[1] for l in open('/proc/self/status') if l.startswith('Cpus_allowed_list')]\n"
          "        print('rank', hvd.local_rank(), 'engine on cores', cores[0], 'of', own[0])\n"
          "hvd.barrier()  # a rank that shuts down stops every rank's engine: not before all have looked\n"
          "hvd.shutdown()\n")


def test_horovod_thread_affinity_pins_each_ranks_engine_thread(tmp_path):
    script = tmp_path / "pinned.py"
    script.write_text(PINNED)
    out = run_ranks(2, [str(script)], env={"HOROVOD_THREAD_AFFINITY": "1,0"}).stdout
    assert "rank 0 engine on cores 1 of" in out and "rank 1 engine on cores 0 of" in out, out
    short = run_ranks(2, [str(script)], env={"HOROVOD_THREAD_AFFINITY": "1"}).stdout
    assert short.count("HOROVOD_THREAD_AFFINITY lists 1 cores for 2 ranks on this host") == 2, short
    unpinned = re.findall(r"engine on cores (\S+) of (\S+)", short)  # each on its rank's own cores
    assert len(unpinned) == 2 and all(engine == own for engine, own in unpinned), short


def test_the_extension_loads_the_libmpi_of_its_own_environment():
    """_C looks for libmpi in the lib/ of the environment it is installed in before the folder it was built
    against, so a wheel built elsewhere (pip builds in a temporary environment) works. make test-numpy2 runs this
    on a wheel installed into another environment."""
    code = ("import sys, jupyter_hvd\nassert 'mpi4py.MPI' not in sys.modules\n"
            "print(next(l.split()[-1] for l in open('/proc/self/maps') if '/libmpi.so' in l))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert os.path.realpath(loaded).startswith(os.path.realpath(sys.prefix) + os.sep), (loaded, sys.prefix)


def test_the_extension_exports_only_its_entry_point():
    """No symbol of the engine, nanobind or a statically linked libstdc++ leaves _C: an exported libstdc++ mixes
    with the process's own (numpy's) and crashes the first number the engine writes to a stream."""
    import shutil

    import jupyter_hvd._C as ext

    if not shutil.which("nm"):
        pytest.skip("nm (binutils) is not installed")
    out = subprocess.run(["nm", "-D", "--defined-only", ext.__file__], capture_output=True, text=True,
                         check=True).stdout
    assert [line.split()[-1] for line in out.splitlines() if line.strip()] == ["PyInit__C"], out[:2000]


@pytest.mark.parametrize("np_,env", [(2, {}), (3, {"JUPYTER_HVD_TEST_MPI_MAX_COUNT": "64"}),
                                     (4, {"JUPYTER_HVD_TEST_MPI_MAX_COUNT": "64",
                                          "JUPYTER_HVD_RING_ALLREDUCE_BYTES": "1"})], ids=["real", "64", "64-ring"])
def test_buffers_past_one_mpi_call(np_, env):
    run_rank_tests(np_, "rank_large_counts.py", env=env, timeout=400)


def test_a_timeline_variable_naming_a_symbolic_link_writes_nothing_and_the_job_runs(tmp_path):
    target, link = tmp_path / "victim", tmp_path / "timeline.json"
    target.write_text("keep me")
    link.symlink_to(target)
    code = ("import numpy as np, jupyter_hvd as hvd; hvd.init(); "
            "print('sum', hvd.allreduce(np.ones(1, np.float32), op=hvd.Sum)[0]); hvd.shutdown()")
    out = run_ranks(2, ["-c", code], env={"HOROVOD_TIMELINE": str(link)}).stdout
    assert out.count("sum 2.0") == 2 and "is a symbolic link; no timeline is written" in out
    assert target.read_text() == "keep me"
