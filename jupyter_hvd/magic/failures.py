"""How %%hvd reports a failed cell: ranks that called exit(), and the frames of a rank's traceback that are
ipyparallel's own; the failures themselves are reported as every job's are (rank_failures)."""
from __future__ import annotations

from collections.abc import Mapping

from ..rank_failures import CONSEQUENCES, RankError, describe_failure, remote_name, split_frames
from .rank_shell import ExitCalled

__all__ = ["RankError", "describe_failure", "exit_report", "without_runner_frames"]


def exit_report(errors: Mapping[int, BaseException], order: list[int]) -> RankError | None:
    """For a cell in which ranks called ``exit()`` (they raised ExitCalled at its end), the report of the
    stopped job, after the failures of other ranks if any failed on their own; None if no rank called it."""
    exited = [r for r in order if remote_name(errors[r]) == ExitCalled.__name__]
    if not exited:
        return None
    who = f"rank {exited[0]}" if len(exited) == 1 else "ranks " + ", ".join(map(str, sorted(exited)))
    lines = [f"{who} called exit() or quit(), which end the ranks as they end a notebook's kernel: "
             "the job was stopped; the next %%hvd cell starts new ranks."]
    rest = {r: e for r, e in errors.items() if r not in exited and remote_name(e) not in CONSEQUENCES}
    if rest:
        lines[:0] = str(describe_failure(rest, [r for r in order if r in rest])).splitlines()
    return RankError("\n".join(lines), ranks=tuple(exited) + tuple(r for r in order if r in rest))


def without_runner_frames(traceback: str) -> str:
    """A rank's traceback of a call that ipyparallel ran (such as the start-up of a rank), from its first
    frame outside ipyparallel's own code; the header stays."""
    lines = traceback.splitlines()
    plain, frames = split_frames(lines)
    first = next((i for i in frames if "/ipyparallel/" not in plain[i] and not plain[i].startswith("File <string>")),
                 None)
    return traceback if first is None else "\n".join(lines[:frames[0]] + lines[first:])
