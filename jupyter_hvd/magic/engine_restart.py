"""A rank's engine restart at the start of the cell after a failed one, made by every rank at once.

What the failed engine held goes with it: collectives in flight (their handles raise the failure),
the response cache, the count behind automatic op names (it starts again alike on every rank).
What the user made with it stays: an engine the cells shut down on every rank (hvd.shutdown()) stays
shut down, until a cell calls hvd.init(); process sets are registered again on every rank, in the order
they were first registered, so the ProcessSet objects in the cells' variables keep working. Should
the ranks disagree about the sets (a failure inside add_process_set or remove_process_set on some
ranks only), none is registered again: using one then raises "not registered; call
hvd.add_process_set() first", and rank 0 says so under the cell.
"""
from __future__ import annotations

import sys
from types import ModuleType

REASON = "the engine is restarting after a failed cell"
AGREE_NAME = "jupyter_hvd.restart.process_sets"


def restart_engine(core: ModuleType) -> None:
    """Stop the engine (``shutdown`` first runs what a frontend queued: MXNet's steps) and start it again with
    the user's process sets; ``core`` is ``jupyter_hvd``."""
    from jupyter_hvd import process_sets

    kept = process_sets.registered_sets()
    running = core.is_initialized()
    if running:
        # Collectives still queued (MXNet's included) then fail at once rather than wait for peers that
        # will never submit them, and none of them can run under the new engine with a stale name.
        core.abort(REASON)
    core.shutdown()
    core.init()
    held = core.allgather_object(([s.ranks for s in kept], running), name=AGREE_NAME)
    if not any(was for _, was in held):  # the cells had shut it down on every rank (hvd.shutdown()): it stays so
        core.shutdown()
        return
    held = [ranks for ranks, _ in held]
    if any(ranks != held[0] for ranks in held):
        if core.rank() == 0:
            sets = "; ".join(f"rank {r}: {ranks}" for r, ranks in enumerate(held))
            print(f"[jupyter_hvd] the ranks disagree about the process sets after the failed cell ({sets}), so "
                  "none was registered again; register the ones you need with hvd.add_process_set()",
                  file=sys.stderr)
        return
    for s in kept:
        process_sets.add_process_set(s)
