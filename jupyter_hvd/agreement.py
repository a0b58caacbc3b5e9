"""Do the ranks hold the same model? The frontends' trainers ask at two moments.

At their first step: ranks that each built their own model (no broadcast_parameters from one rank)
would train apart forever, each averaging gradients of a different model; they are warned. And at
their first step after the engine restarted (after a failed %%hvd cell): the failure may have landed
between one rank's update and another's, leaving the ranks a step apart with no error anywhere; there
every rank takes the first rank's parameters and optimizer state.

The question is one small allreduce (Max) of a digest of each rank's parameter bytes and of its
complement, so a rank that has joined (``hvd.join``) stands in with the identity and changes nothing.

The same question, on names, comes before a broadcast of parameters (require_same_names): ranks whose
models differ in their layers would otherwise each wait for ever for the broadcasts of the names the
others lack. And when a distributed optimizer is made (require_same_making): ranks that made it with other
arguments, or over other trainable parameters, would wait for each other's allreduces at its first step.
"""
import hashlib
import os
import sys
import warnings
from typing import Any, Dict, Iterable, Optional, Sequence

import numpy as np

from .errors import PeerArgumentError, TensorMismatchError
from .objects import allgather_object
from .ops import ALLREDUCE, Max, allreduce, refuse
from .process_sets import ProcessSet


def digest(arrays: Iterable[np.ndarray]) -> bytes:
    """A digest of the arrays' bytes, in the order given."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).view(np.uint8))
    return h.digest()


def ranks_agree(mine: bytes, name: str, process_set: ProcessSet) -> bool:
    """Whether every rank of ``process_set`` has this ``digest()``: the largest digest and the largest
    complement (the complement of the smallest) agree only when all are equal."""
    words = np.frombuffer(mine, dtype=np.int64)
    top = allreduce(np.concatenate([words, ~words]), name=name, op=Max, process_set=process_set)
    return np.array_equal(top[:len(words)], ~top[len(words):])


def require_same_names(names: Sequence[Optional[str]], what: str, root_rank: int, process_set: ProcessSet) -> None:
    """TensorMismatchError on every rank of ``process_set`` unless each holds the same ``names`` (None: an unnamed
    tensor, which the ops number in order), in any order, for one call of ``what`` from ``root_rank``. One
    small allreduce where they agree; where not, an allgather of the names, to say which differ from the
    root's (the first member's where ``root_rank`` is none: the broadcasts would refuse it)."""
    listed = sorted((str(n) for n in names if n is not None)) + [None] * sum(n is None for n in names)
    if ranks_agree(digest([np.frombuffer(repr(listed).encode(), np.uint8)]), f"{what}.names", process_set):
        return
    everyone = allgather_object(listed, f"{what}.names.all", process_set)
    members = process_set.ranks or list(range(len(everyone)))
    root_rank = root_rank if root_rank in members else members[0]
    root = everyone[members.index(root_rank)]
    apart = [_difference(r, theirs, root_rank, root) for r, theirs in zip(members, everyone) if theirs != root]
    raise TensorMismatchError(f"{what}: the ranks hold different tensors, so none was broadcast: {'; '.join(apart)}"
                              " (make the same model on every rank first)")


def refuse_names(what: str, process_set: ProcessSet, error: BaseException) -> None:
    """This rank's call of ``what`` failed before require_same_names (``error``, which the caller raises): the
    other members' require_same_names of it fail too, saying why, rather than wait for this rank."""
    refuse(ALLREDUCE, "allreduce", [f"{what}.names"], process_set, error)


