"""%hvd push and %hvd pull: variables between the notebook and the ranks, by value.

Each variable is serialised on its own with cloudpickle, which sends what its side defined (classes and
functions made in the notebook or in a %%hvd cell, and instances of them) as code and data rather than as
a name to import, which the other side could not find; cloudpickle also remembers such a class, so a
class sent in one go and an instance of it sent in another agree on arrival. Large buffers (array data)
travel beside the pickle, not copied into it. A variable that cannot be serialised stops the transfer
before anything is sent, naming it and why; one that cannot be loaded where it arrives (a module only
the sender has) is named with the reason, and none of the variables is set there.
"""
from __future__ import annotations

import pickle
from typing import Any

IN_BAND_BYTES = 1 << 16  # smaller buffers stay inside the pickle: a frame each would cost more


class TransferError(Exception):
    """A variable that cannot be sent or loaded, shown as its message alone."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def pack(values: dict[str, Any], to: str = "the ranks") -> tuple[list[tuple[str, int]], list[Any]]:
    """Serialise each variable; return [(name, number of buffers)] and, flat, each one's pickle and then its
    buffers. Raises TransferError naming every variable that cannot be serialised."""
    import cloudpickle

    layout: list[tuple[str, int]] = []
    blobs: list[Any] = []
    failed = []
    for name, value in values.items():
        buffers: list[memoryview] = []
        try:
            data = cloudpickle.dumps(value, protocol=5, buffer_callback=lambda b: _in_band(b, buffers))
        except Exception as exc:  # noqa: BLE001 - whatever the object's own reduction raises is the reason
            failed.append(f"{name!r} ({type(value).__name__}): {type(exc).__name__}: {exc}")
            continue
        layout.append((name, len(buffers)))
        blobs += [memoryview(data), *buffers]
    if failed:
        raise TransferError(f"cannot send to {to}, so nothing was sent: " + "; ".join(failed))
    return layout, blobs


def unpack(layout: list[tuple[str, int]], blobs: list[Any]) -> dict[str, Any]:
    """The variables pack() serialised; TransferError naming every one that cannot be loaded here."""
    values, failed, at = {}, [], 0
    for name, count in layout:
        data, buffers = blobs[at], [_writable(b) for b in blobs[at + 1:at + 1 + count]]
        at += 1 + count
        try:
            values[name] = pickle.loads(data, buffers=buffers)
        except Exception as exc:  # noqa: BLE001 - reported with the variable's name
            failed.append(f"{name!r}: {type(exc).__name__}: {exc}")
    if failed:
        raise TransferError("could not load " + "; ".join(failed))
    return values


def load(layout: list[tuple[str, int]], *blobs: Any) -> None:
    """Rank side of %hvd push: set the variables in the cells' namespace, all or none."""
    from IPython import get_ipython

    try:
        values = unpack(layout, list(blobs))
    except TransferError as exc:
        raise TransferError(f"{exc} (no variable was set on this rank)") from None
    get_ipython().user_ns.update(values)


def pack_names(names: list[str]) -> tuple[Any, ...]:
    """Rank side of %hvd pull: these variables of the cells' namespace serialised for the notebook, as
    (layout, *blobs): ipyparallel sends the buffers of a result's top-level items without copying them."""
    from IPython import get_ipython

    namespace = get_ipython().user_ns
    missing = [n for n in names if n not in namespace]
    if missing:
        raise NameError(f"name {missing[0]!r} is not defined")
    layout, blobs = pack({n: namespace[n] for n in names}, to="the notebook")
    return (layout, *blobs)


def _in_band(buffer: pickle.PickleBuffer, out: list[memoryview]) -> bool:
    """pickle's buffer_callback: keep small or non-contiguous buffers in the pickle, send the others apart."""
    try:
        view = buffer.raw()
    except BufferError:  # not contiguous
        return True
    if view.nbytes < IN_BAND_BYTES:
        return True
    out.append(view)
    return False


def _writable(buffer: Any) -> Any:
    """Received frames may be read-only; arrays rebuilt on them must be writable, as the sender's were."""
    view = memoryview(buffer)
    return bytearray(view) if view.readonly else view
