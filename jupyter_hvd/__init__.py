"""jupyter_hvd: Horovod's API on a native MPI engine, for scripts and notebooks.

``import jupyter_hvd as hvd`` gives the framework-neutral API on numpy (or any CPU DLPack)
arrays and on CUDA tensors (CuPy, __cuda_array_interface__ or CUDA DLPack; NCCL on GPU hosts);
``import jupyter_hvd.mxnet as hvd`` is the drop-in for ``horovod.mxnet``, ``jupyter_hvd.torch`` for
``horovod.torch``; ``jupyter_hvd.run(func, num_proc=N)`` is ``horovod.run``.
"""
from .basics import (abort, ccl_built, check_running, cross_rank, cross_size, cuda_built, ddl_built,
                     gloo_built, gloo_enabled, init, is_initialized, local_rank, local_size,
                     metrics, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, rank, rocm_built,
                     shutdown, size)
from .errors import (EngineAbortedError, EngineShutdownError, HorovodInternalError, PeerArgumentError,
                     TensorMismatchError)
from .gpu import GpuUnavailableError, gpu_status
from .handles import Handle, poll, synchronize
from . import monitor
from .monitor.samples import monitor_step
from .objects import allgather_object, broadcast_object
from .ops import (Adasum, Average, Max, Min, Product, Sum, allgather, allgather_async, allreduce,
                  allreduce_, allreduce_async, allreduce_async_, alltoall, alltoall_async, barrier,
                  broadcast, broadcast_, broadcast_async, broadcast_async_, grouped_allgather,
                  grouped_allgather_async, grouped_allreduce, grouped_allreduce_, grouped_allreduce_async,
                  grouped_allreduce_async_, grouped_reducescatter, grouped_reducescatter_async, join,
                  reducescatter, reducescatter_async)
from .process_sets import ProcessSet, add_process_set, global_process_set, remove_process_set
from .timeline import drain_events, start_timeline, stop_timeline

__version__ = "0.1.0"


def __getattr__(name: str):
    """``run`` is imported when first used: the ranks, which import this package, never need the launcher."""
    if name == "run":
        from .runner.run_function import run

        return run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_ipython_extension(ipython):  # pragma: no cover - exercised by the magic's tests
    """``%load_ext jupyter_hvd`` registers the %%hvd magic."""
    from .magic import load_ipython_extension as load

    load(ipython)
