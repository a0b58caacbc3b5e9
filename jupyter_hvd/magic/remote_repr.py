"""What the notebook gets of a rank's value that cannot travel to it as it is: made on the rank, unpickled in
the kernel."""
from __future__ import annotations

import pickle
from typing import Any


class RemoteRepr:
    """Stand-in for a rank's value that cannot be sent to the notebook: it shows the value as the rank's
    IPython formats it (its repr, and its HTML, images, ... when it has them)."""

    def __init__(self, text: str, bundle: dict[str, Any] | None = None):
        self.text = text
        self.bundle = bundle or {}

    def __repr__(self) -> str:
        return self.text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {**self.bundle, "text/plain": self.text}


class ByValue:
    """A rank's value that is not plain data, pickled by value (what the cells defined travels as code), with
    the rank's rendering of it: loaded by ``arrived`` in the notebook, not in ipyparallel's client, where a
    value that failed to load (``__main__.Point``, a module only the ranks have) left the cell hanging."""

    def __init__(self, data: bytes, stand_in: RemoteRepr):
        self.data = data
        self.stand_in = stand_in


def arrived(value: Any) -> Any:
    """A rank's value as the notebook gets it: a ByValue loaded, or its stand-in where it cannot be loaded."""
    if not isinstance(value, ByValue):
        return value
    try:
        return pickle.loads(value.data)
    except Exception:  # noqa: BLE001 - e.g. a module only the ranks have: the rank's rendering of it instead
        return value.stand_in
