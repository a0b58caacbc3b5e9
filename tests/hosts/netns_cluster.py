"""A cluster of hosts made of Linux namespaces on this machine, for the multi-host tests (run as root).

    python tests/hosts/netns_cluster.py run [--hosts N] [--slurm] -- COMMAND...
    python tests/hosts/netns_cluster.py check      # why namespaces cannot be made here, if they cannot
    python tests/hosts/netns_cluster.py sweep      # end what a killed run left behind

``run`` starts COMMAND on a login host, ``head`` (10.213.0.1), beside hosts ``h1``..``hN`` (10.213.0.11..),
each with its own network stack, hostname, /tmp, /dev/shm and monotonic clock (h<i>'s runs i hours ahead, as
on machines booted at different times), each running sshd with keys made for the run (and, with --slurm,
munged and slurmd, with slurmctld on head). Two networks join them, each a bridge on head: 10.213.0.0/24
(the hosts' eth0, which their names resolve to) and 10.214.0.0/24 (eth1). COMMAND finds the cluster
described in the JSON file named by $JHVD_CLUSTER. Where namespaces cannot be made, COMMAND runs on this
machine as it is, with the reason in $JHVD_CLUSTER_UNAVAILABLE, so that tests can skip (or fail) saying why.

Nothing touches this machine's own network, routes, firewall, DNS or files: head is a network namespace of
its own, everything runs in a new PID namespace, and the cluster's files live on a tmpfs mounted over /run in
a private mount namespace. When the run ends, or this script is killed (SIGTERM, SIGHUP, even SIGKILL), the
kernel ends every process in the PID namespace, and the network and mounts go with their last process.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hosts_slurm  # noqa: E402
import hosts_ssh  # noqa: E402

STATE = Path("/run/jhvd-cluster")
REPO = Path(__file__).resolve().parents[2]
# The repository, bound here while the cluster's private /tmp and /dev/shm go on, when it lives under one of them
# (a clone in /tmp): bound back in place afterwards, on the head and on every host, so the command and the ranks
# still find it.
KEPT_REPO = Path("/run/jhvd-repo")
NETWORKS = [("10.213.0", "jhvd0", "eth0"), ("10.214.0", "jhvd1", "eth1")]  # (/24 prefix, head's bridge, hosts' link)
PREFIX_LEN = 24
HEAD = "head"
HEAD_ADDR = f"{NETWORKS[0][0]}.1"
BRIDGE = NETWORKS[0][1]
CLOCK_STEP_S = 3600  # h<i>'s monotonic clock runs i * CLOCK_STEP_S ahead of head's
INIT_MARK = "--cluster-init"
PR_SET_PDEATHSIG = 1  # linux/prctl.h  # in the command line of a cluster's first process (PID 1 of its namespace)
UNSHARE = ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc", "--net", "--uts", "--mount",
           "--propagation", "private"]
READY_TIMEOUT_S = 60


def host_addr(index: int, network: int = 0) -> str:
    """The address of host h<index> (1-based) on one of NETWORKS."""
    return f"{NETWORKS[network][0]}.{10 + index}"


def repo_under_private_mounts() -> bool:
    """Whether the repository lies where the cluster mounts private folders (/tmp, /dev/shm)."""
    return any(top == REPO or top in REPO.parents for top in (Path("/tmp"), Path("/dev/shm")))


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command quietly; a failure raises with its output."""
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip() or done.stdout.strip()}")
    return done


def nsenter(pid: int) -> list[str]:
    """The command prefix that runs a program inside the host whose namespaces process ``pid`` holds."""
    return ["nsenter", f"--target={pid}", "--net", "--uts", "--mount", "--time"]


# -- outside: checks, sweeping, starting the namespaces ----------------------------------------------------


