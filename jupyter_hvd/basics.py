"""Engine lifecycle and job topology: init, shutdown, abort, rank/size queries, build and GPU flags."""
import atexit
import importlib.util
import os
import sys
import warnings
from typing import Any, Callable, Optional, Sequence

from . import _C
from .errors import HorovodInternalError, raise_for_status, raised_reason
from .handles import release_orphans
from .naming import restart as restart_auto_names
from .gpu import cuda_available, nccl_available
from .runner.launch import BTL_VAR, LONE_PROCESS_BTL, launched_size, started_by_launcher

_atexit_registered = False
_uncaught: Optional[BaseException] = None  # the exception that ends the program, once sys.excepthook saw it
_engine_runs = 0  # how many times init() has started the engine in this process
_drains: list[Callable[[], None]] = []  # frontends' waits for the collectives they queued (MXNet's)
# Set by init() for the processes a rank starts: "<the rank's pid> <PMIX_NAMESPACE> <topology ...>".
RANK_PROCESS_VAR = "JUPYTER_HVD_RANK_PROCESS"
NO_MXNET_BRIDGE = ("jupyter_hvd was built without its MXNet bridge (mxnet's headers were not found at build time); "
                   "with mxnet installed, rebuild it: pip install --no-build-isolation .")


def mxnet_unavailable_reason() -> str:
    """Why ``jupyter_hvd.mxnet`` cannot be used here, or '' when it can (found without importing MXNet, which
    takes seconds)."""
    if importlib.util.find_spec("mxnet") is None:
        return "mxnet is not installed (pip install mxnet)"
    return "" if hasattr(_C, "mxnet_push") else NO_MXNET_BRIDGE


def _comm_handle(comm: Any) -> int:
    """The C handle of an mpi4py communicator, or of a new one over a list of world ranks, once MPI is known
    to have started this process with its launcher's other processes (``_check_world``)."""
    lone = "mpi4py.MPI" not in sys.modules and not started_by_launcher() and BTL_VAR not in os.environ
    if lone:
        os.environ[BTL_VAR] = LONE_PROCESS_BTL  # see runner.launch
    try:
        from mpi4py import MPI  # initialises MPI with MPI_THREAD_MULTIPLE (mpi4py's default)
        if not MPI.Is_initialized():  # the script set mpi4py.rc.initialize = False, leaving MPI's start to Horovod
            MPI.Init_thread(MPI.THREAD_MULTIPLE)
            atexit.register(MPI.Finalize)  # after shutdown(), which init() registers later
    finally:
        if lone:  # read at MPI's start; the jobs this process launches later (%%hvd from a notebook) need theirs
            del os.environ[BTL_VAR]

    _check_world(MPI.COMM_WORLD.Get_size())
    if comm is None:
        comm = MPI.COMM_WORLD
    elif not isinstance(comm, MPI.Comm):
        ranks = sorted(int(r) for r in comm)
        group = MPI.COMM_WORLD.Get_group().Incl(ranks)
        comm = MPI.COMM_WORLD.Create_group(group)
        if comm == MPI.COMM_NULL:
            raise ValueError(f"rank {MPI.COMM_WORLD.Get_rank()} is not in the ranks given to init(): {ranks}")
    return MPI._handleof(comm)


def _check_world(world: int) -> None:
    """Refuse to start when the launcher started several processes but MPI started this one alone (srun
    without PMIx, another MPI's mpiexec): each would go on as a one-rank job, training alone."""
    name, launched = launched_size()
    if world == 1 and launched > 1:
        raise RuntimeError(
            f"hvd.init(): this process is one of {launched} that its launcher started ({name}={launched}), but "
            f"MPI started it alone: each would train as a job of its own. srun needs --mpi=pmix with a Slurm "
            f"built with PMIx for Open MPI to see its peers; hvdrun -np {launched} works in any allocation, "
            f"and another MPI's mpiexec cannot start Open MPI processes.")


def init(comm: Any = None, process_sets: Optional[Sequence[Any]] = None) -> None:
    """Start the engine on MPI_COMM_WORLD, an mpi4py communicator, or a list of world ranks, and register
    ``process_sets`` (ProcessSets or rank lists), also when the engine runs already (``%%hvd`` starts it
    before the cell). Sets can always be added later, so Horovod's ``process_sets="dynamic"`` is accepted
    and changes nothing."""
    global _atexit_registered, _engine_runs
    from . import process_sets as ps

    if isinstance(process_sets, str):
        if process_sets != "dynamic":
            raise ValueError(f"init: process_sets must be a list of process sets or 'dynamic', not {process_sets!r}")
        process_sets = None
    if comm is not None and not ps.is_communicator(comm) and any(
            isinstance(s, ps.ProcessSet) and s.mpi_comm is not None for s in process_sets or ()):
        raise ValueError("init(): process sets made from MPI communicators need comm to be a communicator (or "
                         "None), not a list of ranks, as in Horovod")
    if _C.is_initialized():
        if comm is not None:
            warnings.warn("hvd.init(comm=...) left the running engine as it is (a %%hvd cell's ranks start it on "
                          "every rank before the cell); call hvd.shutdown() first to start it on other ranks",
                          RuntimeWarning, stacklevel=2)
        ps.register_at_init(process_sets or ())
        return
    if (topology := _started_by_rank()) is not None:
        _C.become_helper(*topology)
        ps.on_init()
        return
    _C.init(_comm_handle(comm))
    _engine_runs += 1
    os.environ[RANK_PROCESS_VAR] = " ".join(map(str, (os.getpid(), _job(), *_C.topology())))
    restart_auto_names()  # every rank starts the engine at once: their automatic names agree again
    ps.on_init()
    if not _atexit_registered:
        atexit.register(_shutdown_at_exit)
        sys.excepthook = _noting_uncaught(sys.excepthook)
        _atexit_registered = True
    ps.register_at_init(process_sets or ())


