"""%hvd push: notebook variables to every rank, by value.

Each variable is serialised on its own with cloudpickle, which sends what the notebook defined (its
classes and functions, and instances of them) as code and data rather than as a name to import, which
the ranks could not find; cloudpickle also remembers such a class, so a class pushed in one go and an
instance of it pushed in another agree on the ranks. Large buffers (array data) travel beside the
pickle, not copied into it. A variable that cannot be serialised stops the push before anything is
sent, naming it and why; a rank that cannot load one (a module it lacks) reports which and why, and
sets none of the variables.
"""
from __future__ import annotations

import pickle
from typing import Any

IN_BAND_BYTES = 1 << 16  # smaller buffers stay inside the pickle: a frame each would cost more


class PushError(Exception):
    """A variable that cannot be sent to the ranks, shown as its message alone."""

    def _render_traceback_(self) -> list[str]:
        return [str(self)]


def pack(values: dict[str, Any]) -> tuple[list[tuple[str, int]], list[Any]]:
    """Serialise each variable; return [(name, number of buffers)] and, flat, each one's pickle and then its
    buffers. Raises PushError naming every variable that cannot be serialised."""
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
        raise PushError("cannot send to the ranks, so nothing was pushed: " + "; ".join(failed))
    return layout, blobs


def load(layout: list[tuple[str, int]], *blobs: Any) -> None:
    """Rank side: rebuild the variables pack() serialised and set them in the cells' namespace, all or none."""
    from IPython import get_ipython

    values, failed, at = {}, [], 0
    for name, count in layout:
        data, buffers = blobs[at], [_writable(b) for b in blobs[at + 1:at + 1 + count]]
        at += 1 + count
        try:
            values[name] = pickle.loads(data, buffers=buffers)
        except Exception as exc:  # noqa: BLE001 - reported to the notebook with the variable's name
            failed.append(f"{name!r}: {type(exc).__name__}: {exc}")
    if failed:
        raise RuntimeError("could not load " + "; ".join(failed) + " (no variable was set on this rank)")
    get_ipython().user_ns.update(values)


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
    """Received frames may be read-only; arrays rebuilt on them must be writable, as the notebook's were."""
    view = memoryview(buffer)
    return bytearray(view) if view.readonly else view
