"""jupyter_hvd.run, Horovod's horovod.run: a function called on ranks that mpiexec starts, from this process,
from scripts and from a notebook's kernel; what the ranks return, print and raise, and an interrupted call."""
from __future__ import annotations

import dataclasses
import inspect
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from multiprocessing import AuthenticationError
from multiprocessing.connection import Client

import numpy as np
import psutil
import pytest
from hvdrun_cli import clean_env
from test_kernel import Kernel, tagged

import jupyter_hvd
from jupyter_hvd.runner import run_function
from jupyter_hvd.runner.run_function import RunError

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def patient_start(monkeypatch):
    """Ranks may take longer than the default 30 s to start on a loaded machine; the timeout's own test sets one."""
    monkeypatch.setenv("HOROVOD_START_TIMEOUT", "100")


@dataclasses.dataclass
class Reduced:
    rank: int
    total: float


def rank_and_sum(scale: float, offset: float = 0.0) -> Reduced:
    import jupyter_hvd as hvd

    hvd.init()
    total = hvd.allreduce(np.array([hvd.rank() * scale + offset]), op=hvd.Sum)
    print(f"rank {hvd.rank()} of {hvd.size()} says hello", flush=True)
    return Reduced(hvd.rank(), float(total[0]))


def fail_on_rank_1() -> str:
    import jupyter_hvd as hvd

    hvd.init()
    if hvd.rank() == 1:
        raise ValueError("no data for rank 1")
    hvd.allreduce(np.ones(2), name="waits_for_rank_1")  # released when the job is stopped
    return "rank 0 went on alone"


# horovod.run's parameters (Horovod 0.28.1), in order, with their defaults.
HOROVOD_RUN = ["func", ("args", ()), ("kwargs", None), ("num_proc", 1)] + [
    (name, None) for name in ("min_num_proc max_num_proc slots reset_limit cooldown_range hosts hostfile "
                              "start_timeout ssh_port ssh_identity_file disable_cache output_filename verbose "
                              "use_gloo use_mpi mpi_args network_interface executable np min_np max_np").split()]


def test_the_signature_is_horovods():
    import jupyter_hvd.runner

    assert jupyter_hvd.runner.run is jupyter_hvd.run  # horovod.runner.run is horovod.run
    params = list(inspect.signature(jupyter_hvd.run).parameters.values())
    assert [(p.name, p.default) if p.default is not p.empty else p.name for p in params] == HOROVOD_RUN


def test_each_rank_returns_what_its_call_returned_in_rank_order(capsys):
    results = jupyter_hvd.run(rank_and_sum, args=(10,), kwargs={"offset": 1}, num_proc=3)
    assert results == [Reduced(0, 33.0), Reduced(1, 33.0), Reduced(2, 33.0)]  # (0+1) + (10+1) + (20+1)
    out = capsys.readouterr().out
    assert all(f"rank {r} of 3 says hello" in out for r in range(3)), out


def test_closures_and_lambdas_go_by_value():
    secret = {"answer": 21}
    assert jupyter_hvd.run(lambda: secret["answer"] * 2, num_proc=2) == [42, 42]


def test_a_rank_that_raises_fails_the_call_with_its_traceback_and_the_others_are_released():
    began = time.monotonic()
    with pytest.raises(RuntimeError) as info:  # Horovod's run raises RuntimeError too
        jupyter_hvd.run(fail_on_rank_1, num_proc=2)
    error = info.value
    print(f"\nthe call failed {time.monotonic() - began:.1f} s after it began:\n{error}")
    assert isinstance(error, RunError)
    message = str(error)
    assert message.startswith("rank 1 raised ValueError: no data for rank 1\nTraceback"), message
    assert 'in fail_on_rank_1\n    raise ValueError("no data for rank 1")' in message, message
    assert re.search(r"aborted ranks: rank 0 \(EngineShutdownError\)|rank 0 stopped with the job", message), message
    assert isinstance(error.errors[1].exception, ValueError)
    assert error.errors[1].exception.args == ("no data for rank 1",)


def test_a_value_that_cannot_be_sent_back_is_named():
    with pytest.raises(RunError, match=r"rank \d raised TypeError: the function returned a lock, which cannot be "
                                       r"sent back to the caller \(it must pickle\)"):
        jupyter_hvd.run(threading.Lock, num_proc=2)


def test_a_rank_that_ends_without_returning_is_named_with_mpiexecs_exit_code():
    def exit_on_rank_1() -> int:
        rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
        if rank == 1:
            os._exit(3)
        return rank

    with pytest.raises(RunError, match=r"ranks? (0, )?1 ended without returning \(mpiexec exited with code \d+"):
        jupyter_hvd.run(exit_on_rank_1, num_proc=2)


