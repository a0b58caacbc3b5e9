"""The Slurm allocation a job starts in (salloc, or a batch script from sbatch): its id, hosts and slots, from the
environment Slurm gives it. mpiexec places ranks on an allocation by itself; hvdrun and %%hvd need the hosts
to know where the job listens, and %%hvd to say which allocation it used."""
from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_COUNT = re.compile(r"([0-9]+)(?:\(x([0-9]+)\))?")


def hosts_listing(hosts: Iterable[tuple[str, int]]) -> str:
    """"h1:2,h2:2": hosts and their slots, as --hosts takes them."""
    return ",".join(f"{host}:{slots}" for host, slots in hosts)


@dataclass(frozen=True)
class Allocation:
    job_id: str
    hosts: tuple[tuple[str, int], ...]  # each host and its slots (tasks), in Slurm's order

    def listing(self) -> str:
        """The allocation's hosts and slots, as --hosts takes them."""
        return hosts_listing(self.hosts)

    def __str__(self) -> str:
        return f"Slurm allocation {self.job_id} ({self.listing()})"


def counts(text: str) -> list[int]:
    """Slurm's per-node counts, "2(x3),1", as [2, 2, 2, 1]."""
    values = []
    for item in text.split(","):
        match = _COUNT.fullmatch(item.strip())
        if match is None:
            raise ValueError(f"not a Slurm count list: {text!r}")
        values += [int(match.group(1))] * int(match.group(2) or 1)
    return values


def expand_nodelist(nodelist: str) -> list[str]:
    """Slurm's compressed host list ("h[1-3],gpu07") as names, by scontrol, which knows every form of it; a
    list with no ranges in it ("gpu07", "a,b") as it is, so that a job on one node runs where Slurm's own
    programs are missing (in a container that Slurm started)."""
    if "[" not in nodelist:
        return [name for name in nodelist.split(",") if name]
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        raise ValueError("in a Slurm allocation, but scontrol is not on PATH to read its host list")
    done = subprocess.run([scontrol, "show", "hostnames", nodelist], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise ValueError(f"scontrol could not read the allocation's host list {nodelist!r}: {done.stderr.strip()}")
    return done.stdout.split()


def allocation(environ: Mapping[str, str]) -> Allocation | None:
    """The allocation this process runs in, whose hosts a job is placed on; None outside one, and for an
    allocation of this node alone (a batch script or step on a job's one node), where a job is one on this
    host: bound to its cores, on shared memory and loopback, as anywhere else."""
    job_id, nodelist = environ.get("SLURM_JOB_ID"), environ.get("SLURM_JOB_NODELIST")
    if not job_id or not nodelist:
        return None
    hosts = expand_nodelist(nodelist)
    # Within a step SLURM_TASKS_PER_NODE is the step's, while the hosts are the job's: the job's CPUs per host
    # are its slots there.
    per_node = ("SLURM_JOB_CPUS_PER_NODE", "SLURM_TASKS_PER_NODE") if in_step(environ) else (
        "SLURM_TASKS_PER_NODE", "SLURM_JOB_CPUS_PER_NODE")
    slots = counts(next((environ[name] for name in per_node if environ.get(name)), "1"))
    if len(slots) != len(hosts):
        raise ValueError(f"Slurm gives {len(hosts)} hosts ({nodelist}) but {len(slots)} task counts")
    if hosts == [environ.get("SLURMD_NODENAME")]:  # set on the job's nodes, not in salloc's shell
        return None
    return Allocation(job_id, tuple(zip(hosts, slots)))


def in_step(environ: Mapping[str, str]) -> bool:
    """Whether this process runs within a step of a Slurm job (started by srun: srun --pty bash, a notebook
    server that srun started), rather than in the allocation's own shell or batch script."""
    return bool(environ.get("SLURM_JOB_ID") and environ.get("SLURM_STEP_ID"))
