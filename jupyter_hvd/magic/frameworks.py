"""Which framework API ``hvd`` is on the ranks: the choices, whether each can run here, and the default."""
from __future__ import annotations

import ast
import importlib.util
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


def imported_by(cell: str) -> set[str]:
    """The top-level packages a cell's import statements name, wherever they stand (``import numpy as np, torch``,
    ``x = 1; from torch.nn import Linear``, an import in an ``if``), read from its code as IPython runs it (so
    neither a magic's line nor a string counts); none for a cell that does not parse."""
    from IPython.core.inputtransformer2 import TransformerManager

    try:
        tree = ast.parse(TransformerManager().transform_cell(cell))
    except (SyntaxError, ValueError):  # the ranks report the error; the kernel's imports decide meanwhile
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
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
