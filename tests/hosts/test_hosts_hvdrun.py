"""hvdrun across the namespace hosts: placement and topology, every op, SSH options, the network it uses and
listens on, a timeline whose ranks' clocks are aligned, and no session folder left on any host."""
import collections
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
from hosts_jobs import (WAITING_RANK, JobOutput, end_waiting_job, job_processes, kill_if_running, rank_tests,
                        run_job)
from hvdrun_cli import hvdrun_argv
from listening import connected, listening, loopback

from cluster_info import REPO

pytestmark = pytest.mark.timeout(300)

ALIGNED_WITHIN_US = 5_000_000  # the hosts' clocks are hours apart; ranks of one collective start within this


def tmp_contents(cluster) -> dict[str, set[str]]:
    """What each host has in its /tmp."""
    return {h.name: {p.name for p in h.tmp.iterdir()} for h in cluster.hosts}


def left_behind(cluster, before: dict[str, set[str]]) -> dict[str, list[str]]:
    """What appeared in the hosts' /tmp since ``before``, but a timeline file a job was asked for."""
    new = {name: sorted(n for n in now - before[name] if not n.startswith("tl-"))
           for name, now in tmp_contents(cluster).items()}
    return {name: names for name, names in new.items() if names}


def test_two_hosts_two_ranks_each_every_op_and_an_aligned_timeline(cluster):
    before = tmp_contents(cluster)
    timeline = f"tl-{uuid.uuid4().hex}.json"
    rank_tests(cluster, "h1:2,h2:2", "rank_hosts.py", "rank_ops.py", flags=("--timeline-filename", f"/tmp/{timeline}"),
               select=("-k", "not test_topology"))  # rank_ops' topology test is for one host
    trace = json.loads((cluster.host("h1").tmp / timeline).read_text())  # rank 0 ran on h1 and wrote it there
    starts = collections.defaultdict(dict)
    for event in trace["traceEvents"]:
        tensor = event.get("args", {}).get("tensor", "")
        if event["name"] == "ALLREDUCE" and tensor.startswith("tl."):
            starts[tensor][event["pid"]] = event["ts"]
    assert len(starts) == 20 and all(len(ranks) == 4 for ranks in starts.values()), starts
    spread = max(max(ranks.values()) - min(ranks.values()) for ranks in starts.values())
    print(f"\nranks on 2 hosts, clocks {cluster.host('h2').clock_ahead_s - cluster.host('h1').clock_ahead_s} s "
          f"apart: the timeline's ranks start one allreduce at most {spread / 1000:.1f} ms apart")
    assert spread < ALIGNED_WITHIN_US, starts
    assert not left_behind(cluster, before)


def test_three_hosts_with_uneven_slots_from_a_hostfile(cluster, tmp_path):
    """Local rank 1 is on one host only: its cross size is 1, and the job is not homogeneous."""
    before = tmp_contents(cluster)
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# h2 takes two ranks\nh1 slots=1\nh2 slots=2\nh3 slots=1\n")
    rank_tests(cluster, str(hostfile), "rank_hosts.py", JHVD_EXPECT_HOSTS="h1:1,h2:2,h3:1")
    assert not left_behind(cluster, before)


def test_ssh_port_and_identity_file_reach_the_hosts(cluster):
    """Port 2222 takes only the second key, and the ssh config given has no key: -p and -i must both reach ssh."""
    show = "import socket; print('on', socket.gethostname())"
    args = ["-np", "2", "-H", "h1:1,h2:1", sys.executable, "-c", show]
    result = run_job(cluster, "-p", str(cluster.ssh["alt_port"]), "-i", cluster.ssh["alt_key"], *args,
                     config="config_bare")
    assert result.returncode == 0, result.stdout
    assert sorted(line for line in result.stdout.splitlines() if line.startswith("on ")) == ["on h1", "on h2"]
    refused = run_job(cluster, "-i", cluster.ssh["alt_key"], *args, config="config_bare", timeout=60)
    assert refused.returncode != 0
    assert "hvdrun: could not start the job on h" in refused.stdout, refused.stdout  # not "lost host"
    assert "ssh could not log in (root@h" in refused.stdout and "Permission denied (publickey" in refused.stdout


