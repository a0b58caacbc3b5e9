"""How a job reports ranks that raised: the first cause (its own traceback) in full, then what became of the
other ranks. %%hvd reports a failed cell so, and jupyter_hvd.run a failed call."""
from __future__ import annotations

import re
from collections.abc import Mapping

# Exceptions a rank raises because of another rank's failure or our interrupt, not as a cause.
CONSEQUENCES = frozenset({"EngineAbortedError", "EngineShutdownError", "PeerArgumentError", "KeyboardInterrupt"})
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class RankError(Exception):
    """A failure of ranks shown as its message alone, without a traceback of the code that reports it."""

    def __init__(self, message: str, ranks: tuple[int, ...] = ()):
        super().__init__(message)
        self.ranks = ranks

    def _render_traceback_(self) -> list[str]:
        return str(self).splitlines()


def describe_failure(errors: Mapping[int, BaseException], order: list[int], note: str = "") -> RankError:
    """Build the report for ranks that raised: the first cause (by order) in full, the others on one line.

    note says what the kernel did (e.g. interrupted the ranks); it leads when no rank failed on its own.
    """
    causes = [r for r in order if remote_name(errors[r]) not in CONSEQUENCES]
    first = causes[0] if causes else min(errors)
    lines = [note] if note and not causes else []
    lines += [f"rank {first} raised {remote_name(errors[first])}: {_value(errors[first])}"]
    lines += _user_frames(_traceback(errors[first]))
    others = [r for r in order if r != first]
    aborted = [r for r in others if remote_name(errors[r]) in CONSEQUENCES]
    also = [r for r in others if r not in aborted]
    if aborted:
        lines.append("aborted ranks: " + _listing(errors, aborted))
    if also:
        lines.append("also failed: " + _listing(errors, also))
    if note and causes:
        lines.append(note)
    return RankError("\n".join(lines), ranks=(first, *others))


def _user_frames(lines: list[str]) -> list[str]:
    """Drop the frames of ipyparallel's own code (the one that runs the cell on the rank) that precede
    the first frame of a %%hvd cell; the header and everything from the cell's frame on stay."""
    plain, frames = split_frames(lines)
    cell = next((i for i in frames if plain[i].startswith("File <hvd cell")), None)
    if cell is None:
        return lines
    return lines[:frames[0]] + lines[cell:]


def split_frames(lines: list[str]) -> tuple[list[str], list[int]]:
    """The lines without colour codes, and the indexes of those that start a frame."""
    plain = [_ANSI.sub("", line) for line in lines]
    return plain, [i for i, line in enumerate(plain) if line.startswith("File ")]


def _listing(errors: Mapping[int, BaseException], ranks: list[int]) -> str:
    return ", ".join(f"rank {r} ({remote_name(errors[r])})" for r in ranks)


def remote_name(error: BaseException) -> str:
    """The remote exception's class name (ipyparallel's RemoteError carries it as ename)."""
    return getattr(error, "ename", None) or type(error).__name__


def _value(error: BaseException) -> str:
    """The remote exception's message, without a repeat of its class name (MXNet's messages start with it)."""
    value = getattr(error, "evalue", None) if hasattr(error, "ename") else str(error)
    value = "" if value is None else str(value)
    prefix = f"{remote_name(error)}: "
    return value[len(prefix):] if value.startswith(prefix) else value


def _traceback(error: BaseException) -> list[str]:
    """The rank-side traceback lines, as the rank formatted them."""
    return (getattr(error, "traceback", None) or "").splitlines()
