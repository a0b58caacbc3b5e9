"""What the multi-host tests know and do about the namespace hosts: names, ssh settings, each host's
processes and files, and taking a host down."""
from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
REQUIRE = "JUPYTER_HVD_REQUIRE_HOSTS"  # 1: the multi-host tests fail where they would skip (CI)


@dataclass
class Host:
    name: str
    addr: str  # what its name resolves to
    addrs: list[str]  # one on each of the cluster's networks
    pid: int  # holds the host's namespaces
    keep: list[int]  # the processes that make the host, not what runs on it
    links: list[str]  # its veth ends on head's bridges
    clock_ahead_s: int  # how far its monotonic clock is ahead of head's
    tmp: Path  # its /tmp, as head sees it
    log: Path  # its daemons' logs, as head sees it
    nsenter: list[str]
    daemons: list[tuple[str, list[str]]]  # what the cluster started on it

    def netns(self) -> str:
        return os.readlink(f"/proc/{self.pid}/ns/net")

    def processes(self) -> list[psutil.Process]:
        """Every live process on this host (its network namespace) but the one that holds the namespaces."""
        found, mine = [], self.netns()
        for process in psutil.process_iter():
            try:
                if process.pid not in self.keep and os.readlink(f"/proc/{process.pid}/ns/net") == mine \
                        and process.status() != psutil.STATUS_ZOMBIE:
                    found.append(process)
            except (OSError, psutil.Error):
                continue
        return found

    def run(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
        """Run a command on this host directly (not through ssh)."""
        return subprocess.run([*self.nsenter, *argv], capture_output=True, text=True, timeout=timeout)


class ClusterInfo:
    """The cluster described by $JHVD_CLUSTER."""

    def __init__(self, info: dict):
        self.info = info
        self.head = info["head"]
        self.hosts = [Host(h["name"], h["addr"], h["addrs"], h["pid"], h["keep"], h["links"], h["clock_ahead_s"],
                           Path(h["tmp"]), Path(h["log"]), h["nsenter"], h["daemons"]) for h in info["hosts"]]
        self.networks = info["networks"]
        self.ssh = info["ssh"]
        self.slurm = info.get("slurm")

    def host(self, name: str) -> Host:
        return next(h for h in self.hosts if h.name == name)

    def env(self, config: str = "config", **extra: str) -> dict[str, str]:
        """Environment for hvdrun, mpiexec or a kernel on head: ssh with the cluster's config, this repo importable."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_ALLOW_RUN_AS_ROOT")}
        env["PRTE_MCA_plm_ssh_agent"] = f"ssh -F {self.ssh[config]}"
        if self.slurm:
            env["SLURM_CONF"] = self.slurm["conf"]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        env.update(extra)
        return env

    def kill_host(self, name: str, link_down: bool) -> list[psutil.Process]:
        """Take host name away as a machine that dies does: with link_down, its links go first, so that no
        peer hears its connections close; then every process on it gets SIGKILL. The processes killed."""
        host = self.host(name)
        if link_down:
            for link in host.links:
                subprocess.run(["ip", "link", "set", link, "down"], check=True)
        victims = host.processes()
        for process in victims:
            try:
                process.send_signal(signal.SIGKILL)
            except psutil.Error:
                continue
        return victims

    def revive(self, name: str, timeout: float = 60) -> None:
        """Bring a host taken down by kill_host back: its link up, its daemons started again, ssh answering."""
        host = self.host(name)
        for link in host.links:
            subprocess.run(["ip", "link", "set", link, "up"], check=True)
        for daemon, argv in host.daemons:
            with open(host.log / f"{daemon}.log", "ab") as log:
                subprocess.Popen([*host.nsenter, *argv], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                 start_new_session=True)
        deadline = time.monotonic() + timeout
        while self.ssh_run(name, "true").returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not take an ssh login within {timeout:g} s of reviving")
            time.sleep(0.2)

    @contextlib.contextmanager
    def silent_address(self) -> Iterator[str]:
        """An address on the first network whose packets reach a host that drops them (the address is not its
        own): what a host that is down behind a router, or one behind a firewall that drops ssh, is to ssh."""
        network = ipaddress.ip_network(self.networks[0])
        addr = str(network.network_address + 99)
        host = self.hosts[-1]
        device = next(line.split()[1] for line in host.run("ip", "-o", "-4", "addr").stdout.splitlines()
                      if f" {host.addrs[0]}/" in line)
        mac = host.run("cat", f"/sys/class/net/{device}/address").stdout.strip()
        bridge = subprocess.run(["ip", "-o", "route", "get", host.addrs[0]], capture_output=True, text=True,
                                check=True).stdout.split(" dev ")[1].split()[0]
        subprocess.run(["ip", "neigh", "replace", addr, "lladdr", mac, "dev", bridge, "nud", "permanent"], check=True)
        try:
            yield addr
        finally:
            subprocess.run(["ip", "neigh", "del", addr, "dev", bridge], check=False)

    def ssh_run(self, name: str, *command: str, config: str = "config", options: tuple[str, ...] = (),
                timeout: float = 30) -> subprocess.CompletedProcess:
        """Run a command on a host through ssh, as a launcher does."""
        return subprocess.run(["ssh", "-F", self.ssh[config], *options, name, *command], capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)
