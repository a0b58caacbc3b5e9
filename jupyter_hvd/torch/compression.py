"""Gradient compression for allreduce: none, or float16 on the wire (Horovod's Compression for torch)."""
from typing import Any, Tuple

import torch


class Compressor:
    """Turns a tensor into the one to allreduce, and the reduced one back."""

    @staticmethod
    def compress(tensor: torch.Tensor) -> Tuple[torch.Tensor, Any]:
        """The tensor to send and the context needed to decompress it."""
        raise NotImplementedError

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        """The reduced tensor in its original form."""
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends tensors unchanged (the default)."""

    @staticmethod
    def compress(tensor: torch.Tensor) -> Tuple[torch.Tensor, Any]:
        """The tensor itself."""
        return tensor, None

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        """The tensor itself."""
        return tensor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16, halving the bytes on the wire."""

    @staticmethod
    def compress(tensor: torch.Tensor) -> Tuple[torch.Tensor, Any]:
        """A float16 copy of a floating-point tensor (others unchanged), and the original dtype."""
        if tensor.dtype.is_floating_point:
            return tensor.type(torch.float16), tensor.dtype
        return tensor, tensor.dtype

    @staticmethod
    def decompress(tensor: torch.Tensor, ctx: Any) -> torch.Tensor:
        """The tensor cast back to its original floating-point dtype."""
        if ctx.is_floating_point:
            return tensor.type(ctx)
        return tensor


class Compression:
    """The available compressors: ``Compression.none`` and ``Compression.fp16``."""

    none = NoneCompressor
    fp16 = FP16Compressor
