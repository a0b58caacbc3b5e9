"""The monitor widget's model: what it sends to the browser, when, and what a saved notebook keeps."""
import json
import time
from types import SimpleNamespace

import pytest
from monitor_feed import batch, event, steady

from jupyter_hvd.magic.monitor_display import MonitorDisplay, widgets_possible
from jupyter_hvd.monitor import Monitor
from jupyter_hvd.monitor.widget import REFRESH_S, VIEW, MonitorWidget, view_built


class RecordingWidget(MonitorWidget):
    """The widget, keeping the custom messages it sends (there is no browser in these tests)."""

    def __init__(self, monitor):
        self.sent = []
        super().__init__(monitor)

    def send(self, content, buffers=None):
        self.sent.append(json.loads(json.dumps(content)))  # must survive JSON, as over a comm


def two_ranks_with_events() -> Monitor:
    monitor = Monitor(2)
    for rank, rate in ((0, 1000.0), (1, 600.0)):
        steady(monitor, rank, rate, seconds=1.0)
        monitor.feed(batch(rank, 10, now_us=1_100_000, samples=int(rate * 1.1), steps=11, last_step_us=1_100_000,
                           events=[event(i, start=1_000_000 + i * 100, rank=rank) for i in range(5)]))
    return monitor


def test_first_refresh_sends_scalars_as_traits_and_events_as_a_message():
    widget = RecordingWidget(two_ranks_with_events())
    assert widget.summary["state"] == "running" and len(widget.summary["ranks"]) == 2
    assert "timeline" not in widget.summary and "health" not in widget.summary
    assert widget.summary["ranks"][0]["samples_per_s"] > widget.summary["ranks"][1]["samples_per_s"] > 0
    [message] = widget.sent
    assert message["type"] == "events"
    assert [len(rank["start_us"]) for rank in message["timeline"]["ranks"]] == [5, 5]
    assert widget.timeline == {}  # the whole timeline only once the cell is over


def test_refresh_is_throttled_and_sends_only_new_rows():
    monitor = two_ranks_with_events()
    widget = RecordingWidget(monitor)
    monitor.feed(batch(0, 11, now_us=1_200_000, samples=1200, steps=12, last_step_us=1_200_000,
                       events=[event(99, start=1_150_000)]))
    widget.refresh()
    assert len(widget.sent) == 1, "a refresh within REFRESH_S of the last sends nothing"
    time.sleep(REFRESH_S)
    widget.refresh()
    assert [len(rank["start_us"]) for rank in widget.sent[-1]["timeline"]["ranks"]] == [1, 0]
    widget.refresh(force=True)
    assert len(widget.sent) == 2, "nothing new: no message"


def test_health_entries_accumulate_in_the_trait():
    monitor = two_ranks_with_events()
    widget = RecordingWidget(monitor)
    monitor.feed(batch(1, 11, now_us=1_300_000, events=[event(7, phase="STALL", start=1_250_000, rank=1,
                                                               name="grad.3 missing ranks [0]")]))
    widget.refresh(force=True)
    assert widget.health == [{"rank": 1, "kind": "stall", "at_us": 1_250_000, "message": "grad.3 missing ranks [0]"}]


def test_a_finished_cell_keeps_its_timeline_and_summary_for_saved_notebooks():
    monitor = two_ranks_with_events()
    widget = RecordingWidget(monitor)
    monitor.finish()
    widget.close_cell()
    assert widget.summary["state"] == "finished" and widget.summary["mean_total_samples_per_s"] > 0
    assert [len(rank["start_us"]) for rank in widget.timeline["ranks"]] == [5, 5]
    data, _ = widget._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/plain"].startswith("[hvd monitor] 2 ranks")


def test_a_failed_cell_names_the_failing_rank():
    monitor = two_ranks_with_events()
    monitor.finish("rank 1 raised ValueError: bad batch", 1)
    widget = RecordingWidget(monitor)
    assert (widget.summary["state"], widget.summary["failed_rank"]) == ("failed", 1)
    assert widget.summary["error"] == "rank 1 raised ValueError: bad batch"
    assert "(failed: rank 1 raised ValueError: bad batch)" in monitor.text_summary().splitlines()[0]


def test_outside_a_kernel_the_summary_is_printed(capsys):
    shell = SimpleNamespace()  # a terminal IPython has no kernel
    assert not widgets_possible(shell)
    assert widgets_possible(SimpleNamespace(kernel=object())) == view_built()
    shown = MonitorDisplay(two_ranks_with_events(), shell)
    shown.monitor.finish()
    shown.close()
    assert capsys.readouterr().out.startswith("[hvd monitor] 2 ranks")


@pytest.mark.skipif(not view_built(), reason="the view is not built (make setup)")
def test_the_view_bundle_is_an_es_module_with_a_render_function():
    text = VIEW.read_text()
    assert "export" in text and "render" in text and "jhvd-timeline" in text
