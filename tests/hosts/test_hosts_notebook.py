"""%%hvd --hosts from a Jupyter kernel on head: engines on the other hosts register with the notebook's
controller (which listens for them on the network that reaches them, for the kernel on loopback, encrypted),
cells run, %hvd status and the monitor show every rank, and %hvd stop or a kernel shutdown leave no process
and no folder on any host."""
import json
import os
import time

import psutil
import pytest
from hosts_jobs import job_processes
from listening import listening, loopback
from test_kernel import Kernel, describe, tagged, wait_gone

pytestmark = pytest.mark.timeout(400)

START = "%%hvd -np 4 --hosts h1:2,h2:2 --framework none"
GONE_WITHIN_S = 15
ALIGNED_WITHIN_US = 5_000_000


@pytest.fixture(scope="module")
def kernel_env(cluster):
    """The kernel inherits this process's environment: ssh to the hosts with the cluster's config."""
    saved = dict(os.environ)
    os.environ.update({k: v for k, v in cluster.env().items() if k.startswith("PRTE_")})
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="module")
def kernel(kernel_env):
    """A kernel with 4 ranks running on h1 and h2."""
    k = Kernel()
    k.execute("%load_ext jupyter_hvd")
    reply, out = k.execute(f"{START}\nimport socket\nprint('on', socket.gethostname(), hvd.rank(), hvd.local_rank())",
                           timeout=240)
    assert reply["status"] == "ok", out
    k.first_output = out
    yield k
    k.close()


