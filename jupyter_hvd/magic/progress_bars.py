"""Text progress bars from ranks (tqdm's, on stderr) mirrored as ipywidgets progress bars in the notebook.

A rank's tqdm writes its meter, ``desc: 40%|####      | 2/5 [00:00<00:01, 3.30it/s]``, again and again
on one line. Where the kernel can show widgets, such a live line becomes a real progress bar whose
value and text follow the meter; a line that is not a meter with a percentage stays text.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

METER = re.compile(r"^(?:(?P<desc>.*?): )?\s*(?P<percent>\d{1,3})%\|[^|]*\|\s?(?P<right>.*)$")


@dataclass(frozen=True)
class Meter:
    """A tqdm meter's parts: its description, percentage and what follows the bar (counts, times, rate)."""

    desc: str
    percent: int
    right: str


def parse_meter(text: str) -> Meter | None:
    """The meter in a line of text, or None when the line is not a tqdm meter with a percentage."""
    match = METER.match(text.strip())
    if match is None or int(match["percent"]) > 100:
        return None
    return Meter(match["desc"] or "", int(match["percent"]), match["right"])


def widgets_available() -> bool:
    """Whether ipywidgets can be imported here (the kernel then relays their comms to the front end)."""
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


class ProgressBar:
    """One rank's progress bar: ``[rank k] desc``, a bar, and tqdm's counts and rate."""

    def __init__(self, rank: int):
        import ipywidgets

        self.rank = rank
        self._label = ipywidgets.HTML()
        self._bar = ipywidgets.FloatProgress(min=0, max=100, layout=ipywidgets.Layout(flex="2"))
        self._right = ipywidgets.HTML()
        self.widget = ipywidgets.HBox([self._label, self._bar, self._right],
                                      layout=ipywidgets.Layout(display="inline-flex", flex_flow="row wrap",
                                                               width="100%"))

    def show(self, meter: Meter, final: bool = False) -> None:
        """Move the bar to ``meter``; a finished bar at 100% turns green, as tqdm's notebook bar does."""
        desc = f" {meter.desc}" if meter.desc else ""
        self._label.value = html.escape(f"[rank {self.rank}]{desc}")
        self._bar.value = meter.percent
        self._right.value = html.escape(meter.right)
        if final and meter.percent == 100:
            self._bar.bar_style = "success"

    def bundle(self, text: str) -> dict[str, Any]:
        """The display bundle: the widget's view, with ``text`` as the plain-text fallback."""
        return {**self.widget._repr_mimebundle_(), "text/plain": text}