def _job() -> str:
    """The launcher's name for this job ('-' outside one): a job started from within a rank has its own."""
    return os.environ.get("PMIX_NAMESPACE", "") or "-"


def _started_by_rank() -> Optional[tuple[int, ...]]:
    """The topology of the rank of this job that started this process (a DataLoader worker spawned with
    'spawn' or 'forkserver', which imports the script again; a subprocess), or None in a rank itself. Such a
    process calling init() must not start an engine of its own: it would join the job as a second copy of
    its rank, and the launcher would stop the job when it exits."""
    pid, job, *topology = (os.environ.get(RANK_PROCESS_VAR) or "0 -").split()
    if int(pid) in (0, os.getpid()) or job != _job() or job == "-":
        return None
    return tuple(map(int, topology))


def drain_before_shutdown(wait: Callable[[], None]) -> None:
    """Have shutdown() call ``wait`` first, which returns once what a frontend has queued for the engine outside
    it has run (or it stopped waiting): every frontend's hvd.shutdown(), and the one at exit."""
    if wait not in _drains:
        _drains.append(wait)


def shutdown() -> None:
    """Stop the engine (job-wide, as in Horovod) once the frontends' queued collectives have run (see
    drain_before_shutdown); init() may be called again afterwards."""
    from . import process_sets as ps

    if _C.is_initialized():
        for wait in _drains:
            wait()
        _C.shutdown()
        ps.on_shutdown()
        release_orphans(all_done=True)


def _noting_uncaught(hook: Callable[..., Any]) -> Callable[..., Any]:
    """``hook`` (sys.excepthook, which Python calls with the exception that ends the program, before atexit), first
    noting the exception for _shutdown_at_exit."""
    def note(kind: type, value: BaseException, tb: Any) -> None:
        global _uncaught
        _uncaught = value
        hook(kind, value, tb)
    return note


def _shutdown_at_exit() -> None:
    """shutdown() at the program's end; after an exception nobody caught, an abort that names it first, so the
    other ranks' error says why (a plain shutdown reads to them as ranks that ran different numbers of
    collectives). A collective's own error is every rank's already."""
    if _uncaught is not None and _C.is_initialized() and not isinstance(_uncaught, HorovodInternalError):
        abort(raised_reason(rank(), _uncaught))
    shutdown()


def engine_run() -> int:
    """Which start of the engine in this process is running (1 after the first init()): state that a
    frontend keeps across calls (a DistributedOptimizer's allreduces in flight) belongs to one run, and an
    earlier run's is stale once the engine has restarted (after a failed %%hvd cell)."""
    return _engine_runs


def is_initialized() -> bool:
    """True between init() and shutdown()."""
    return _C.is_initialized()


def abort(reason: str) -> None:
    """Make every rank's pending and later operations raise EngineAbortedError(reason)."""
    _C.abort(str(reason))


def check_running() -> None:
    """Raise the reason the engine stopped, if it has (e.g. another rank aborted)."""
    raise_for_status(_C.stop_status())


def rank() -> int:
    """This process's rank in the job."""
    return _C.topology()[0]


def size() -> int:
    """The number of ranks in the job."""
    return _C.topology()[1]


def local_rank() -> int:
    """This process's rank among the ranks on its host."""
    return _C.topology()[2]


def local_size() -> int:
    """The number of ranks on this host."""
    return _C.topology()[3]


def cross_rank() -> int:
    """The index of this host among the hosts (ranks with the same local rank)."""
    return _C.topology()[4]


def cross_size() -> int:
    """The number of hosts (ranks sharing this local rank)."""
    return _C.topology()[5]


def is_homogeneous() -> bool:
    """Whether every host runs as many of the job's ranks (the same answer on every rank)."""
    return bool(_C.topology()[6])


def metrics() -> dict:
    """This rank's engine counters: ops and bytes per op, time per phase, fusion and cache use."""
    return _C.metrics()


def mpi_threads_supported() -> bool:
    """The engine requires and checks MPI_THREAD_MULTIPLE, so this is always True once running."""
    return True


def mpi_built() -> bool:
    return True


def mpi_enabled() -> bool:
    return _C.is_initialized()


def gloo_built() -> bool:
    return False


def gloo_enabled() -> bool:
    return False


def nccl_built() -> bool:
    """True when NCCL and the CUDA runtime load in this process and a CUDA device is visible.

    Horovod answers "compiled with NCCL"; one jupyter_hvd build serves CPU and GPU hosts (NCCL is
    loaded at run time), so this answers whether NCCL collectives can actually run here. The
    first call loads the libraries; gpu_status() says why the answer is False.
    """
    return nccl_available()


def ddl_built() -> bool:
    return False


def ccl_built() -> bool:
    return False


def cuda_built() -> bool:
    """True when the CUDA runtime loads in this process and a CUDA device is visible (see nccl_built)."""
    return cuda_available()


def rocm_built() -> bool:
    return False
