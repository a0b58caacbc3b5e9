"""Rank side: processes a cell starts with 'spawn' or 'forkserver' (DataLoader workers, as Horovod's PyTorch
examples make them, ``multiprocessing`` pools) get the classes and functions the cells defined by value.

multiprocessing pickles such a class by its name in ``__main__``, which a fresh process has not got: the
worker died with "Can't get attribute 'MyDataset' on <module '__main__'>" (in a notebook's kernel too).
cloudpickle sends them as code, as ``%hvd push`` does; everything else pickles as before.
"""
from __future__ import annotations

import io
import types
from typing import Any

_DEFINITIONS = (type, types.FunctionType)


def send_cell_definitions_by_value() -> None:
    """Make multiprocessing's pickler pickle classes and functions as cloudpickle does: by name where they can
    be imported, else (those the cells defined, in ``__main__``) by value."""
    import cloudpickle
    from multiprocessing.reduction import ForkingPickler

    by_value = cloudpickle.Pickler(io.BytesIO())  # its reducer_override gives a definition's reduction
    # and its table reduces what a definition holds that pickle cannot: code, closure cells, modules it uses
    table = {t: reduce for t, reduce in by_value.dispatch_table.items() if t not in ForkingPickler._extra_reducers}

    def reducer_override(self: Any, obj: Any) -> Any:
        if isinstance(obj, _DEFINITIONS):  # by name where importable, as before; else (a cell's) by value
            return by_value.reducer_override(obj)
        reduce = table.get(type(obj))
        return reduce(obj) if reduce is not None else NotImplemented

    ForkingPickler.reducer_override = reducer_override
