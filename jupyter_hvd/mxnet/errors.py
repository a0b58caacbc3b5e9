"""The errors of collectives under jupyter_hvd.mxnet. horovod.mxnet raises MXNetError; ours are MXNetErrors that
are also the core's classes (TensorMismatchError, PeerArgumentError, EngineAbortedError, EngineShutdownError,
HorovodInternalError), so that code catching either catches them, an abort keeps its ``reason`` and
``origin_rank``, and a %%hvd cell's report tells the rank that failed from the ranks that failed because of it.

An asynchronous op's error reaches Python through MXNet's engine as text alone: the bridge
(csrc/mxnet_bridge.cc) writes ``"<class name>: <origin rank>: <message>"``, MXNet raises the class registered
under that first word with the whole text, and the class reads the rest back.
"""
import re
from typing import Dict

from mxnet.base import MXNetError, register_error

from .._C import StatusCode
from .. import errors as core_errors

_TEXT = re.compile(r"^(\w+): (-?\d+): (.*)\Z", re.S | re.M)  # MXNet may put a traceback before it


def _text(name: str, error: core_errors.HorovodInternalError) -> str:
    """The bridge's text for a core error: what the MXNet class of that name reads back."""
    if isinstance(error, core_errors.EngineAbortedError):
        return f"{name}: {error.origin_rank}: {error.reason}"
    return f"{name}: -1: {error}"


def _mxnet_class(base: type) -> type:
    """The MXNetError that is also ``base`` (a core class), registered with MXNet under ``base``'s name."""

    def __init__(self: core_errors.HorovodInternalError, text: str) -> None:
        found = _TEXT.search(text)
        origin, message = (int(found[2]), found[3]) if found and found[1] == base.__name__ else (-1, text)
        base.__init__(self, *((message, origin) if base is core_errors.EngineAbortedError else (message,)))

    def __reduce__(self: core_errors.HorovodInternalError) -> tuple:
        return type(self), (_text(base.__name__, self),)

    doc = f"{base.__doc__}\n\n    An MXNetError too, as horovod.mxnet raises."
    return register_error(type(base.__name__, (base, MXNetError), {
        "__init__": __init__, "__reduce__": __reduce__, "__doc__": doc, "__module__": __name__}))


# The class of each failing status code; Invalid (a bad argument the engine found) stays MXNet's own MXNetError,
# as the synchronous ops raise a bad argument.
CLASSES: Dict[int, type] = {int(c): _mxnet_class(core_errors.error_class(int(c))) for c in StatusCode
                            if c not in (StatusCode.Ok, StatusCode.Invalid)}
globals().update({cls.__name__: cls for cls in CLASSES.values()})  # where pickle finds them (named as the core's)
_BY_CORE = {cls.__bases__[0]: cls for cls in CLASSES.values()}

# What the bridge writes first for each status code (csrc/mxnet_bridge.cc); "" where MXNet's own class stands.
CLASS_NAMES = [CLASSES[int(c)].__name__ if int(c) in CLASSES else "" for c in StatusCode]


def as_mxnet_error(error: Exception) -> MXNetError:
    """``error`` of a synchronous op as horovod.mxnet surfaces it: an MXNetError, of the MXNet class of a core
    error, with the same message (and an abort's reason and origin rank)."""
    cls = _BY_CORE.get(type(error))
    return MXNetError(str(error)) if cls is None else cls(_text(cls.__name__, error))
