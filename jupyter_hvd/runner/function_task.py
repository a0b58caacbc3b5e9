"""A rank of a ``jupyter_hvd.run`` job: fetch the function from the caller, call it, send back what it returned
or raised.

    python -m jupyter_hvd.runner.function_task

mpiexec starts this on every rank. ADDRESS_VAR says where the caller's server listens and KEY_VAR the key it
takes (both removed from this process's environment once read, so that what the function starts does not see
them). The function comes pickled by cloudpickle with its arguments, with the caller's ``sys.path``; the outcome goes back as
``("returned", pickled value)`` or ``("raised", (class name, message, traceback, pickled exception or None))``.
A rank whose call raised exits as one that returned: the caller stops the job once it has the report (the
others may wait for it in a collective), so that mpiexec adds no report of its own.
"""
from __future__ import annotations

import os
import sys
import traceback
from multiprocessing.connection import Client
from typing import Any

from .launch import rank_place

ADDRESS_VAR = "JUPYTER_HVD_RUN_ADDRESS"  # HOST:PORT of the caller's server
KEY_VAR = "JUPYTER_HVD_RUN_KEY"  # its key, in hex


def _report(exc: BaseException) -> tuple[str, str, str, bytes | None]:
    """What the caller needs of an exception: its class name, message, traceback (without this module's frame)
    and the exception itself pickled, when it pickles."""
    import cloudpickle

    tb = exc.__traceback__
    lines = traceback.format_exception(type(exc), exc, tb.tb_next if tb and tb.tb_next else tb)
    try:
        pickled: bytes | None = cloudpickle.dumps(exc)
    except Exception:
        pickled = None
    return type(exc).__name__, str(exc), "".join(lines), pickled


def main() -> int:
    host, _, port = os.environ.pop(ADDRESS_VAR).rpartition(":")
    address, key = (host, int(port)), bytes.fromhex(os.environ.pop(KEY_VAR))
    rank = rank_place().rank
    with Client(address, authkey=key) as conn:
        conn.send(("fetch", rank))
        paths, payload = conn.recv()
    sys.path.extend(path for path in paths if path not in sys.path)  # where the caller finds modules
    import cloudpickle

    try:
        func, args, kwargs = cloudpickle.loads(payload)
        value = func(*args, **kwargs)
    except BaseException as exc:  # the caller reports it, with the rank that raised it
        outcome: tuple[str, Any] = ("raised", _report(exc))
    else:
        try:
            outcome = ("returned", cloudpickle.dumps(value))
        except Exception as exc:
            outcome = ("raised", ("TypeError", f"the function returned a {type(value).__name__}, which cannot be "
                                  f"sent back to the caller (it must pickle): {exc}", "", None))
    sys.stdout.flush()
    sys.stderr.flush()
    with Client(address, authkey=key) as conn:
        conn.send(("result", rank, outcome))
    return 0


if __name__ == "__main__":
    sys.exit(main())
