"""What ranks display, shown under the %%hvd cell: display_data, in-place updates, clear_output, results.

Each output a rank displays is shown under a ``[rank k]`` label, with every MIME type it has. By
default only rank 0's are shown (8 ranks plotting the same curve would otherwise show it 8 times),
and a note under the cell counts what the other ranks displayed; ``--rank R`` shows rank R's and
``--all-displays`` every rank's. Outputs are republished with display ids of the kernel's own, so:

- ``display(x, display_id=...)`` on a rank, then ``handle.update(y)``, updates it in place;
- ``clear_output()`` on a rank empties that rank's outputs only, not the cell's other ranks' output
  or the monitor (with ``wait=True``, when the rank's next output arrives, which takes the first
  emptied place, so a plot redrawn in a loop stays where it is);
- a widget whose model did not reach this kernel (ipyparallel relays the comms of widgets that ranks
  create while a cell runs) shows its text, rather than a broken view.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
EMPTY: dict[str, Any] = {}  # an output emptied by a rank's clear_output: front ends render nothing

Publish = Callable[..., None]  # IPython.display.publish_display_data's signature


@dataclass
class _Slot:
    """One output a rank displayed: its label's and its content's display ids in the notebook."""

    label: str
    content: str
    rank_id: str | None  # the rank's own display id; None: the content id is ours, and the place reusable


@dataclass
class _RankState:
    slots: list[_Slot] = field(default_factory=list)  # shown since the rank's last clear
    free: list[_Slot] = field(default_factory=list)  # emptied by a clear, to be reused in order
    clear_pending: bool = False  # clear_output(wait=True): clear when the next output arrives
    cleared_ids: set[str] = field(default_factory=set)  # the rank's display ids emptied in this cell
    hidden: int = 0  # outputs not shown (another rank's, by default)


class RankDisplays:
    """Republishes ranks' display messages in the notebook, for one cell."""

    def __init__(self, ranks: int, only_rank: int | None, all_displays: bool, publish: Publish,
                 known_widget: Callable[[str], bool]):
        self.only_rank = only_rank
        self.all_displays = all_displays
        self._publish = publish
        self._known_widget = known_widget
        self._ranks = [_RankState() for _ in range(ranks)]
        self._prefix = uuid.uuid4().hex[:8]
        self._count = 0
        self._note: str | None = None  # display id of the note about hidden outputs
        self._updates: dict[str, dict[str, Any]] = {}  # display id -> latest update not yet sent

    def shown(self, rank: int) -> bool:
        """Whether this rank's displays appear under the cell."""
        if self.only_rank is not None:
            return rank == self.only_rank
        return self.all_displays or rank == 0

    def handle(self, rank: int, kind: str, content: dict[str, Any]) -> None:
        """Show one display message from ``rank``. Updates are held until ``flush`` (or the rank's next
        display or clear), so a rank that updates faster than the cell is polled sends only its latest."""
        if not self.shown(rank):
            if kind in ("display_data", "execute_result"):
                self._ranks[rank].hidden += 1
                self._show_note()
            return
        if kind == "update_display_data":
            self._update(rank, content)
            return
        self.flush()
        if kind == "clear_output":
            self._clear(rank, content.get("wait", False))
        else:
            self._display(rank, content)

    def flush(self) -> None:
        """Send the updates held back."""
        updates, self._updates = self._updates, {}
        for display_id, content in updates.items():
            self._publish(self._data(content), content.get("metadata") or {}, transient={"display_id": display_id},
                          update=True)

    def _display(self, rank: int, content: dict[str, Any]) -> None:
        state = self._ranks[rank]
        rank_id = (content.get("transient") or {}).get("display_id")
        if state.clear_pending:
            self._clear(rank, wait=False, keep_first=rank_id is None)
        reused = rank_id is None and bool(state.free)
        if rank_id is not None:
            state.cleared_ids.discard(rank_id)
            slot = _Slot(self._new_id(), self._rank_display_id(rank, rank_id), rank_id)
        else:
            slot = state.free.pop(0) if reused else _Slot(self._new_id(), self._new_id(), None)
        state.slots.append(slot)
        self._publish({"text/plain": f"[rank {rank}]"}, {}, transient={"display_id": slot.label}, update=reused)
        self._publish(self._data(content), content.get("metadata") or {}, transient={"display_id": slot.content},
                      update=reused)

    def _update(self, rank: int, content: dict[str, Any]) -> None:
        rank_id = (content.get("transient") or {}).get("display_id")
        if rank_id is None or rank_id in self._ranks[rank].cleared_ids:
            return
        self._updates[self._rank_display_id(rank, rank_id)] = content

    def _clear(self, rank: int, wait: bool, keep_first: bool = False) -> None:
        """Empty the rank's outputs (``wait``: once its next output arrives). With ``keep_first``, the first
        reusable one is not emptied but left first in line, for the output that is about to replace it."""
        state = self._ranks[rank]
        if wait:
            state.clear_pending = True
            return
        state.clear_pending = False
        kept = next((s for s in state.slots if s.rank_id is None), None) if keep_first else None
        for slot in state.slots:
            if slot is not kept:
                for display_id in (slot.label, slot.content):
                    self._publish(EMPTY, {}, transient={"display_id": display_id}, update=True)
            if slot.rank_id is None:
                state.free.append(slot)
            else:
                state.cleared_ids.add(slot.rank_id)
        if kept is not None:
            state.free.remove(kept)
            state.free.insert(0, kept)
        state.slots = []

    def _show_note(self) -> None:
        hidden = {rank: s.hidden for rank, s in enumerate(self._ranks) if s.hidden}
        count = sum(hidden.values())
        ranks = ", ".join(map(str, hidden))
        text = (f"[hvd] {count} output{'s' if count > 1 else ''} displayed by rank{'s' if len(hidden) > 1 else ''} "
                f"{ranks} not shown: rich outputs come from rank 0 (--rank R shows rank R's, --all-displays "
                "every rank's)")
        update = self._note is not None
        self._note = self._note or self._new_id()
        self._publish({"text/plain": text}, {}, transient={"display_id": self._note}, update=update)

    def _data(self, content: dict[str, Any]) -> dict[str, Any]:
        """The content's MIME bundle, less a widget view whose model this kernel does not know."""
        data = content.get("data") or {}
        view = data.get(WIDGET_VIEW)
        if view is not None and not self._known_widget(view.get("model_id", "")):
            return {k: v for k, v in data.items() if k != WIDGET_VIEW}
        return data

    def _new_id(self) -> str:
        self._count += 1
        return f"hvd-{self._prefix}-{self._count}"

    @staticmethod
    def _rank_display_id(rank: int, rank_id: str) -> str:
        """The notebook's display id for a rank's own: the same in every cell, so a later cell's update
        reaches an output shown by an earlier one."""
        return f"hvd-rank{rank}:{rank_id}"
