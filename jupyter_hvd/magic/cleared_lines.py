"""The lines of a rank that called ``clear_output()``: shown in outputs of that rank's, which its next clear empties.

In a kernel ``clear_output()`` empties the cell, so ``clear_output(wait=True); print(f'epoch {i}: {loss}')``
in a loop shows one line, redrawn. Under ``%%hvd`` a rank's clear empties what that rank showed and nothing
else: its displays (RankDisplays), and the lines it printed since its first clear, which go to an output
of their own per rank (updated in place at most ``interval`` apart) rather than to the cell's stream. With
``wait=True`` the output is emptied once the rank's next line arrives, so text redrawn in a loop stays
where it is. Lines printed before a rank's first clear are ordinary stream output and stay. An output
holds up to MAX_CHARS; past that the rank's next lines start another (a clear empties them all), so a
rank that clears once and then prints for hours never redraws more than that.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .rank_displays import EMPTY

MAX_CHARS = 1 << 16  # one output's text; the rank's later lines go to a new one


@dataclass
class _Lines:
    """A rank's lines since its last clear: the output showing them, and the full ones before it."""

    display_id: str
    text: list[str] = field(default_factory=list)
    size: int = 0
    drawn: str | None = None  # what the output shows; None: not published yet
    drawn_at: float = 0.0
    clear_pending: bool = False
    full: list[str] = field(default_factory=list)  # display ids of the rank's earlier outputs since its clear


class ClearedLines:
    """Per-rank line outputs of the ranks that cleared, for one cell."""

    def __init__(self, new_id: Callable[[], str], publish: Callable[..., None], interval: float):
        self._new_id, self._publish, self._interval = new_id, publish, interval
        self._ranks: dict[int, _Lines] = {}

    def takes(self, rank: int) -> bool:
        """Whether the rank's lines come here (it cleared in this cell)."""
        return rank in self._ranks

    def clear(self, rank: int, wait: bool) -> None:
        lines = self._ranks.setdefault(rank, _Lines(self._new_id()))
        if wait:
            lines.clear_pending = True
        else:
            self._empty(lines)

    def add(self, rank: int, line: str) -> bool:
        """Take a complete line of the rank's; True when it starts an output, which must be drawn now (its
        place in the cell is where it first appears)."""
        lines = self._ranks[rank]
        if lines.clear_pending:
            self._empty(lines)
        if lines.size + len(line) > MAX_CHARS and lines.text:
            self._draw(lines, final=True)
            lines.full.append(lines.display_id)
            lines.display_id, lines.text, lines.size, lines.drawn = self._new_id(), [], 0, None
        lines.text.append(line)
        lines.size += len(line)
        return lines.drawn is None and len(lines.text) == 1

    def draw(self, final: bool) -> None:
        """Show what changed, at most ``interval`` apart per output unless ``final``."""
        for lines in self._ranks.values():
            self._draw(lines, final)

    def _draw(self, lines: _Lines, final: bool) -> None:
        shown = "".join(lines.text)
        if shown == lines.drawn or (lines.drawn is None and not shown):
            return
        now = time.monotonic()
        if lines.drawn is not None and not final and now - lines.drawn_at < self._interval:
            return
        data: dict[str, Any] = {"text/plain": shown.removesuffix("\n")} if shown else EMPTY
        self._publish(data, {}, transient={"display_id": lines.display_id}, update=lines.drawn is not None)
        lines.drawn, lines.drawn_at = shown, now

    def _empty(self, lines: _Lines) -> None:
        """Forget the rank's lines: its full outputs are emptied now, the current one when next drawn."""
        lines.clear_pending = False
        for display_id in lines.full:
            self._publish(EMPTY, {}, transient={"display_id": display_id}, update=True)
        lines.full, lines.text, lines.size = [], [], 0
