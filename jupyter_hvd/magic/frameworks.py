"""Which framework API ``hvd`` is on the ranks: the choices, whether each can run here, and the default."""
from __future__ import annotations

import importlib.util
import re
import sys

from ..basics import mxnet_unavailable_reason
from ..other_framework import api_module

FRAMEWORKS = ("mxnet", "torch", "none")


def unavailable_reason(framework: str) -> str:
    """Why ``framework`` cannot be used on the ranks, or '' when it can (found without importing it)."""
    if framework == "mxnet":
        return mxnet_unavailable_reason()
    if framework == "torch" and importlib.util.find_spec("torch") is None:
        return "torch is not installed (pip install torch)"
    return ""


def default_framework(cell: str = "") -> str:
    """The framework the notebook uses, of mxnet and torch: the one the cell that starts the ranks imports,
    when it imports just one; else the one the kernel has imported, when it imported just one; else the first
    usable of mxnet (the older default) and torch; else the framework-neutral API."""
    usable = [f for f in ("mxnet", "torch") if not unavailable_reason(f)]
    for found in (imported_by(cell), set(sys.modules)):
        chosen = [f for f in usable if f in found]
        if len(chosen) == 1:
            return chosen[0]
    return usable[0] if usable else "none"


_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+import\b|import\s+([^#;\n]+))", re.MULTILINE)


def imported_by(cell: str) -> set[str]:
    """The top-level packages a cell's import statements name (``import numpy as np, torch``, ``from
    torch.nn import Linear``; lines of IPython magics are skipped as any other non-import line)."""
    names = set()
    for source, listed in _IMPORT.findall(cell):
        for module in [source] if source else listed.split(","):
            names.add(module.strip().split(" ")[0].split(".")[0])
    return names


def other_framework_note(framework: str, cell: str) -> str:
    """A note for a cell that imports the other of mxnet and torch (and not the one ``hvd`` is on the ranks):
    its tensors would meet the wrong API. '' otherwise."""
    imported = [f for f in ("mxnet", "torch") if f in imported_by(cell)]
    if framework not in ("mxnet", "torch") or imported != [f for f in ("mxnet", "torch") if f != framework]:
        return ""
    other = imported[0]
    return (f"[hvd] this cell imports {other}, but hvd on the ranks is {api_module(framework)}, chosen when they "
            f"started; for {api_module(other)}, run it with --framework {other} (which starts the ranks again)")
