"""Turning caller tensors into contiguous arrays the engine can read by address."""
from collections.abc import Mapping
from typing import Any, Union

import numpy as np

from .gpu import DeviceArray, device_array


class _WritableImport:
    """The memory of a DLPack import, offered for writing. numpy marks every DLPack import read-only,
    since DLPack before 1.0 cannot say whether the producer allows writes; an in-place op on the
    producer's tensor is the caller asking to write it. Holds the import, and so the memory."""

    def __init__(self, view: np.ndarray):
        self.view = view
        address = view.__array_interface__["data"][0]
        self.__array_interface__ = {**view.__array_interface__, "data": (address, False)}


def as_group(tensors: Any, what: str) -> list:
    """A grouped op's tensors, as a list. TypeError for one tensor (anything with a shape: numpy, torch, MXNet,
    CuPy), whose rows would otherwise be the group, for a mapping (a state_dict), whose keys would be, and for
    what is no sequence (None)."""
    if hasattr(tensors, "shape"):
        raise TypeError(f"{what}: expected a list or tuple of tensors, got one tensor ({type(tensors).__name__})")
    if isinstance(tensors, Mapping):
        raise TypeError(f"{what}: expected a list or tuple of tensors, got a {type(tensors).__name__} (pass "
                        f"list(d.values()))")
    try:
        return list(tensors)
    except TypeError:  # None, a number: "'NoneType' object is not iterable" said nothing of the call
        raise TypeError(f"{what}: expected a list or tuple of tensors, got {type(tensors).__name__}") from None


def as_array(tensor: Any, what: str, in_place: bool = False) -> Union[np.ndarray, DeviceArray]:
    """A zero-copy numpy view of ``tensor`` (numpy or any CPU DLPack tensor), or for a CUDA tensor
    (CuPy, __cuda_array_interface__, CUDA DLPack) a DeviceArray describing it. ``in_place``: the op
    writes into it, so it must be C-contiguous; a host tensor that is only read may have any layout (a
    non-contiguous one is copied)."""
    if isinstance(tensor, np.ndarray):
        arr = tensor
    elif (dev := device_array(tensor, what)) is not None:
        return dev
    elif hasattr(tensor, "__dlpack__"):
        try:
            arr = np.from_dlpack(tensor)
        except (BufferError, RuntimeError, TypeError) as e:
            raise TypeError(f"{what}: cannot read this tensor on the host via DLPack: {e}") from None
        if in_place and not arr.flags.writeable:
            arr = np.asarray(_WritableImport(arr))
    elif np.isscalar(tensor):
        arr = np.asarray(tensor)
    else:
        raise TypeError(f"{what}: expected a numpy array or a DLPack tensor, got {type(tensor).__name__}")
    if in_place and not arr.flags.writeable:
        raise ValueError(f"{what}: a tensor written in place must be C-contiguous and writable; this one is "
                         "read-only")
    if not arr.flags.c_contiguous:
        if in_place:
            raise ValueError(f"{what}: a tensor written in place must be C-contiguous (use np.ascontiguousarray)")
        arr = np.ascontiguousarray(arr)  # only read: a contiguous copy serves
    return arr

