"""Collectives on picklable Python objects, built on the byte collectives.

cloudpickle (Horovod's choice) is used when installed, so lambdas and local classes travel too.
"""
import pickle
from typing import Any, Optional

try:
    import cloudpickle as _pickler
except ImportError:
    _pickler = pickle

import numpy as np

from .basics import rank
from .ops import allgather, broadcast
from .process_sets import ProcessSet, global_process_set


def broadcast_object(obj: Any, root_rank: int = 0, name: Optional[str] = None,
                     process_set: ProcessSet = global_process_set) -> Any:
    """Return ``root_rank``'s ``obj`` on every rank: on the root, ``obj`` itself (as Horovod), elsewhere a copy."""
    name = name or f"broadcast_object.{process_set.process_set_id}"
    root = rank() == root_rank
    payload = _pickler.dumps(obj) if root else b""
    length = broadcast(np.array([len(payload)], dtype=np.int64), root_rank, f"{name}.len", process_set)
    buf = np.frombuffer(payload, dtype=np.uint8) if payload else np.zeros(int(length[0]), dtype=np.uint8)
    data = broadcast(buf, root_rank, f"{name}.data", process_set)
    return obj if root else pickle.loads(data.tobytes())


def allgather_object(obj: Any, name: Optional[str] = None, process_set: ProcessSet = global_process_set) -> list:
    """Return the list of every rank's ``obj``, in rank order."""
    name = name or f"allgather_object.{process_set.process_set_id}"
    payload = np.frombuffer(_pickler.dumps(obj), dtype=np.uint8)
    sizes = allgather(np.array([payload.size], dtype=np.int64), f"{name}.len", process_set)
    data = allgather(payload, f"{name}.data", process_set)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [pickle.loads(data[bounds[i]:bounds[i + 1]].tobytes()) for i in range(len(sizes))]