def unavailable_reason() -> str | None:
    """Why this machine cannot make the cluster's namespaces (None when it can)."""
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    for tool in ("unshare", "nsenter", "ip", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    for tool in (hosts_ssh.SSHD, "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian: apt-get install openssh-server)"
    probe = (f"ip link add {BRIDGE} type bridge && ip link add jhvd-probe type veth peer name jhvd-peer "
             f"&& ip link set jhvd-probe master {BRIDGE}")
    done = subprocess.run([*UNSHARE, "sh", "-c", probe], capture_output=True, text=True)
    if done.returncode != 0:
        return f"cannot make namespaces, a bridge or veth pairs here: {done.stderr.strip()}"
    return None


def sweep() -> list[int]:
    """Kill the first process of any cluster whose run was killed before it could end it (the kernel then ends
    everything in that cluster's namespaces); the pids killed."""
    killed = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if not (len(argv) > 2 and argv[2] == INIT_MARK.encode()):  # python netns_cluster.py --cluster-init
                continue
            status = dict(line.split(":", 1) for line in (entry / "status").read_text().splitlines())
            if status["NSpid"].split()[-1] != "1":  # the cluster's PID 1, not the process it forked
                continue
            parent = int(status["PPid"])
            parent_argv = Path(f"/proc/{parent}/cmdline").read_bytes().split(b"\0") if parent > 1 else []
        except (OSError, ValueError, KeyError):
            continue
        if not (parent_argv and parent_argv[0].endswith(b"unshare")):
            os.kill(int(entry.name), signal.SIGKILL)
            killed.append(int(entry.name))
    return killed


def run(hosts: int, slurm: bool, command: list[str]) -> int:
    """Build the cluster and run command on its head; without namespaces, run command here with the reason."""
    for pid in sweep():
        print(f"netns_cluster: ended a cluster left by a killed run (pid {pid})", file=sys.stderr)
    reason = unavailable_reason()
    if reason is None and slurm:
        if slurm_reason := hosts_slurm.unavailable_reason():
            print(f"netns_cluster: no Slurm on the namespace hosts: {slurm_reason}", file=sys.stderr)
            slurm = False
    if reason is not None:
        print(f"netns_cluster: no namespace hosts: {reason}", file=sys.stderr)
        os.execvpe(command[0], command, {**os.environ, "JHVD_CLUSTER_UNAVAILABLE": reason})
    options = json.dumps({"hosts": hosts, "slurm": slurm, "command": command, "cwd": os.getcwd()})
    # unshare ignores SIGTERM while it waits, and outlives a parent killed with SIGKILL: this process stays its
    # parent, and ends it (and with it, PID 1 of the namespaces and so everything in them) when either happens.
    cluster = subprocess.Popen([*UNSHARE, sys.executable, os.path.abspath(__file__), INIT_MARK, options],
                               preexec_fn=lambda: ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL))
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda *_: cluster.kill())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command, in the same process group, gets it and ends
    code = cluster.wait()
    return code if code >= 0 else 128 - code


# -- inside: PID 1 of the cluster's namespaces ---------------------------------------------------------------


def init(options: dict) -> int:
    """PID 1 of the cluster: reaps every orphan while a child builds the cluster, runs the command and tears
    the cluster down; returns the command's exit status. When PID 1 exits, the kernel kills all the rest."""
    child = os.fork()
    if child == 0:
        code = 1
        try:
            code = Cluster(options["hosts"], options["slurm"]).run(options["command"], options["cwd"])
        except BaseException as exc:  # noqa: BLE001 - reported, then the namespace ends
            print(f"netns_cluster: {type(exc).__name__}: {exc}", file=sys.stderr)
        finally:
            os._exit(code)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # the command gets them from the terminal
        signal.signal(signum, lambda *_: None)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 1
        except InterruptedError:
            continue
        if pid == child:
            return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


