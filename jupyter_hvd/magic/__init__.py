"""The %%hvd notebook magic: run a cell on N MPI ranks started as ipyparallel engines.

Kept import-light: ranks import ``jupyter_hvd.magic.rank_setup`` and ``rank_cell`` and must not pull in
the kernel-side machinery (IPython magics, ipyparallel's cluster code).
"""
from typing import Any


def load_ipython_extension(ipython: Any) -> None:
    """Register the %%hvd cell magic and %hvd line magic with an IPython shell."""
    from .magics import HvdMagics

    ipython.register_magics(HvdMagics(ipython))


def unload_ipython_extension(ipython: Any) -> None:
    """Stop the ranks started from this shell when the extension is unloaded."""
    from .magics import HvdMagics

    magics = ipython.magics_manager.registry.get(HvdMagics.__name__)
    if magics is not None:
        magics.stop_ranks()
