"""``import jupyter_hvd.torch as hvd``: a drop-in for ``horovod.torch`` (Horovod 0.28) on PyTorch.

Collectives take CPU tensors (read and written in their own memory) and CUDA tensors (NCCL, ordered on
torch's current stream); see ``mpi_ops`` for the ops and their gradients, ``optimizer`` for training.
"""
from ..basics import abort, check_running, metrics
from ..errors import (EngineAbortedError, EngineShutdownError, HorovodInternalError, PeerArgumentError,
                      TensorMismatchError)
from ..extensions import check_extension, gpu_available
from ..gpu import GpuUnavailableError, gpu_status
from ..groups import split_list
from .. import monitor
from ..monitor.samples import monitor_step
from ..timeline import drain_events
from . import elastic
from .compression import Compression
from .functions import allgather_object, broadcast_object, broadcast_optimizer_state, broadcast_parameters
# As in Horovod, the basics and process sets come through mpi_ops, which carries them.
from .mpi_ops import (ProcessSet, add_process_set, ccl_built, cross_rank, cross_size, cuda_built, ddl_built,
                      global_process_set, gloo_built, gloo_enabled, init, is_initialized, local_rank, local_size,
                      mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, rank, remove_process_set, rocm_built,
                      shutdown, size, start_timeline, stop_timeline)
from .mpi_ops import (Adasum, Average, Handle, Max, Min, Product, Sum, allgather, allgather_async, allreduce,
                      allreduce_, allreduce_async, allreduce_async_, alltoall, alltoall_async, barrier, broadcast,
                      broadcast_, broadcast_async, broadcast_async_, grouped_allgather, grouped_allgather_async,
                      grouped_allreduce, grouped_allreduce_, grouped_allreduce_async, grouped_allreduce_async_,
                      grouped_reducescatter, grouped_reducescatter_async, join, poll, reducescatter,
                      reducescatter_async, sparse_allreduce_async, synchronize)
from .optimizer import DistributedOptimizer
from .sync_batch_norm import SyncBatchNorm

__all__ = [
    "Adasum", "Average", "Compression", "DistributedOptimizer", "EngineAbortedError", "EngineShutdownError",
    "GpuUnavailableError", "Handle", "HorovodInternalError", "Max", "Min", "PeerArgumentError", "ProcessSet", "Product",
    "Sum",
    "SyncBatchNorm", "TensorMismatchError", "abort", "add_process_set", "allgather", "allgather_async",
    "allgather_object", "allreduce", "allreduce_", "allreduce_async", "allreduce_async_", "alltoall",
    "alltoall_async", "barrier", "broadcast", "broadcast_", "broadcast_async", "broadcast_async_",
    "broadcast_object", "broadcast_optimizer_state", "broadcast_parameters", "ccl_built", "check_extension",
    "check_running", "cross_rank", "cross_size", "cuda_built", "ddl_built", "drain_events", "elastic",
    "global_process_set", "gloo_built", "gloo_enabled", "gpu_available", "gpu_status", "grouped_allgather",
    "grouped_allgather_async", "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
    "grouped_allreduce_async_", "grouped_reducescatter", "grouped_reducescatter_async", "init", "is_initialized",
    "join", "local_rank", "local_size", "metrics", "monitor", "monitor_step", "mpi_built", "mpi_enabled",
    "mpi_threads_supported", "nccl_built", "poll", "rank", "reducescatter", "reducescatter_async",
    "remove_process_set", "rocm_built", "shutdown", "size",
    "sparse_allreduce_async", "split_list", "start_timeline", "stop_timeline", "synchronize",
]