def require_same_making(what: str, error: Optional[BaseException], arguments: Optional[dict],
                         trained: Optional[Dict[Any, str]], process_set: ProcessSet, hint: str) -> list:
    """Did every member of ``process_set`` make its ``what`` (a distributed optimizer or trainer) alike? One
    allgather (blocking: every rank makes its ``what``s in the same order) of each rank's ``error`` (where
    making it failed there), ``arguments`` and ``trained``: what its allreduces are named by (parameter names,
    or places in a list), each with the name this rank gives it; None where there is nothing to compare.
    Where a rank failed, the others raise PeerArgumentError naming it (the failed rank returns, to raise its
    own); where the arguments or the trained parameters differ, every rank raises ValueError saying how, and
    ``hint``: what to make alike. Returns the first member's ``trained`` keys, in its order."""
    mine = (None if error is None else f"{type(error).__name__}: {error}", arguments, trained)
    every = allgather_object(mine, name=f"{what}.arguments", process_set=process_set)
    members = process_set.ranks
    failed = [(r, why) for r, (why, _, _) in zip(members, every) if why is not None]
    if error is not None:
        return []
    if failed:
        raise PeerArgumentError(f"{what}: rank {failed[0][0]} could not make it: {failed[0][1]}")
    for key, first in every[0][1].items():
        if any(repr(args[key]) != repr(first) for _, args, _ in every):  # repr: nan alike on every rank
            values = ", ".join(f"{args[key]!r} on rank {r}" for r, (_, args, _) in zip(members, every))
            raise ValueError(f"{what}: the ranks made it with different {key}: {values} (make it alike, and several "
                             f"in the same order, on every rank)")
    order = every[0][2]
    for r, (_, _, theirs) in zip(members, every):
        if order is not None and theirs.keys() != order.keys():
            labels = {**theirs, **order}
            apart = ", ".join(sorted(str(labels[k]) for k in theirs.keys() ^ order.keys())[:5])
            raise ValueError(f"{what}: the ranks train different parameters: ranks {members[0]} and {r} differ in "
                             f"{apart} ({hint})")
    return [] if order is None else list(order)


def _difference(rank: int, theirs: list, root_rank: int, root: list) -> str:
    """How ``rank``'s names differ from ``root_rank``'s, in a few words."""
    extra, missing = [n for n in theirs if n not in root], [n for n in root if n not in theirs]
    if extra or missing:
        return "; ".join(([f"rank {rank} has {_few(extra)}, which rank {root_rank} has not"] if extra else [])
                         + ([f"rank {rank} lacks {_few(missing)}"] if missing else []))
    return f"rank {rank} has {len(theirs)} tensors where rank {root_rank} has {len(root)}"


def _few(names: list) -> str:
    """A few of ``names``, and how many unnamed tensors (None) there are."""
    named = [n for n in names if n is not None]
    words = [repr(n) for n in named[:4]] + ([f"{len(named) - 4} more"] if len(named) > 4 else [])
    unnamed = len(names) - len(named)
    words += [f"{unnamed} unnamed tensor{'s' * (unnamed > 1)}"] if unnamed else []
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]


def _libraries() -> tuple:
    """The folders of jupyter_hvd and of the frameworks loaded, whose frames stand between a trainer's step and
    the line that called it (torch.optim's step wrapper, for one)."""
    here = os.path.dirname(os.path.abspath(__file__))
    loaded = (sys.modules.get(name) for name in ("torch", "mxnet"))
    return (here, *(os.path.dirname(m.__file__) for m in loaded if m is not None and getattr(m, "__file__", None)))


def _warn(message: str) -> None:
    """A RuntimeWarning shown at the first line outside the libraries: the user's call of the step."""
    prefixes = tuple(folder + os.sep for folder in _libraries())
    frame, level = sys._getframe(0), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(prefixes):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, RuntimeWarning, stacklevel=level)


def warn_apart(broadcast_hint: str) -> None:
    """Tell a rank that the ranks hold different parameters at a trainer's first step."""
    _warn("the ranks hold different parameters at the first step of this distributed optimizer (each rank made "
          "its own?), so each averages gradients of another model; broadcast them from one rank "
          f"before training: {broadcast_hint}")


def warn_replaced(rank: int, root: int) -> None:
    """Tell ``rank`` that its parameters and optimizer state were replaced by ``root``'s after a failed cell."""
    _warn(f"rank {rank}'s parameters differed from rank {root}'s after the failed cell (a step it cut "
          f"short had updated some ranks only); rank {root}'s parameters and optimizer state replaced them")
