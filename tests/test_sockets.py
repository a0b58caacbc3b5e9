"""A job on one host listens on loopback only: hvdrun's and %%hvd's mpiexec, the ranks and the controller."""
import subprocess
import sys
import time

import psutil
import pytest
from hvdrun_cli import clean_env, hvdrun_argv
from listening import Sock, listening, outside, tree

from jupyter_hvd.runner.launch import LISTEN_VAR

pytestmark = pytest.mark.timeout(120)

# Each rank starts the engine, runs a collective, says so and waits to be told to end (a line on stdin to rank 0,
# then a barrier), so that every socket the job opens is open while the test looks.
WAITING_RANK = (
    "import sys, numpy as np, jupyter_hvd as hvd\n"
    "hvd.init()\n"
    "hvd.allreduce(np.ones(4), name='warm')\n"
    "print('ready', hvd.rank(), flush=True)\n"
    "if hvd.rank() == 0:\n"
    "    sys.stdin.readline()\n"
    "hvd.allreduce(np.ones(1), name='done')\n"
    "hvd.shutdown()\n"
)


def sockets_of_running_job(env: dict[str, str]) -> list[Sock]:
    """Start 2 ranks under hvdrun; once both are ready, the listening sockets of every process of the job."""
    with subprocess.Popen(hvdrun_argv("-np", "2", sys.executable, "-c", WAITING_RANK), env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        try:
            lines = [proc.stdout.readline() for _ in range(2)]
            assert all(line.startswith("ready") for line in lines), lines + [proc.stdout.read()]
            processes = tree(psutil.Process(proc.pid))
            assert any(p.name() == "prterun" for p in processes)
            found = listening(processes)
            proc.stdin.write("end\n")
            proc.stdin.flush()
            assert proc.wait(timeout=60) == 0, proc.stdout.read()
            return found
        finally:
            if proc.poll() is None:
                proc.kill()  # leaving the with block waits for it and closes its pipes


def test_hvdrun_job_listens_on_loopback_only():
    found = sockets_of_running_job(clean_env())
    assert found, "mpiexec listens for its own use: a test that sees no socket sees nothing"
    assert not outside(found, set()), found


def test_the_loopback_interface_by_name_is_loopback():
    """`hvdrun --network-interface lo` (or JUPYTER_HVD_LISTEN=lo) as Horovod's docs use it on one host: Open MPI 5's
    launcher, kept to `lo` for its own connections, found no interface and the job did not start."""
    found = sockets_of_running_job(clean_env(**{LISTEN_VAR: "lo"}))
    assert found and not outside(found, set()), found


def test_the_user_may_let_open_mpi_listen_everywhere():
    """JUPYTER_HVD_LISTEN=any keeps Open MPI's own choice: every address (this is what the test above guards)."""
    found = sockets_of_running_job(clean_env(**{LISTEN_VAR: "any"}))
    assert {s.name for s in outside(found, set())} >= {"prterun", "python"}, found


def test_hvd_cell_job_listens_on_loopback_only(ip):
    before = {p.pid for p in tree(psutil.Process())}
    result = ip.run_cell("%%hvd -np 2 --framework none\nimport numpy as np\nhvd.allreduce(np.ones(2), name='x')")
    assert result.success
    try:
        job = [p for p in tree(psutil.Process()) if p.pid not in before]
        names = {p.name() for p in job}
        assert "prterun" in names and any("ipyparallel" in " ".join(p.cmdline()) for p in job), names
        time.sleep(0.5)  # the engines' connections settle
        found = listening([psutil.Process(), *job])  # the kernel's own sockets too
        assert found
        assert not outside(found, set()), found
    finally:
        ip.run_line_magic("hvd", "stop")
