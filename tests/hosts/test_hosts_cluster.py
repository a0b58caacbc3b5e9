"""The namespace hosts themselves: each has its own name, address and /tmp, and takes ssh logins only with
the run's keys."""
import socket
import time
import uuid

import psutil
import pytest

pytestmark = pytest.mark.timeout(120)


def test_each_host_has_its_own_name_addresses_tmp_and_clock(cluster):
    assert socket.gethostname() == cluster.head["name"]
    mark = f"only-here-{uuid.uuid4().hex}"
    first = cluster.hosts[0]
    (first.tmp / mark).write_text("x")
    for host in cluster.hosts:
        done = cluster.ssh_run(host.name, "hostname; hostname -I; cut -d' ' -f1 /proc/uptime; ls /tmp")
        here = time.monotonic()
        assert done.returncode == 0, done.stderr
        name, addrs, uptime, *files = done.stdout.split("\n")
        assert name == host.name and addrs.split() == host.addrs
        assert abs(float(uptime) - here - host.clock_ahead_s) < 600, (uptime, here)  # booted hours apart
        assert (mark in files) == (host is first), f"{host.name}'s /tmp: {files}"
    (first.tmp / mark).unlink()
    pids = [{p.pid for p in host.processes()} for host in cluster.hosts]
    assert all(pids) and len(set.union(*pids)) == sum(map(len, pids)), "hosts share processes"


def test_logins_need_the_runs_keys(cluster):
    name, alt = cluster.hosts[0].name, ("-p", str(cluster.ssh["alt_port"]), "-i", cluster.ssh["alt_key"])
    assert cluster.ssh_run(name, "true").returncode == 0
    assert cluster.ssh_run(name, "true", config="config_bare").returncode != 0  # no key given
    assert cluster.ssh_run(name, "true", config="config_bare", options=alt).returncode == 0
    assert cluster.ssh_run(name, "true", config="config_bare", options=alt[2:]).returncode != 0  # port 22: alt refused


def test_a_host_taken_down_stops_answering_and_comes_back(cluster):
    host = cluster.hosts[-1]
    try:
        killed = cluster.kill_host(host.name, link_down=True)
        assert killed
        psutil.wait_procs(killed, timeout=10)
        assert not host.processes()
        assert cluster.ssh_run(host.name, "true", options=("-o", "ConnectTimeout=2")).returncode != 0
    finally:
        cluster.revive(host.name)
    assert cluster.ssh_run(host.name, "hostname").stdout.strip() == host.name