def command_line(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:  # it ended meanwhile
        return ""


def host_state(cluster) -> dict:
    """Each host's processes (but its sshd) and /tmp entries; a process that ends while they are read is gone."""
    state = {}
    for h in cluster.hosts:
        pids = set()
        for p in h.processes():
            try:
                if p.name() != "sshd":
                    pids.add(p.pid)
            except psutil.Error:  # it ended meanwhile
                continue
        state[h.name] = (pids, {e.name for e in h.tmp.iterdir()})
    return state


def test_ranks_on_two_hosts_run_cells_and_status_shows_their_hosts(kernel):
    lines = sorted(line for line in kernel.first_output.splitlines() if " on " in line)
    assert lines == ["[rank 0] on h1 0 0", "[rank 1] on h1 1 1", "[rank 2] on h2 2 0", "[rank 3] on h2 3 1"], \
        kernel.first_output
    reply, out = kernel.execute("%%hvd\nimport numpy as np\nhvd.allreduce(np.array([hvd.rank()]), op=hvd.Sum)[0]")
    assert reply["status"] == "ok" and out.strip().endswith("6"), out
    status = kernel.execute("%hvd status")[1]
    hosts = [line.split()[1] for line in status.splitlines()[2:]]
    assert "4 ranks on h1:2,h2:2" in status and hosts == ["h1", "h1", "h2", "h2"], status


def test_the_controller_listens_for_engines_on_their_network_only_and_encrypts(kernel, cluster):
    head_processes = tagged(kernel.tag)
    controller = [p for p in head_processes if "ipyparallel.controller" in " ".join(p.cmdline())]
    launcher = next(p for p in head_processes if p.name() == "prterun")
    found = listening(head_processes + job_processes(cluster, launcher))
    network = cluster.networks[0].rsplit(".", 1)[0] + "."
    assert all(loopback(s.addr) or s.addr.startswith(network) for s in found), found
    from_controller = listening(controller)
    engine_side = {s.addr for s in from_controller if not loopback(s.addr)}
    assert engine_side == {cluster.head["addr"]}, from_controller  # the kernel's ports are on loopback
    assert any(loopback(s.addr) for s in from_controller), from_controller
    reply, out = kernel.execute("%%hvd --rank 0\nimport os, json\ninfo = json.loads(os.environ['IPP_CONNECTION_INFO'])\n"
                                "print(info['key'], info['curve_serverkey'])")
    assert reply["status"] == "ok", out
    key, server_key = out.split()[-2:]
    assert len(key) == 64 and len(server_key) == 40, out  # signed, and encrypted
    everywhere = head_processes + [p for h in cluster.hosts for p in h.processes()]
    assert not [p.pid for p in everywhere if key in command_line(p)], "the signing key on a command line"


def test_the_monitor_puts_every_rank_on_one_time_axis(kernel, cluster):
    cell = ("%%hvd\nimport numpy as np, time\n"
            "for step in range(30):\n"
            "    hvd.allreduce(np.ones(1000, np.float32), name=f'm.{step}')\n"
            "    hvd.monitor.step(32)\n"
            "    time.sleep(0.02)\n")
    reply, out = kernel.execute(cell)
    assert reply["status"] == "ok", out
    probe = ("import json\nstate = get_ipython().magics_manager.registry['HvdMagics'].last_monitor.state()\n"
             "starts = {}\n"
             "for info, lane in zip(state['ranks'], state['timeline']['ranks']):\n"
             "    for phase, name, start in zip(lane['phase'], lane['name'], lane['start_us']):\n"
             "        if phase == 'COLLECTIVE' and name.startswith('m.'):\n"
             "            starts.setdefault(name, {})[info['rank']] = start + info['clock_offset_us']\n"
             "print(json.dumps({'samples': [r['samples'] for r in state['ranks']], 'starts': starts}))")
    reply, out = kernel.execute(probe)
    assert reply["status"] == "ok", out
    shown = json.loads(out.strip().splitlines()[-1])
    assert shown["samples"] == [30 * 32] * 4, shown["samples"]
    complete = [ranks for ranks in shown["starts"].values() if len(ranks) == 4]
    assert complete, shown["starts"]
    # Clocks hours apart would put every operation's starts hours apart, while a rank descheduled on a busy
    # machine starts an operation late (by 0.1 to 5 s seen): the typical operation is the one that counts.
    spreads = sorted(max(r.values()) - min(r.values()) for r in complete)
    assert spreads[len(spreads) // 2] < ALIGNED_WITHIN_US, shown["starts"]  # the hosts' clocks are hours apart


def test_stop_and_kernel_shutdown_leave_nothing_on_any_host(kernel_env, cluster):
    before = host_state(cluster)
    head_tmp = set(os.listdir("/tmp"))
    k = Kernel()
    try:
        k.execute("%load_ext jupyter_hvd")
        for ending in ("%hvd stop", "shutdown"):
            reply, out = k.execute(f"{START}\nhvd.rank()", timeout=240)
            assert reply["status"] == "ok", out
            assert all(host_state(cluster)[h][0] for h in ("h1", "h2")), "no rank processes on the hosts"
            if ending == "shutdown":
                k.km.shutdown_kernel(now=False)
                assert not wait_gone(k.tag, GONE_WITHIN_S), describe(tagged(k.tag))
            else:
                assert "[hvd] stopped the ranks" in k.execute(ending)[1]
            deadline = time.monotonic() + GONE_WITHIN_S
            while host_state(cluster) != before and time.monotonic() < deadline:
                time.sleep(0.2)
            assert host_state(cluster) == before, f"after {ending}"
            left = set(os.listdir("/tmp")) - head_tmp - {os.path.basename(k.km.connection_file)}
            assert not left, f"after {ending}: {left}"
    finally:
        k.close()


def test_hosts_that_ssh_cannot_log_in_to_are_named_with_what_ssh_said(cluster):
    """The notebook's kernel with no key that the hosts take: the cell says ssh could not log in, and why."""
    saved = dict(os.environ)
    os.environ.update({k: v for k, v in cluster.env("config_bare").items() if k.startswith("PRTE_")})
    k = Kernel()
    try:
        k.execute("%load_ext jupyter_hvd")
        reply, out = k.execute("%%hvd -np 2 --hosts h1:1,h2:1 --framework none\nprint('ran')", timeout=120)
        assert reply["status"] == "error" and "] ran" not in out, out
        assert "could not start 2 ranks: ssh could not log in (root@h" in out, out
        assert "Permission denied (publickey" in out and "`ssh HOST true` must work" in out, out
    finally:
        k.close()
        os.environ.clear()
        os.environ.update(saved)


def test_a_host_that_never_answers_is_named_after_the_start_timeout(cluster):
    saved = dict(os.environ)
    os.environ.update({k: v for k, v in cluster.env().items() if k.startswith("PRTE_")})
    os.environ["HOROVOD_START_TIMEOUT"] = "2"
    k = Kernel()
    try:
        with cluster.silent_address() as silent:
            k.execute("%load_ext jupyter_hvd")
            reply, out = k.execute(f"%%hvd -np 2 --hosts h1:1,{silent}:1 --framework none\nprint('ran')", timeout=120)
        assert reply["status"] == "error" and "] ran" not in out, out
        assert (f"could not start 2 ranks: ssh could not reach the host (ssh: connect to host {silent} port 22: "
                "Connection timed out)") in out, out
    finally:
        k.close()
        os.environ.clear()
        os.environ.update(saved)


def test_a_rank_that_crashes_on_another_host_is_told_in_open_mpis_words_and_the_next_cell_starts_anew(kernel_env):
    """The kernel cannot see a process on another host end: mpiexec's last lines say which rank ended the job.
    (Open MPI names the rank that crashed, or a rank on h1 that aborted when its connection to it closed.)"""
    k = Kernel()
    try:
        k.execute("%load_ext jupyter_hvd")
        reply, out = k.execute(f"{START}\nhvd.rank()", timeout=240)
        assert reply["status"] == "ok", out
        reply, out = k.execute("%%hvd\nimport ctypes, numpy as np\nif hvd.rank() == 3:\n    ctypes.string_at(0)\n"
                               "hvd.allreduce(np.ones(4), name='after')", timeout=120)
        assert reply["status"] == "error", out
        assert "died. The job was stopped; the next %%hvd cell starts new ranks." in out, out
        said = out.split("mpiexec's output (last lines):\n", 1)[-1]
        assert "prterun" in said and "[IPEngine" not in said, out
        reply, out = k.execute("%%hvd\nimport socket\nprint('on', socket.gethostname())", timeout=240)
        assert reply["status"] == "ok" and out.count(" on h") == 4, out
    finally:
        k.close()
