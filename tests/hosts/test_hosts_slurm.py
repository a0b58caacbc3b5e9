"""Jobs inside a Slurm allocation (salloc -N 2 -n 4): hvdrun -np 4 and %%hvd -np 4 use the allocation's hosts
and slots with no --hosts, listen only where they must, and %%hvd says which allocation it used."""
import json
import os
import subprocess
import sys
import uuid

import psutil
import pytest
from hosts_jobs import WAITING_RANK, JobOutput, end_waiting_job, job_processes, kill_if_running
from listening import listening, loopback

from cluster_info import REPO, REQUIRE

pytestmark = pytest.mark.timeout(300)

def salloc(name: str) -> list[str]:
    """salloc of 2 hosts with 2 tasks each, named so that a test can cancel what a timeout left."""
    return ["salloc", "-N", "2", "-n", "4", "--quiet", "--time=5", f"--job-name={name}"]


# The hosts Slurm chose, with their slots, for rank_hosts.py to check the ranks against.
EXPECT = 'JHVD_EXPECT_HOSTS=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed s/$/:2/ | paste -sd, -)'
@pytest.fixture
def slurm(cluster):
    if cluster.slurm is None:
        reason = "the namespace hosts run without Slurm (see netns_cluster.py's output for why)"
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{REQUIRE}=1: {reason}")
        pytest.skip(reason)
    return cluster


@pytest.fixture
def job_name(slurm):
    """A name for the test's allocation; whatever is left of it is cancelled afterwards."""
    name = f"jhvd-{uuid.uuid4().hex[:12]}"
    yield name
    subprocess.run(["scancel", f"--name={name}"], env=slurm.env(), capture_output=True, timeout=30)


# Where in the allocation the job is launched from: its own shell (salloc, a batch script), or a step within it
# (srun --pty bash, a notebook server that srun started), whose SLURM_TASKS_PER_NODE is the step's, not the job's.
WHERE = {"allocation": [], "step": ["srun", "-N", "1", "-n", "1"]}


@pytest.mark.parametrize("where", WHERE)
def test_hvdrun_in_an_allocation_places_ranks_on_its_hosts(slurm, job_name, where):
    script = (f"export {EXPECT}; {sys.executable} -m jupyter_hvd.runner.hvdrun -np 4 -x JHVD_EXPECT_HOSTS "
              f"{sys.executable} -m pytest -q -x --color=no -p no:cacheprovider tests/ranks/rank_hosts.py")
    done = subprocess.run([*salloc(job_name), *WHERE[where], "sh", "-c", script], env=slurm.env(), cwd=REPO,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert done.stdout.count(" passed") == 4, done.stdout[-4000:]


def test_an_allocations_job_listens_on_the_hosts_network_only(slurm, job_name):
    """srun, which mpiexec starts to start its daemons, is Slurm's: it listens for Slurm's step daemons on every
    address (slurm.conf's SrunPortRange chooses its ports), as in every Slurm job. The job's own processes, here
    too, listen only on the hosts' network and loopback."""
    hvdrun = [sys.executable, "-m", "jupyter_hvd.runner.hvdrun", "-np", "4", sys.executable, "-c", WAITING_RANK]
    proc = subprocess.Popen([*salloc(job_name), *hvdrun], env=slurm.env(), cwd=REPO, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output = JobOutput(proc)
        output.wait_for("ready", 4, timeout=120)
        launcher = next(p for p in psutil.Process(proc.pid).children(recursive=True) if p.name() == "prterun")
        processes = [p for p in job_processes(slurm, launcher) if p.name() != "srun"]
        found = listening(processes)
        names = {s.name for s in found if not loopback(s.addr)}
        assert {"prterun", "prted", "python"} <= names, found
        network = slurm.networks[0].rsplit(".", 1)[0] + "."
        assert all(loopback(s.addr) or s.addr.startswith(network) for s in found), found
        end_waiting_job(proc, output)
    finally:
        kill_if_running(proc)


@pytest.mark.parametrize("where", WHERE)
def test_a_notebook_in_an_allocation_runs_its_cells_on_its_hosts(slurm, job_name, where):
    done = subprocess.run([*salloc(job_name), *WHERE[where], sys.executable, "tests/hosts/slurm_notebook.py"],
                          env=slurm.env(), cwd=REPO, capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    cells = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert [c["status"] for c in cells] == ["ok"] * 3, cells
    started, status = cells[1]["output"], cells[2]["output"]
    header = next(line for line in started.splitlines() if line.startswith("[hvd] started"))
    assert header.startswith("[hvd] started 4 ranks in Slurm allocation "), started
    hosts = sorted(line.split()[3] for line in started.splitlines() if " on h" in line)
    first, second = sorted(set(hosts))
    assert hosts == [first, first, second, second] and f"({first}:2,{second}:2)" in header, started
    assert "4 ranks on Slurm allocation " in status, status


def test_srun_without_pmix_is_refused_on_every_task_rather_than_training_alone(slurm, job_name):
    """This Slurm has no PMIx for Open MPI (as many have not): srun -n 2 python train.py started each task as
    MPI's only process, and each trained alone, silently."""
    code = "import jupyter_hvd as hvd\nhvd.init()\nprint('started', hvd.size())"
    done = subprocess.run([*salloc(job_name), "srun", "-n", "2", sys.executable, "-c", code], env=slurm.env(),
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "started" not in done.stdout, done.stdout + done.stderr
    assert done.stderr.count("RuntimeError: hvd.init(): this process is one of 2 that its launcher started "
                             "(SLURM_STEP_NUM_TASKS=2)") == 2, done.stderr[-4000:]


@pytest.mark.parametrize("where", WHERE)
def test_a_one_node_allocation_runs_jobs_on_that_node_as_on_any_host(slurm, job_name, where):
    """On the allocation's one node (a step, a batch script) a job is one on this host: shared memory without
    the libfabric transport, loopback, its cores bound; it used to get the settings of a job across hosts.
    From salloc's shell, which runs off the node, the job still starts there across the network."""
    code = "import os, jupyter_hvd as hvd\nhvd.init()\nprint('job', os.environ.get('OMPI_MCA_btl'), os.environ['JUPYTER_HVD_LISTEN'])"
    one_node = ["salloc", "-N", "1", "-n", "2", "--quiet", "--time=5", f"--job-name={job_name}"]
    hvdrun = [sys.executable, "-m", "jupyter_hvd.runner.hvdrun", "-np", "2", sys.executable, "-c", code]
    done = subprocess.run([*one_node, *WHERE[where], *hvdrun], env=slurm.env(), cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    network = slurm.networks[0].rsplit(".", 1)[0] + "."
    expected = "job ^ofi loopback" if where == "step" else f"job None {network}"
    assert [line[:len(expected)] for line in done.stdout.splitlines()] == [expected] * 2, done.stdout
