"""Live per-rank output: each rank's stdout/stderr as lines prefixed ``[rank k]``, and what it displays.

A line is printed once its newline arrives. A line that a rank rewrites with carriage returns (a
``print(..., end='\\r')`` loop, a text progress bar) is shown as it goes, as one output per rank
updated in place at most LIVE_INTERVAL_S apart, the way Jupyter front ends render ``\\r`` in a stream;
where nothing can update in place (a terminal), only its final state is printed.
"""
from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from IPython import get_ipython
from IPython.display import publish_display_data

from .cleared_lines import ClearedLines
from .progress_bars import ProgressBar, parse_meter, widgets_available
from .rank_displays import RankDisplays
from .rank_messages import BetweenCells, RankMessages

STREAMS = ("stdout", "stderr")
LIVE_INTERVAL_S = 0.125  # a live line is redrawn at most 8 times a second (and once more when it ends)


def overwrite(line: str) -> str:
    r"""What a terminal (or a Jupyter front end) shows for text written on one line with carriage returns:
    each ``\r`` goes back to the line's start, and what follows overwrites as many characters."""
    shown = ""
    for part in line.replace("\r\n", "\n").split("\r"):
        shown = part + shown[len(part):]
    return shown


@dataclass
class _Line:
    """The unfinished line of one rank's stream, and the live output showing it, if any."""

    partial: str = ""
    live_id: str | None = None
    drawn: str = ""  # what the live output shows
    drawn_at: float = 0.0
    bar: ProgressBar | None = None  # the widget showing it, when it is a progress meter


