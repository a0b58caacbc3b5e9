"""Exceptions the engine raises; each carries the tensor, the ranks and the reason."""
import re

from ._C import StatusCode

# EngineAbortedError's message, and how to find it in a rank's output (under any framework's exception class).
ABORTED_MESSAGE = "engine aborted by rank {origin_rank}: {reason}"
ABORTED_IN_OUTPUT = re.compile(re.escape(ABORTED_MESSAGE).replace(r"\{origin_rank\}", r"(\d+)")
                               .replace(r"\{reason\}", "(.*)"))


class HorovodInternalError(RuntimeError):
    """Base class for failures of a collective operation (the name Horovod users catch)."""


class TensorMismatchError(HorovodInternalError, ValueError):
    """Ranks submitted the same tensor name with different shape, dtype, op or root."""


class PeerArgumentError(TensorMismatchError):
    """Another rank's call of this operation failed its own argument checks, so the operation could not run on
    any rank; the message names that rank and its error, which that rank raised at its call."""


class EngineAbortedError(HorovodInternalError):
    """The job's engine was aborted; ``reason`` and ``origin_rank`` say why and where."""

    def __init__(self, reason: str, origin_rank: int):
        super().__init__(ABORTED_MESSAGE.format(origin_rank=origin_rank, reason=reason))
        self.reason = reason
        self.origin_rank = origin_rank


class EngineShutdownError(HorovodInternalError):
    """The engine was shut down (on this rank or another) while the operation was pending."""


def raised_reason(rank: int, exc: BaseException) -> str:
    """The reason an abort gives when ``rank`` failed with ``exc``: "rank 1 raised ValueError: bad shape"."""
    return f"rank {rank} raised {type(exc).__name__}: {exc}"


# The exception of each failing status code (the engine's hvd::Status::Code); Aborted carries its origin.
_RAISES = {int(StatusCode.Mismatch): TensorMismatchError, int(StatusCode.Invalid): ValueError,
           int(StatusCode.Shutdown): EngineShutdownError, int(StatusCode.Refused): PeerArgumentError}
_OK, _ABORTED = int(StatusCode.Ok), int(StatusCode.Aborted)


def error_class(code: int) -> type:
    """The exception class of a failing status code (EngineAbortedError's takes the origin rank too)."""
    return EngineAbortedError if code == _ABORTED else _RAISES.get(code, HorovodInternalError)


def raise_for_status(status: tuple[int, str, int]) -> None:
    """Raise the exception that a native (code, message, origin rank) status stands for."""
    code, message, origin = status
    if code == _OK:
        return
    if code == _ABORTED:
        raise EngineAbortedError(message, origin)
    raise error_class(code)(message)