def test_ranks_that_linger_after_returning_are_stopped_and_their_results_returned():
    """A thread that is not a daemon keeps a rank's process from ending: mpiexec would wait for ever."""
    def leave_a_thread() -> str:
        threading.Thread(target=time.sleep, args=(300,)).start()
        return "done"

    with pytest.warns(RuntimeWarning, match="every rank returned, but their processes had not all ended 15 s later"):
        assert jupyter_hvd.run(leave_a_thread, num_proc=2) == ["done", "done"]


def test_a_function_that_does_not_pickle_is_refused_before_any_rank_starts():
    with pytest.raises(TypeError, match="cannot send print and its arguments to the ranks"):
        jupyter_hvd.run(print, args=(threading.Lock(),), num_proc=2)


@pytest.mark.parametrize("arguments, message", [
    ({"min_num_proc": 1}, "min_num_proc: elastic training is not supported"),
    ({"max_np": 4}, "max_num_proc: elastic training is not supported"),
    ({"use_gloo": True}, "use_gloo: hvdrun always runs the job on Open MPI"),
    ({"hosts": "a:1", "hostfile": "f"}, "give hosts or hostfile, not both"),
    ({"num_proc": 0}, "num_proc must be an int >= 1, got 0"),
    ({"ssh_port": 0}, "argument -p/--ssh-port: must be >= 1, got 0"),
    ({"hosts": "h1:two"}, "h1:two"),
    ({"mpi_args": '--bind-to "core'}, "run: No closing quotation"),
    ({"start_timeout": "soon"}, "run: start_timeout: could not convert string to float: 'soon'"),
    ({"num_proc": 3, "hosts": "localhost:2"}, "run: 3 ranks, but the hosts have 2 slots (localhost:2)"),
], ids=["elastic", "deprecated elastic", "gloo", "hosts and hostfile", "no ranks", "ssh port", "hosts", "mpi args",
        "start timeout", "too few slots"])