class RankOutput:
    """Relays new output of per-rank AsyncResults to the notebook, in each rank's order."""

    def __init__(self, ranks: int, only_rank: int | None = None, all_displays: bool = False):
        self.only_rank = only_rank
        shell = get_ipython()
        self._in_place = getattr(shell, "kernel", None) is not None  # a front end that updates outputs
        self._bars = self._in_place and widgets_available()
        self._lines = {(rank, name): _Line() for rank in range(ranks) for name in STREAMS}
        self._messages: RankMessages | None = None  # listen() sets it
        self._unwritten: list[tuple[str, list[str]]] = []  # finished lines, in order, as runs of one stream
        self._prefix = uuid.uuid4().hex[:8]
        self._pinned: tuple[Any, Any, Any] | None = None  # pin()
        self.displays = RankDisplays(ranks, only_rank, all_displays, self._publish, _widget_known)
        self._cleared = ClearedLines(lambda: f"hvd-{self._prefix}-lines-{uuid.uuid4().hex[:8]}",
                                     self._publish, LIVE_INTERVAL_S)

    def pin(self, stdout: Any, stderr: Any, display_pub: Any) -> None:
        """Write to these from now on, not to what sys.stdout, sys.stderr and the shell's display publisher are
        at each write: a background cell's output, relayed while another cell may capture its own
        (``%%capture``, ``contextlib.redirect_stdout``)."""
        self._pinned = (stdout, stderr, display_pub)

    def listen(self, results: Sequence[Any], between: BetweenCells) -> None:
        """Collect the output of a cell's per-rank AsyncResults (submitted under rank_messages.io_held), after
        what the ranks printed since the last cell (``between``, which keeps what they print after this one)."""
        self._messages = RankMessages(results, between)

    def poll(self, results: Sequence[Any]) -> None:
        """Show what arrived since the last poll: complete lines, live lines, displays."""
        assert self._messages is not None, "listen() first"
        for rank in range(len(results)):
            if self.only_rank not in (None, rank):
                self._messages.take(rank)
                continue
            for kind, content in self._messages.take(rank):
                if kind == "stream":
                    self._stream(rank, content["name"], content["text"])
                else:
                    if kind == "clear_output" and self._in_place:  # the rank's lines from now on, too
                        self._end_lines(rank)
                        self._cleared.clear(rank, content.get("wait", False))
                    if self.displays.shown(rank):
                        self._end_lines(rank)  # text written before the display shows above it
                    self._write_lines()
                    self.displays.handle(rank, kind, content)
        self._write_lines()
        self.displays.flush()
        self._cleared.draw(final=False)
        for (rank, _), line in self._lines.items():
            if line.live_id is not None:
                self._draw(rank, line, overwrite(line.partial), final=False)

    def flush(self) -> None:
        """Show what is left of unterminated lines, once a cell is over."""
        for rank in range(len(self._lines) // len(STREAMS)):
            self._end_lines(rank)
        self._write_lines()
        self.displays.flush()
        self._cleared.draw(final=True)
        if self._messages is not None:
            self._messages.close()

    def _stream(self, rank: int, name: str, text: str) -> None:
        line = self._lines[(rank, name)]
        *complete, line.partial = (line.partial + text).split("\n")
        for whole in complete:
            self._finish(rank, name, line, overwrite(whole))
        if "\r" in line.partial and self._in_place and line.live_id is None:
            line.live_id = f"hvd-{self._prefix}-{rank}-{name}-{uuid.uuid4().hex[:6]}"
            self._draw(rank, line, overwrite(line.partial), final=False)

    def _end_lines(self, rank: int) -> None:
        """Finish the rank's unterminated lines where they are."""
        for name in STREAMS:
            line = self._lines[(rank, name)]
            if line.partial or line.live_id is not None:
                self._finish(rank, name, line, overwrite(line.partial))
                line.partial = ""

    def _finish(self, rank: int, name: str, line: _Line, text: str) -> None:
        """A line is complete: its final text goes where its live output is, or is printed."""
        if line.live_id is not None:
            self._draw(rank, line, text, final=True)
            line.live_id, line.drawn, line.bar = None, "", None
            return
        if self._cleared.takes(rank):
            if self._cleared.add(rank, f"[rank {rank}] {text}\n"):  # a new output: the lines before show above
                self._write_lines()
                self._cleared.draw(final=True)
            return
        if not self._unwritten or self._unwritten[-1][0] != name:
            self._unwritten.append((name, []))
        self._unwritten[-1][1].append(f"[rank {rank}] {text}\n")

    def _write_lines(self) -> None:
        """Print the finished lines: one write and flush per run of one stream (a flush is a message to the
        front end, so one per line made a rank's thousands of lines take a fraction of a millisecond each)."""
        for name, lines in self._unwritten:
            stdout, stderr = self._pinned[:2] if self._pinned else (sys.stdout, sys.stderr)
            stream = stdout if name == "stdout" else stderr
            stream.write("".join(lines))
            stream.flush()
        self._unwritten.clear()

    def _draw(self, rank: int, line: _Line, shown: str, final: bool) -> None:
        """Show the live line's text, at most every LIVE_INTERVAL_S unless it is final: as a progress bar
        when it is a tqdm meter and widgets can show, else as text."""
        text = f"[rank {rank}] {shown}"
        now = time.monotonic()
        if not final and (text == line.drawn or now - line.drawn_at < LIVE_INTERVAL_S):
            return
        if final and text == line.drawn and line.bar is None:
            return
        meter = parse_meter(shown) if self._bars else None
        first = not line.drawn
        line.drawn, line.drawn_at = text, now
        if first and meter is not None:
            line.bar = ProgressBar(rank)
        if line.bar is not None and meter is not None:
            line.bar.show(meter, final)
            if not first and not final:
                return  # the widget's model follows the meter; the output itself changes only at the end
        else:
            line.bar = None  # no longer a meter (a bar that clears its line when it closes): text from now on
        data = line.bar.bundle(text) if line.bar is not None else {"text/plain": text}
        self._write_lines()
        self._publish(data, {}, transient={"display_id": line.live_id}, update=not first)

    def _publish(self, data: dict[str, Any], metadata: dict[str, Any], **kwargs: Any) -> None:
        """IPython's publish_display_data, to the pinned publisher if any."""
        if self._pinned is None:
            publish_display_data(data, metadata, **kwargs)
        else:
            self._pinned[2].publish(data=data, metadata=metadata, **kwargs)


def _widget_known(model_id: str) -> bool:
    """Whether this kernel relays the comm of a rank's widget model (ipyparallel opens one for each widget
    a rank creates while a cell runs), so its view can render here."""
    kernel = getattr(get_ipython(), "kernel", None)
    manager = getattr(kernel, "comm_manager", None)
    return manager is not None and model_id in getattr(manager, "comms", {})
