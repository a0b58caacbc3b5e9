"""Exceptions the engine raises; each carries the tensor, the ranks and the reason."""


class HorovodInternalError(RuntimeError):
    """Base class for failures of a collective operation (the name Horovod users catch)."""


class TensorMismatchError(HorovodInternalError, ValueError):
    """Ranks submitted the same tensor name with different shape, dtype, op or root."""


class EngineAbortedError(HorovodInternalError):
    """The job's engine was aborted; ``reason`` and ``origin_rank`` say why and where."""

    def __init__(self, reason: str, origin_rank: int):
        super().__init__(f"engine aborted by rank {origin_rank}: {reason}")
        self.reason = reason
        self.origin_rank = origin_rank


class EngineShutdownError(HorovodInternalError):
    """The engine was shut down (on this rank or another) while the operation was pending."""


# Status codes of the native engine, in the order of hvd::Status::Code.
_OK, _MISMATCH, _INVALID, _ABORTED, _SHUTDOWN, _INTERNAL = range(6)


def raise_for_status(status: tuple[int, str, int]) -> None:
    """Raise the exception that a native (code, message, origin rank) status stands for."""
    code, message, origin = status
    if code == _OK:
        return
    if code == _MISMATCH:
        raise TensorMismatchError(message)
    if code == _INVALID:
        raise ValueError(message)
    if code == _ABORTED:
        raise EngineAbortedError(message, origin)
    if code == _SHUTDOWN:
        raise EngineShutdownError(message)
    raise HorovodInternalError(message)
