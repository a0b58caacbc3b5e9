"""Do the ranks still hold the same model after a failed %%hvd cell?

A failure can land between one rank's update and another's (a rank stopped inside its step), leaving
the ranks a step apart with no error anywhere. The frontends' trainers ask once, at their first step
after the engine restarted, and give every rank the first rank's parameters and optimizer state where
the answer is no.
"""
import hashlib
import warnings
from typing import Iterable, List

import numpy as np

from .basics import rank
from .objects import allgather_object
from .process_sets import ProcessSet


def ranks_apart(arrays: Iterable[np.ndarray], name: str, process_set: ProcessSet) -> List[int]:
    """The ranks of ``process_set`` whose arrays' bytes differ from its first rank's (compared by a digest
    of each rank's arrays, in the order given: one small allgather)."""
    digest = hashlib.sha256()
    for a in arrays:
        digest.update(np.ascontiguousarray(a).view(np.uint8))
    digests = allgather_object(digest.hexdigest(), name=name, process_set=process_set)
    return [r for r, d in zip(process_set.ranks, digests) if d != digests[0]]


def warn_replaced(root: int) -> None:
    """Tell this rank that its parameters and optimizer state were replaced by ``root``'s."""
    warnings.warn(f"rank {rank()}'s parameters differed from rank {root}'s after the failed cell (a step it cut "
                  f"short had updated some ranks only); rank {root}'s parameters and optimizer state replaced them",
                  RuntimeWarning)
