"""Where a cell's monitor appears: a live widget under the cell in a kernel, a text summary elsewhere."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from IPython.display import DisplayHandle, display

from ..monitor import Monitor


def widgets_possible(shell: Any) -> bool:
    """A kernel (not a terminal IPython) with anywidget installed and the view built."""
    if getattr(shell, "kernel", None) is None:
        return False
    try:
        from ..monitor.widget import view_built
    except ImportError:  # anywidget or ipywidgets missing
        return False
    return view_built()


class MonitorDisplay:
    """Feeds a cell's monitor and shows it: the widget appears once a rank trains or the engine reports
    trouble (cells that do neither get no widget), and its plain-text fallback becomes the final summary.

    Its place is the top of the cell's output, above the ranks' lines, wherever they are when it appears:
    an empty output is put there as the cell starts (front ends show nothing for it) and becomes the
    widget. The same holds in JupyterLab, Notebook 7 and a saved notebook.
    """

    def __init__(self, monitor: Monitor, shell: Any):
        self.monitor = monitor
        self.widgets = widgets_possible(shell)
        self.widget: Any = None
        self.handle: Any = None
        if self.widgets:
            self.handle = DisplayHandle()
            self.handle.display({}, raw=True)

    def collect(self, results: Sequence[Any]) -> None:
        """Take the ranks' new batches and refresh the widget."""
        self.monitor.collect(results)
        if not self.widgets or not self.monitor.trained():
            return
        if self.widget is None:
            self._show()
        else:
            self.widget.refresh()

    def show_now(self) -> None:
        """Show the widget at once, trained or not: a cell that runs in the background refreshes it later from
        another thread, where a new output would land under whatever cell runs then."""
        if self.widgets and self.widget is None:
            self._show()

    def close(self) -> None:
        """The cell is over (the monitor is finished): final numbers in the widget, or the text summary."""
        if not self.monitor.trained():
            return
        if not self.widgets:
            if self.monitor.run_state != "failed":  # the failure report says enough; %hvd monitor has the rest
                print(self.monitor.text_summary())
            return
        if self.widget is None:
            self.widget = self._new_widget()  # a widget made for a finished monitor closes its cell itself
        else:
            self.widget.close_cell()
        self.handle.update(self.widget)  # the plain-text fallback now holds the final summary

    def _show(self) -> None:
        self.widget = self._new_widget()
        self.handle.update(self.widget)

    def _new_widget(self) -> Any:
        from ..monitor.widget import MonitorWidget

        return MonitorWidget(self.monitor)


def show_monitor(monitor: Monitor, shell: Any) -> None:
    """%hvd monitor: the last cell's monitor again, as a widget where possible."""
    if widgets_possible(shell):
        from ..monitor.widget import MonitorWidget

        display(MonitorWidget(monitor))
    else:
        print(monitor.text_summary())