@pytest.mark.filterwarnings("ignore:max_np is deprecated:DeprecationWarning")
def test_arguments_that_cannot_work_are_a_value_error(arguments, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        jupyter_hvd.run(print, **arguments)


def test_np_is_deprecated_as_in_horovod_at_the_callers_line():
    with pytest.warns(DeprecationWarning, match="np is deprecated, use num_proc instead") as told:
        assert jupyter_hvd.run(lambda: 1, np=2) == [1, 1]
    # so Python shows it when a script's own code calls run. Only ours: the recorder also takes any warning
    # raised meanwhile, such as a ResourceWarning that a garbage collection happens to run inside os's code
    mine = [w.filename for w in told if "np is deprecated" in str(w.message)]
    assert mine == [__file__], [(w.category.__name__, w.filename, str(w.message)) for w in told]


def test_ranks_that_never_fetch_the_function_stop_the_job_after_start_timeout(tmp_path):
    never = tmp_path / "never_starts"
    never.write_text("#!/bin/sh\nexec sleep 60\n")
    never.chmod(0o755)
    began = time.monotonic()
    with pytest.raises(RunError, match=r"only 0 of 2 ranks started within 1 s \(start_timeout, or "
                                       r"\$HOROVOD_START_TIMEOUT\); the job was stopped"):
        jupyter_hvd.run(print, num_proc=2, executable=str(never), start_timeout=1)
    assert time.monotonic() - began < 60  # the sleeps were ended with the job


def test_a_connection_that_stalls_or_has_no_key_delays_no_rank(monkeypatch):
    """Before the ranks start, the server gets a connection that never authenticates and one with a wrong key;
    the ranks still fetch the function and send back what it returned (each connection is answered apart)."""
    stalled: list[socket.socket] = []
    enter = run_function._FunctionServer.__enter__

    def enter_with_intruders(server):
        enter(server)
        host, port = server.address.rsplit(":", 1)
        stalled.append(socket.create_connection((host, int(port))))
        with pytest.raises(AuthenticationError):
            Client((host, int(port)), authkey=b"not the key")
        return server

    monkeypatch.setattr(run_function._FunctionServer, "__enter__", enter_with_intruders)
    try:
        results = jupyter_hvd.run(rank_and_sum, args=(1.0,), num_proc=2, start_timeout=30)
    finally:
        for sock in stalled:
            sock.close()
    assert len(stalled) == 1 and [r.total for r in results] == [1.0, 1.0]


def test_output_filename_and_verbose(tmp_path, capsys):
    folder = tmp_path / "out"
    assert jupyter_hvd.run(rank_and_sum, args=(1,), num_proc=2, output_filename=str(folder), verbose=2) == [
        Reduced(0, 1.0), Reduced(1, 1.0)]
    assert "rank 1 of 2 says hello" in (folder / "rank.1" / "stdout").read_text()
    assert "mpiexec" in capsys.readouterr().err  # the command line, as hvdrun --verbose prints it


SCRIPT = '''
import os, sys, time
import jupyter_hvd
from model import double  # beside this script, which the ranks' working folder is not


def train(steps):
    import jupyter_hvd as hvd
    hvd.init()
    print("ready", hvd.rank(), os.getpid(), flush=True)
    time.sleep(steps)
    return double(hvd.rank())


print(jupyter_hvd.run(train, args=(float(sys.argv[1]),), num_proc=2))
'''


def run_script(tmp_path, seconds: str, **popen) -> subprocess.Popen:
    """SCRIPT (with model.py beside it) in a folder of its own, run from another folder."""
    (tmp_path / "job").mkdir()
    (tmp_path / "job" / "train.py").write_text(SCRIPT)
    (tmp_path / "job" / "model.py").write_text("def double(x):\n    return 2 * x\n")
    return subprocess.Popen([sys.executable, str(tmp_path / "job" / "train.py"), seconds], cwd=tmp_path, text=True,
                            env=clean_env(PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            **popen)


def test_a_script_whose_function_uses_a_module_beside_it(tmp_path):
    proc = run_script(tmp_path, "0")
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    assert out.splitlines()[-1] == "[0, 2]", out


def test_an_interrupted_script_stops_its_ranks_and_raises_keyboard_interrupt(tmp_path):
    proc = run_script(tmp_path, "60")
    try:
        ready = [proc.stdout.readline() for _ in range(2)]
        pids = [int(line.split()[2]) for line in ready]
        proc.send_signal(signal.SIGINT)  # as Ctrl-C in a terminal, to the script alone
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, err
    gone = psutil.wait_procs([psutil.Process(pid) for pid in pids if psutil.pid_exists(pid)], timeout=15)[1]
    assert not gone, f"ranks left running: {gone}"


def test_in_a_notebook_the_cells_function_runs_and_its_failure_shows_the_cells_line():
    kernel = Kernel()
    try:
        reply, out = kernel.execute(textwrap.dedent('''
            import jupyter_hvd, numpy as np

            class Scaled:
                def __init__(self, value):
                    self.value = value

            def train(steps):
                import jupyter_hvd as hvd
                hvd.init()
                print(f"rank {hvd.rank()} trained {steps} steps", flush=True)
                return Scaled(hvd.allreduce(np.ones(1) * hvd.rank(), op=hvd.Sum)[0])

            [s.value for s in jupyter_hvd.run(train, args=(5,), num_proc=2)]
            '''))
        assert reply["status"] == "ok", out
        assert "rank 0 trained 5 steps" in out and "rank 1 trained 5 steps" in out and "[1.0, 1.0]" in out, out
        reply, out = kernel.execute(textwrap.dedent('''
            def evaluate():
                import jupyter_hvd as hvd
                hvd.init()
                return 1 / (hvd.rank() - 1)

            jupyter_hvd.run(evaluate, num_proc=2)
            '''))
        assert reply["status"] == "error" and reply["ename"] == "RunError", out
        assert "rank 1 raised ZeroDivisionError: division by zero" in out, out
        assert "return 1 / (hvd.rank() - 1)" in out, out  # the cell's line, which the ranks cannot read
        assert "site-packages" not in out and "run_function.py" not in out, out  # the report alone
    finally:
        kernel.close()


def test_an_interrupted_notebook_cell_stops_the_ranks():
    kernel = Kernel()
    sent = []

    def interrupt_once_both_wait(text: str) -> None:
        if not sent and "ready 0" in text and "ready 1" in text:
            sent.append(time.monotonic())
            kernel.km.interrupt_kernel()

    try:
        reply, out = kernel.execute(textwrap.dedent('''
            import jupyter_hvd

            def wait():
                import time, jupyter_hvd as hvd
                hvd.init()
                print("ready", hvd.rank(), flush=True)
                time.sleep(60)

            jupyter_hvd.run(wait, num_proc=2)
            '''), timeout=90, on_output=interrupt_once_both_wait)
        assert sent, out
        print(f"\nthe cell ended {time.monotonic() - sent[0]:.2f} s after interrupt_kernel()")
        assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", out
        kernel_pid = kernel.km.provisioner.process.pid
        deadline = time.monotonic() + 15
        while (left := [p for p in tagged(kernel.tag) if p.pid != kernel_pid]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not left, left
        reply, out = kernel.execute("jupyter_hvd.run(lambda: 'again', num_proc=2)")
        assert reply["status"] == "ok" and "['again', 'again']" in out, out
    finally:
        kernel.close()
