"""The rank whose failure ended a job, where Open MPI's launcher names another.

A rank that raises aborts the engine on every rank (its reason travels with the abort), and its peers raise
EngineAbortedError at once; one of them may exit before the failing rank does, and the launcher names the first
rank to exit. A rank's traceback says which rank failed and why.
"""
from __future__ import annotations

import re

from jupyter_hvd.errors import ABORTED_IN_OUTPUT

# Open MPI's launcher on the first rank to exit: "Process name: [prterun-vm-27227@1,0]" (a non-zero exit), or
# "process rank 1 with PID 25322 on node vm exited on signal 11".
_NAMED = (re.compile(r"Process name:\s*\[[^\]]*,(\d+)\]"), re.compile(r"process rank (\d+) with PID"))


def misnamed_failure(output: str) -> str:
    """One line naming the rank whose failure aborted the job and why, where the launcher's report (in output)
    names a rank that only stopped because of it; '' otherwise. The last abort in output counts: a script may
    have caught an earlier one and gone on."""
    aborted = list(ABORTED_IN_OUTPUT.finditer(output))
    named = next((m for pattern in _NAMED if (m := pattern.search(output))), None)
    if not aborted or not named or named.group(1) == aborted[-1].group(1):
        return ""
    origin, reason = aborted[-1].groups()
    return (f"the job failed at rank {origin} ({reason.strip()}); Open MPI's report above names rank "
            f"{named.group(1)}, which stopped because of it")