class Host:
    """One namespace host: a process that holds its network, hostname, mount and time namespaces."""

    def __init__(self, index: int):
        self.index = index
        self.name = f"h{index}"
        self.addr = host_addr(index)
        self.links = [f"jhvd{n}-{self.name}" for n in range(len(NETWORKS))]  # its veth ends on head's bridges
        self.root = STATE / self.name  # its private /tmp and daemon files
        ahead = str(index * CLOCK_STEP_S)
        # A new time namespace holds the children of the process that makes it: unshare forks the holder.
        self.unshare = subprocess.Popen(["unshare", "--net", "--uts", "--mount", "--propagation", "private", "--time",
                                         "--monotonic", ahead, "--boottime", ahead, "--fork", "--kill-child",
                                         "sleep", "infinity"])
        self.pid = 0  # the holder's, once it runs
        self.daemons: list[tuple[str, list[str]]] = []  # what runs on it: (name, argv), to start again

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        return sh(*nsenter(self.pid), *argv)

    def start(self, name: str, argv: list[str]) -> subprocess.Popen:
        """Start a daemon inside this host, its output in the host's log folder."""
        self.daemons.append((name, argv))
        with open(self.root / "log" / f"{name}.log", "ab") as out:
            return subprocess.Popen([*nsenter(self.pid), *argv], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT)

    def build(self) -> None:
        """Give the host its name, its link on the bridge, a private /tmp and /dev/shm, and its own /run/munge."""
        for sub in ("tmp", "munge", "log", "spool"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.root / "tmp", 0o1777)
        self.pid = self._holder()
        self.run("hostname", self.name)
        self.run("ip", "link", "set", "lo", "up")
        for n, ((_, bridge, device), link) in enumerate(zip(NETWORKS, self.links)):
            sh("ip", "link", "add", link, "type", "veth", "peer", "name", device, "netns", str(self.pid))
            sh("ip", "link", "set", link, "master", bridge, "up")
            self.run("ip", "addr", "add", f"{host_addr(self.index, n)}/{PREFIX_LEN}", "dev", device)
            self.run("ip", "link", "set", device, "up")
        self.run("mount", "--bind", str(self.root / "tmp"), "/tmp")
        self.run("mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm")
        if repo_under_private_mounts():
            self.run("mkdir", "-p", str(REPO))
            self.run("mount", "--bind", str(KEPT_REPO), str(REPO))
        self.run("mount", "--bind", str(self.root / "munge"), "/run/munge")

    def _holder(self) -> int:
        """The pid of the process unshare forked into the new namespaces, once it is there."""
        deadline = time.monotonic() + 10
        while True:
            children = Path(f"/proc/{self.unshare.pid}/task/{self.unshare.pid}/children").read_text().split()
            if children and os.readlink(f"/proc/{children[0]}/ns/time") != os.readlink("/proc/self/ns/time"):
                return int(children[0])
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: no namespaces after 10 s")
            time.sleep(0.01)

    def describe(self) -> dict:
        return {"name": self.name, "addr": self.addr, "addrs": [host_addr(self.index, n) for n in range(len(NETWORKS))],
                "pid": self.pid, "keep": [self.unshare.pid, self.pid], "links": self.links,
                "clock_ahead_s": self.index * CLOCK_STEP_S, "tmp": str(self.root / "tmp"),
                "log": str(self.root / "log"), "nsenter": nsenter(self.pid), "daemons": self.daemons}


