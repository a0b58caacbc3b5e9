"""Collectives on picklable Python objects, built on the byte collectives.

cloudpickle (Horovod's choice) is used when installed, so lambdas and local classes travel too.
"""
import pickle
from typing import Any, Optional, Tuple

try:
    import cloudpickle as _pickler
except ImportError:
    _pickler = pickle

import numpy as np

from .basics import rank
from .ops import BROADCAST, allgather, broadcast, check_root, refuse
from .process_sets import ProcessSet, global_process_set, set_id


def _pickled(obj: Any) -> Tuple[bytes, int, Optional[Exception]]:
    """``obj`` pickled, the length to announce, and no error; or, when it cannot be pickled, the error's text, its
    length negated and the error. A rank that fails to pickle still takes part in the collectives, sending the
    text, so that its peers raise too instead of waiting for it."""
    try:
        payload = _pickler.dumps(obj)
        return payload, len(payload), None
    except Exception as exc:  # noqa: BLE001 (any error of any object's __reduce__)
        text = f"{type(exc).__name__}: {exc}".encode()
        return text, -len(text), exc


def broadcast_object(obj: Any, root_rank: int = 0, name: Optional[str] = None,
                     process_set: ProcessSet = global_process_set) -> Any:
    """Return ``root_rank``'s ``obj`` on every rank: on the root, ``obj`` itself (as Horovod), elsewhere a copy.
    When the root cannot pickle it, the root raises that error and the others a PicklingError that names it."""
    name = name or f"broadcast_object.{set_id(process_set)}"
    try:
        root_rank = check_root(root_rank, process_set, "broadcast_object")
    except (TypeError, ValueError) as e:  # told to the others, whose call then fails too
        refuse(BROADCAST, "broadcast", [f"{name}.len"], process_set, e)
        raise
    root = rank() == root_rank
    payload, told, error = _pickled(obj) if root else (b"", 0, None)
    length = int(broadcast(np.array([told], dtype=np.int64), root_rank, f"{name}.len", process_set)[0])
    buf = np.frombuffer(payload, dtype=np.uint8) if root else np.zeros(abs(length), dtype=np.uint8)
    data = broadcast(buf, root_rank, f"{name}.data", process_set)
    if error is not None:
        raise error
    if length < 0:
        raise pickle.PicklingError(f"broadcast_object: root rank {root_rank} could not pickle its object "
                                   f"({data.tobytes().decode(errors='replace')})")
    return obj if root else pickle.loads(data.tobytes())


def allgather_object(obj: Any, name: Optional[str] = None, process_set: ProcessSet = global_process_set) -> list:
    """Return the list of every rank's ``obj``, in rank order. When a rank cannot pickle its object, it raises
    that error and the others a PicklingError that names the rank and the error."""
    name = name or f"allgather_object.{set_id(process_set)}"
    payload, told, error = _pickled(obj)
    sizes = allgather(np.array([told], dtype=np.int64), f"{name}.len", process_set)
    data = allgather(np.frombuffer(payload, dtype=np.uint8), f"{name}.data", process_set)
    bounds = np.concatenate([[0], np.cumsum(np.abs(sizes))])
    pieces = [data[bounds[i]:bounds[i + 1]].tobytes() for i in range(len(sizes))]
    if error is not None:
        raise error
    if (sizes < 0).any():
        failures = "; ".join(f"rank {process_set.ranks[i]}: {pieces[i].decode(errors='replace')}"
                             for i in np.flatnonzero(sizes < 0))
        raise pickle.PicklingError(f"allgather_object: ranks could not pickle their objects ({failures})")
    return [pickle.loads(piece) for piece in pieces]
