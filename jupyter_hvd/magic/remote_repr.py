"""What the notebook shows for a rank's value that cannot travel to it: made on the rank, unpickled in the kernel."""
from __future__ import annotations

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
