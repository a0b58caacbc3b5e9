"""Rank side: reading from the keyboard in a %%hvd cell. Nobody can type into a rank (its stdin is closed), so
``input()`` and ``getpass()`` raise IPython's ``StdinNotImplementedError``, as in a kernel whose frontend takes
no input, saying how to give the ranks a value; ``breakpoint()`` warns that it was skipped, rather than
returning silently, unless ``PYTHONBREAKPOINT`` names a debugger of the user's choice (a remote one can work),
and so does ``pdb.set_trace()``, which would fail the cell from inside pdb's prompt loop."""
from __future__ import annotations

import builtins
import getpass
import os
import pdb
import sys
import warnings
from typing import Any

HOW_TO_GIVE = "read it in a notebook cell and send it to the ranks with %hvd push NAME"


def refuse_keyboard(rank: int) -> None:
    """Install this rank's ``input``, ``getpass.getpass`` and ``sys.breakpointhook``."""

    def no_input(prompt: Any = "", *args: Any, **kwargs: Any) -> str:
        from IPython.core.error import StdinNotImplementedError

        raise StdinNotImplementedError(f"rank {rank} cannot read what you type (its stdin is closed, as every "
                                       f"rank's is); {HOW_TO_GIVE}")

    def skipped(call: str) -> None:
        warnings.warn(f"{call} skipped on rank {rank}: nobody can type into a rank's debugger. Run the code in a "
                      f"notebook cell to debug it there, or set PYTHONBREAKPOINT to a remote debugger and call "
                      f"breakpoint() (%%hvd -x PYTHONBREAKPOINT=...)", RuntimeWarning, stacklevel=3)

    def breakpoint_hook(*args: Any, **kwargs: Any) -> Any:
        if os.environ.get("PYTHONBREAKPOINT"):
            return sys.__breakpointhook__(*args, **kwargs)
        return skipped("breakpoint()")

    def pdb_set_trace(*, header: Any = None) -> None:
        skipped("pdb.set_trace()")

    builtins.input = no_input
    getpass.getpass = no_input
    sys.breakpointhook = breakpoint_hook
    pdb.set_trace = pdb_set_trace
