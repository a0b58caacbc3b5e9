"""Slurm on the namespace hosts: munged everywhere with a key made for the run, slurmctld on head, slurmd on each
host, one partition of all hosts (each with the cores this machine has). Debian's slurm-wlm and munge."""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

MUNGED = "/usr/sbin/munged"
SLURMCTLD = "/usr/sbin/slurmctld"
SLURMD = "/usr/sbin/slurmd"
MUNGE_SOCKET = "/run/munge/munge.socket.2"  # each host has its own /run/munge


def unavailable_reason() -> str | None:
    """Why Slurm cannot run here (None when it can)."""
    for program in (MUNGED, SLURMCTLD, SLURMD):
        if not os.access(program, os.X_OK):
            return f"{program} is not installed (Debian: apt-get install slurm-wlm munge)"
    for program in ("salloc", "srun", "sinfo", "scontrol"):
        if shutil.which(program) is None:
            return f"{program} is not installed (Debian: apt-get install slurm-wlm)"
    return None


class SlurmSetup:
    """The munge key, slurm.conf and daemon command lines, in folder."""

    def __init__(self, folder: Path, head: str, head_addr: str, hosts: list[tuple[str, int | str]]):
        self.folder = folder
        self.head = head
        self.hosts = hosts
        folder.mkdir(mode=0o700, parents=True)
        for sub in ("ctld", "spool", "log", "munge"):
            (folder / sub).mkdir(mode=0o700)
        self.key = folder / "munge.key"
        self.key.write_bytes(os.urandom(1024))
        os.chmod(self.key, 0o400)
        self.conf = folder / "slurm.conf"
        self.conf.write_text(self._conf(head_addr))

    def _conf(self, head_addr: str) -> str:
        cores = len(os.sched_getaffinity(0))
        names = ",".join(name for name, _ in self.hosts)
        lines = [
            "ClusterName=jhvd",
            f"SlurmctldHost={self.head}({head_addr})",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={MUNGE_SOCKET}",
            f"StateSaveLocation={self.folder / 'ctld'}",
            f"SlurmdSpoolDir={self.folder / 'spool'}/%n",
            f"SlurmctldPidFile={self.folder / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.folder / 'spool'}/slurmd-%n.pid",
            f"SlurmctldLogFile={self.folder / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={self.folder / 'log'}/slurmd-%n.log",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "MpiDefault=none",
            "ReturnToService=2",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "KillWait=5",
            *(f"NodeName={name} NodeAddr={addr} CPUs={cores} State=UNKNOWN" for name, addr in self.hosts),
            f"PartitionName=main Nodes={names} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES",
        ]
        return "\n".join(lines) + "\n"

    def munged_argv(self, name: str) -> list[str]:
        return [MUNGED, "--foreground", "--force", f"--key-file={self.key}", f"--socket={MUNGE_SOCKET}",
                f"--pid-file={self.folder / 'munge' / f'{name}.pid'}",
                f"--log-file={self.folder / 'munge' / f'{name}.log'}",
                f"--seed-file={self.folder / 'munge' / f'{name}.seed'}"]

    def start_head(self) -> list[subprocess.Popen]:
        """munged and slurmctld on head (this process's namespaces), their output in the log folder."""
        started = []
        ctld = [SLURMCTLD, "-D", "-f", str(self.conf)]
        for name, argv in (("munged", self.munged_argv(self.head)), ("slurmctld", ctld)):
            with open(self.folder / "log" / f"{name}-{self.head}.out", "ab") as out:
                started.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT))
            if name == "munged":
                self._wait_for_socket()
        return started

    def host_daemons(self, name: str) -> list[tuple[str, list[str]]]:
        """What runs on host ``name``: munged, then slurmd."""
        return [("munged", self.munged_argv(name)), ("slurmd", [SLURMD, "-D", "-N", name, "-f", str(self.conf)])]

    def _wait_for_socket(self, timeout_s: float = 10) -> None:
        deadline = time.monotonic() + timeout_s
        while not os.path.exists(MUNGE_SOCKET):
            if time.monotonic() > deadline:
                raise RuntimeError(f"munged made no socket within {timeout_s:g} s")
            time.sleep(0.05)

    def wait_ready(self, timeout_s: float) -> None:
        """Return once every host's slurmd has registered and is idle, or raise with sinfo's view."""
        deadline = time.monotonic() + timeout_s
        while True:
            done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], capture_output=True, text=True,
                                  env={**os.environ, **self.client_env()})
            states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
            if done.returncode == 0 and len(states) == len(self.hosts) and all(s == "idle" for s in states.values()):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"Slurm's nodes not idle within {timeout_s:g} s: {done.stdout}{done.stderr}")
            time.sleep(0.3)

    def client_env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def describe(self) -> dict:
        return {"conf": str(self.conf), "log": str(self.folder / "log")}