class Cluster:
    """head plus N hosts, their daemons, and the file that describes them to the command."""

    def __init__(self, count: int, slurm: bool):
        self.count = count
        self.slurm = slurm
        self.hosts: list[Host] = []
        self.daemons: list[subprocess.Popen] = []

    def run(self, command: list[str], cwd: str) -> int:
        self.build_head()
        self.hosts = [Host(i) for i in range(1, self.count + 1)]
        for host in self.hosts:
            host.build()
        ssh = hosts_ssh.SshSetup(STATE / "ssh", [(h.name, h.addr) for h in self.hosts])
        for host in self.hosts:
            self.daemons.append(host.start("sshd", ssh.sshd_argv(host.name)))
        ssh.wait_ready(READY_TIMEOUT_S)
        info = {"head": {"name": HEAD, "addr": HEAD_ADDR, "addrs": [f"{net}.1" for net, _, _ in NETWORKS]},
                "networks": [f"{net}.0/{PREFIX_LEN}" for net, _, _ in NETWORKS], "state": str(STATE),
                "ssh": ssh.describe()}
        env = {**os.environ, "JHVD_CLUSTER": str(STATE / "cluster.json")}
        if self.slurm:
            slurm = hosts_slurm.SlurmSetup(STATE / "slurm", HEAD, HEAD_ADDR, [(h.name, h.addr) for h in self.hosts])
            self.daemons += slurm.start_head()
            for host in self.hosts:
                self.daemons += [host.start(name, argv) for name, argv in slurm.host_daemons(host.name)]
            slurm.wait_ready(READY_TIMEOUT_S)
            info["slurm"] = slurm.describe()
            env.update(slurm.client_env())
        info["hosts"] = [h.describe() for h in self.hosts]
        (STATE / "cluster.json").write_text(json.dumps(info, indent=1))
        try:
            return subprocess.call(command, cwd=cwd, env=env)
        finally:
            self.tear_down()

    def build_head(self) -> None:
        """head: its own /run (the cluster's files) and /tmp, its hostname, loopback, the bridge, /etc/hosts."""
        sh("mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", "/run")
        if repo_under_private_mounts():
            KEPT_REPO.mkdir()
            sh("mount", "--bind", str(REPO), str(KEPT_REPO))
        sh("mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/tmp")
        sh("mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", "/dev/shm")
        if repo_under_private_mounts():
            REPO.mkdir(parents=True, exist_ok=True)
            sh("mount", "--bind", str(KEPT_REPO), str(REPO))
        for folder in (STATE, Path("/run/sshd"), Path("/run/munge")):
            folder.mkdir(mode=0o755, parents=True, exist_ok=True)
        socket.sethostname(HEAD)
        sh("ip", "link", "set", "lo", "up")
        for net, bridge, _ in NETWORKS:
            sh("ip", "link", "add", bridge, "type", "bridge")
            sh("ip", "addr", "add", f"{net}.1/{PREFIX_LEN}", "dev", bridge)
            sh("ip", "link", "set", bridge, "up")
        names = [f"{HEAD_ADDR}\t{HEAD}"] + [f"{host_addr(i)}\th{i}" for i in range(1, self.count + 1)]
        hosts_file = STATE / "hosts"
        hosts_file.write_text(Path("/etc/hosts").read_text() + "\n# namespace hosts\n" + "\n".join(names) + "\n")
        sh("mount", "--bind", str(hosts_file), "/etc/hosts")

    def tear_down(self) -> None:
        """Stop the daemons, then every other process in the hosts, and remove the links (PID 1's exit would
        end them all anyway; this is the orderly way)."""
        for daemon in reversed(self.daemons):
            daemon.terminate()
        for daemon in self.daemons:
            try:
                daemon.wait(timeout=5)
            except subprocess.TimeoutExpired:
                daemon.kill()
        for host in self.hosts:
            host.unshare.kill()  # and, with it, the holder (--kill-child)
            host.unshare.wait()
            for link in host.links:
                sh("ip", "link", "del", link, check=False)
        for _, bridge, _ in NETWORKS:
            sh("ip", "link", "del", bridge, check=False)


def main(argv: list[str]) -> int:
    if argv[:1] == [INIT_MARK]:
        return init(json.loads(argv[1]))
    parser = argparse.ArgumentParser(prog="netns_cluster.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    run_parser = sub.add_parser("run", help="build the cluster and run COMMAND on its head")
    run_parser.add_argument("--hosts", type=int, default=3, help="how many hosts besides head (default 3)")
    run_parser.add_argument("--slurm", action="store_true", help="also run munge and Slurm")
    run_parser.add_argument("command", nargs=argparse.REMAINDER)
    sub.add_parser("check", help="say why namespaces cannot be made here (exit 1), or nothing (exit 0)")
    sub.add_parser("sweep", help="end clusters whose run was killed")
    args = parser.parse_args(argv)
    if args.action == "check":
        reason = unavailable_reason()
        if reason:
            print(reason)
        return 1 if reason else 0
    if args.action == "sweep":
        print(f"ended {len(sweep())} cluster(s)")
        return 0
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")
    if not 1 <= args.hosts <= 9:
        parser.error("--hosts must be between 1 and 9")
    return run(args.hosts, args.slurm, command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
