"""Which framework API ``hvd`` is on the ranks: the choices, whether each can run here, and the default."""
from __future__ import annotations

import importlib.util
import sys

from ..basics import mxnet_unavailable_reason

FRAMEWORKS = ("mxnet", "torch", "none")


def api_module(framework: str) -> str:
    """The module bound to ``hvd`` in the cells for ``framework``."""
    return {"mxnet": "jupyter_hvd.mxnet", "torch": "jupyter_hvd.torch"}.get(framework, "jupyter_hvd")


def unavailable_reason(framework: str) -> str:
    """Why ``framework`` cannot be used on the ranks, or '' when it can (found without importing it)."""
    if framework == "mxnet":
        return mxnet_unavailable_reason()
    if framework == "torch" and importlib.util.find_spec("torch") is None:
        return "torch is not installed (pip install torch)"
    return ""


def default_framework() -> str:
    """The framework the notebook uses: of mxnet and torch, the one the kernel has imported when it imported just
    one; else the first usable of mxnet (the older default) and torch; else the framework-neutral API."""
    usable = [f for f in ("mxnet", "torch") if not unavailable_reason(f)]
    imported = [f for f in usable if f in sys.modules]
    if len(imported) == 1:
        return imported[0]
    return usable[0] if usable else "none"
