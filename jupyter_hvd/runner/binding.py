"""Where mpiexec places a job's ranks on the cores of one host.

On one host whose cores the ranks do not outnumber, each rank is bound to an equal share of them
(``--map-by slot:PE=k --bind-to core``): a rank's threads (the caller, the engine thread, a framework's
workers) then hand work to each other on the cores they share, rather than waking each other across
cores the other ranks are using. Anywhere else ranks are left unbound, as horovodrun leaves them: several
hosts (which may differ), more ranks than cores, or a launcher already kept to some cores (mpiexec
binds by the machine's numbering, not within the launcher's own affinity). The caller's own
``--bind-to`` (hvdrun --binding-args or --mpi-args) replaces all of this, as mpiexec refuses a second one;
so does JUPYTER_HVD_BINDING_ARGS in the launcher's environment (for %%hvd, which takes no mpiexec options).
"""
from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

UNBOUND = ["--bind-to", "none"]
BINDING_VAR = "JUPYTER_HVD_BINDING_ARGS"
BOUND_VAR = "JUPYTER_HVD_RANKS_BOUND"  # "1" in the environment of ranks bound to cores of their own


def binds_ranks(args: Sequence[str]) -> bool:
    """Whether mpiexec ``args`` bind each rank to its own cores (a ``--bind-to`` other than none)."""
    for i, arg in enumerate(args):
        if is_option(arg, "bind-to"):
            value = arg.split("=", 1)[1] if "=" in arg else (args[i + 1] if i + 1 < len(args) else "")
            return value.split(":", 1)[0] != "none"
    return False


def is_option(arg: str, name: str) -> bool:
    """Whether ``arg`` is mpiexec's option ``name``, in any of its spellings (-name, --name, --name=value)."""
    return arg.startswith("-") and arg.lstrip("-").split("=", 1)[0] == name


def machine_cores() -> int:
    """The cores (hyper-threads of one core counted once) of this machine, where this process may use all of
    them; 0 where it is kept to some, or the topology cannot be read."""
    cpus = os.sched_getaffinity(0)
    if len(cpus) != os.cpu_count():
        return 0
    cores = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add(((topology / "physical_package_id").read_text(), (topology / "core_id").read_text()))
        except OSError:
            return 0
    return len(cores)


def binding_options(np: int, mpi_args: Sequence[str], several_hosts: bool, env: Mapping[str, str]) -> list[str]:
    """The mpiexec options that place ``np`` ranks, given the caller's own ``mpi_args`` and the launcher's
    environment ``env``."""
    if any(is_option(a, "bind-to") for a in mpi_args):
        return []
    if BINDING_VAR in env:
        return shlex.split(env[BINDING_VAR])
    if several_hosts or any(is_option(a, "map-by") for a in mpi_args):
        return UNBOUND
    cores = machine_cores()
    if np > cores:
        return UNBOUND
    return ["--map-by", f"slot:PE={cores // np}", "--bind-to", "core"]