def test_a_host_that_never_answers_fails_the_job_after_the_start_timeout(cluster):
    """A host that drops ssh's packets: ssh waited for the kernel to give up connecting (134 s here), unless the
    user's ssh config said otherwise (this cluster's says 10 s); now hvdrun's --start-timeout, as horovodrun's."""
    with cluster.silent_address() as silent:
        began = time.monotonic()
        result = run_job(cluster, "--start-timeout", "2", "-np", "3", "-H", f"h1:2,{silent}:1", sys.executable,
                         "-c", "pass", timeout=60)
        took = time.monotonic() - began
    print(f"\nthe job on a silent host failed after {took:.1f} s")
    assert result.returncode != 0
    assert (f"hvdrun: could not start the job on {silent}: ssh could not reach the host (ssh: connect to host {silent} "
            "port 22: Connection timed out)") in result.stdout, result.stdout


def test_a_host_whose_key_ssh_does_not_know_is_named_with_what_ssh_said(cluster, tmp_path):
    """A host the launching user never logged in to: ssh, run without a terminal, cannot ask."""
    config = tmp_path / "config"
    config.write_text(Path(cluster.ssh["config"]).read_text().replace(
        str(Path(cluster.ssh["config"]).parent / "known_hosts"), str(tmp_path / "known_hosts")))
    (tmp_path / "known_hosts").write_text("")
    cluster.ssh["config_unknown_hosts"] = str(config)
    result = run_job(cluster, "-np", "2", "-H", "h1:1,h2:1", sys.executable, "-c", "print('ran')",
                     config="config_unknown_hosts", timeout=60)
    assert result.returncode != 0 and "\nran" not in result.stdout
    assert "hvdrun: could not start the job on h" in result.stdout, result.stdout
    assert "host key is known for h" in result.stdout and "Host key verification failed" in result.stdout


@pytest.mark.parametrize("chosen", [None, 1], ids=["the network that reaches the hosts", "--network-interface"])
def test_a_job_connects_and_listens_on_one_network_only(cluster, chosen):
    """Without --network-interface: the network head reaches the hosts by (their names resolve to 10.213.0.x);
    with --network-interface 10.214.0.0/24, the other one. Ranks, daemons and mpiexec listen there and on
    loopback only, and the ranks' connections between hosts go over it."""
    before = tmp_contents(cluster)
    network = cluster.networks[chosen or 0]
    prefix = network.rsplit(".", 1)[0] + "."
    flags = ["--network-interface", network] if chosen else []
    proc = subprocess.Popen(hvdrun_argv("-np", "4", "-H", "h1:2,h2:2", *flags, sys.executable, "-c", WAITING_RANK),
                            env=cluster.env(), cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        output = JobOutput(proc)
        output.wait_for("ready", 4, timeout=120)
        processes = job_processes(cluster, psutil.Process(proc.pid))
        names = {p.name() for p in processes}
        assert {"prterun", "prted", "python"} <= names, names
        found = listening(processes)
        bound = {(s.name, s.addr) for s in found if not loopback(s.addr)}
        assert {name for name, _ in bound} == {"prterun", "prted", "python"}, found  # every kind listens, and
        assert all(addr.startswith(prefix) for _, addr in bound), found  # only on the chosen network
        ranks = [p for p in processes if p.name() == "python" and p.pid != proc.pid]
        between = {(s.addr, s.peer) for s in connected(ranks) if not loopback(s.peer)}
        assert between and all(a.startswith(prefix) and b.startswith(prefix) for a, b in between), between
        end_waiting_job(proc, output)
    finally:
        kill_if_running(proc)
    time.sleep(0.5)
    assert not left_behind(cluster, before)
