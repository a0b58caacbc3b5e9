"""``import jupyter_hvd.mxnet as hvd``: a drop-in for ``horovod.mxnet`` (Horovod 0.28) on MXNet 1.9.

allreduce and broadcast run asynchronously inside MXNet's dependency engine; see ``mpi_ops`` for which
ops are synchronous.
"""
from ..basics import abort, check_running, metrics
from .. import monitor
from ..errors import (EngineAbortedError, EngineShutdownError, HorovodInternalError, PeerArgumentError,
                      TensorMismatchError)
from ..extensions import check_extension
from ..groups import split_list
from ..monitor.samples import monitor_step
from ..timeline import drain_events
from .compression import Compression
from .functions import allgather_object, barrier, broadcast_object, broadcast_parameters
# As in Horovod, the basics and process sets come through mpi_ops, which carries them.
from .mpi_ops import (ProcessSet, add_process_set, ccl_built, cross_rank, cross_size, cuda_built, ddl_built,
                      global_process_set, gloo_built, gloo_enabled, init, is_initialized, local_rank, local_size,
                      mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, rank, remove_process_set, rocm_built,
                      shutdown, size, start_timeline, stop_timeline)
from .mpi_ops import (Adasum, Average, Max, Min, Product, Sum, allgather, allreduce, allreduce_, alltoall, broadcast,
                      broadcast_, grouped_allgather, grouped_allreduce, grouped_allreduce_, grouped_reducescatter,
                      reducescatter)
from .optimizer import DistributedOptimizer, DistributedTrainer

__all__ = [
    "EngineAbortedError", "EngineShutdownError", "HorovodInternalError", "PeerArgumentError", "TensorMismatchError",
    "abort",
    "check_extension", "check_running", "drain_events", "metrics", "monitor", "monitor_step", "Adasum", "Average",
    "Compression", "DistributedOptimizer", "DistributedTrainer", "Max", "Min", "ProcessSet",
    "Product", "Sum", "add_process_set", "allgather", "allgather_object", "allreduce", "allreduce_", "alltoall",
    "barrier", "broadcast", "broadcast_", "broadcast_object", "broadcast_parameters", "ccl_built", "cross_rank",
    "cross_size", "cuda_built", "ddl_built", "global_process_set", "gloo_built", "gloo_enabled",
    "grouped_allgather", "grouped_allreduce", "grouped_allreduce_", "grouped_reducescatter", "init",
    "is_initialized", "local_rank", "local_size", "mpi_built", "mpi_enabled", "mpi_threads_supported",
    "nccl_built", "rank", "reducescatter", "remove_process_set", "rocm_built", "shutdown", "size",
    "split_list", "start_timeline", "stop_timeline",
]
