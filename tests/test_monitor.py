"""The live monitor: batch coarsening, the publisher, the kernel-side merge, and a real 2-rank cell."""
import json

import pytest

from jupyter_hvd.monitor import Monitor, cell_key, monitor_step, stragglers
from jupyter_hvd.monitor.batch import KEY_PREFIX, to_columns
from monitor_feed import batch, event, steady
from jupyter_hvd.monitor.publisher import Publisher
from jupyter_hvd.monitor.samples import counted_since, snapshot, trainer_step

pytestmark = pytest.mark.timeout(180)

HEAD = "%%hvd -np 2 --framework none"
LOOP = """
import numpy as np, time
flag, a = np.zeros({floats}, np.float32), np.random.rand({side}, {side})
steps, began = 0, time.monotonic()
while True:
    a @ a
    hvd.monitor_step(64)
    steps += 1
    flag[0] = time.monotonic() - began > {seconds}
    if hvd.allreduce(flag, name="loop", op=hvd.Max)[0]:
        break
steps / (time.monotonic() - began)
"""


# -- rank side -----------------------------------------------------------------------------------


def test_monitor_step_counts_samples_and_time():
    origin = snapshot()
    assert counted_since(origin) == (0, 0, 0, 0, 0)
    for _ in range(3):
        monitor_step(32)
    counted = counted_since(origin)
    assert (counted.samples, counted.steps, counted.first_samples) == (96, 3, 32)
    assert origin[1][2] <= counted.first_us <= counted.last_us


def test_the_first_step_belongs_to_the_latest_snapshot():
    monitor_step(8)  # before the cell
    origin = snapshot()
    monitor_step(16)
    monitor_step(16)
    assert counted_since(origin)[:2] == (32, 2) and counted_since(origin).first_samples == 16
    later = snapshot()
    monitor_step(4)
    assert counted_since(later).first_samples == 4
    assert counted_since(origin).first_us == 0  # unknown for the older origin: its cell is over


def test_trainer_counts_only_when_the_loop_does_not():
    origin = snapshot()
    trainer_step(8)
    assert counted_since(origin)[:2] == (8, 1)
    for _ in range(3):  # a loop that counts for itself beside a DistributedTrainer
        trainer_step(8)
        monitor_step(8)
    assert counted_since(origin)[:2] == (24, 3)


def test_to_columns_keeps_small_batches_raw():
    columns, merged = to_columns([event(i, start=i * 100) for i in range(5)], 512)
    assert merged == 0
    assert columns["start_us"] == [0, 100, 200, 300, 400]
    assert columns["count"] == [1] * 5


def test_to_columns_merges_per_phase_within_bound_and_keeps_health():
    events = [event(i, "NEGOTIATE" if i % 2 else "COLLECTIVE", start=i * 10, dur=5, nbytes=4) for i in range(2000)]
    events.insert(1000, event(5000, "STALL", start=9995, name="rank 1 missing g"))
    columns, merged = to_columns(events, 100)
    rows = len(columns["phase"])
    assert rows <= 100
    assert merged == 2000 - (rows - 1)
    assert sum(columns["count"]) == 2001
    assert sum(columns["bytes"]) == 2000 * 4 + 4
    assert columns["phase"].count("STALL") == 1 and "rank 1 missing g" in columns["name"]
    assert set(columns["phase"]) == {"NEGOTIATE", "COLLECTIVE", "STALL"}
    assert columns["start_us"] == sorted(columns["start_us"])


class FakeEngine:
    """An engine ring of ``capacity`` events whose drain behaves like the native one."""

    def __init__(self, capacity=100):
        self.capacity = capacity
        self.events = []

    def emit(self, n, phase="COLLECTIVE"):
        base = len(self.events)
        self.events += [event(base + i, phase, start=(base + i) * 10) for i in range(n)]

    def drain(self, since, limit=100000):
        oldest = max(0, len(self.events) - self.capacity)
        start = max(since, oldest)
        return self.events[start:start + limit], start - min(since, start)

    def metrics(self):
        return {"stalls": 0, "errors": 0}


def test_publisher_skips_old_events_bounds_batches_and_counts_losses():
    engine, sent = FakeEngine(capacity=100), []
    engine.emit(50)
    publisher = Publisher(3, sent.append, engine.drain, engine.metrics, max_drain=40, max_events=8, interval=60)
    publisher.start()  # the 50 events from before the cell are skipped
    engine.emit(30)
    publisher.publish()
    engine.emit(150)  # the ring (230 written, 100 kept) overwrites 50 of them before the next read
    publisher.publish()
    monitor_step(16)
    publisher.stop()  # the final batch reads everything left
    batches = [b for message in sent for key, b in message.items() if key.startswith(KEY_PREFIX)]
    assert [b["batch"] for b in batches] == [0, 1, 2]
    assert batches[0]["cpu_s"] == 0 < batches[1]["cpu_s"] <= batches[2]["cpu_s"]  # its own cost, cumulative
    assert all(b["rank"] == 3 and len(b["events"]["phase"]) <= 8 for b in batches)
    seen = sum(sum(b["events"]["count"]) for b in batches)
    assert seen + sum(b["ring_dropped"] for b in batches) == 180
    assert sum(b["ring_dropped"] for b in batches) == 50
    assert batches[1]["behind"] and not batches[2]["behind"] and batches[0]["coarsened"] == 30 - len(batches[0]["events"]["phase"])
    assert batches[-1]["samples"] == 16 and batches[-1]["steps"] == 1


def test_publisher_follows_an_engine_restart():
    engine, sent = FakeEngine(), []
    engine.emit(20)
    publisher = Publisher(0, sent.append, engine.drain, engine.metrics, interval=60).start()
    engine.events = []  # shutdown(); init(): a new ring, its sequence from 0
    engine.emit(5)
    publisher.stop()
    assert sum(sum(b["events"]["count"]) for m in sent for b in m.values()) == 5


# -- kernel side ---------------------------------------------------------------------------------


def test_throughput_over_sliding_window_and_mean():
    monitor = Monitor(2, window_s=2.0)
    steady(monitor, 0, 1000.0)
    steady(monitor, 1, 500.0)
    assert monitor.rates() == pytest.approx([1000.0, 500.0])
    assert monitor.mean_rates() == pytest.approx([1000.0, 500.0])
    state = monitor.state()
    assert state["total_samples_per_s"] == pytest.approx(1500.0)
    json.dumps(state)


def test_a_cell_shorter_than_one_batch_interval_has_a_mean():
    """A whole cell's steps in its only (final) batch: the mean runs from the first step's end to the last's."""
    monitor = Monitor(2)
    for rank in (0, 1):
        monitor.feed(batch(rank, 0, now_us=230_000, started_us=10_000, samples=3520, steps=110,
                           first_step=(12_000, 32), last_step_us=220_000))
    monitor.finish()
    expected = (3520 - 32) * 1e6 / (220_000 - 12_000)
    state = monitor.state()
    assert [r["mean_samples_per_s"] for r in state["ranks"]] == pytest.approx([expected] * 2)
    assert state["mean_total_samples_per_s"] == pytest.approx(2 * expected)
    assert f"total {2 * expected:.1f} samples/s" in monitor.text_summary()


def test_a_single_step_is_measured_from_the_cells_start():
    monitor = Monitor(1)
    monitor.feed(batch(0, 0, now_us=600_000, started_us=100_000, samples=64, steps=1, first_step=(500_000, 64),
                       last_step_us=500_000))
    assert monitor.mean_rates() == pytest.approx([64 / 0.4])


def test_window_rate_drops_to_zero_when_a_rank_stops_stepping():
    monitor = Monitor(1, window_s=1.0)
    steady(monitor, 0, 1000.0, seconds=2.0)
    for i in range(9, 20):  # the same sample count for 2.5 more seconds
        monitor.feed(batch(0, i, now_us=i * 250_000, samples=2000, steps=8, last_step_us=2_000_000,
                           first_step=(250_000, 250)))
    assert monitor.rates() == [0.0]
    assert monitor.mean_rates() == pytest.approx([1000.0])


def test_stragglers_below_80_percent_of_median():
    assert stragglers([100.0, 100.0, 70.0, 95.0]) == [2]
    assert stragglers([100.0, 100.0, 79.0, 95.0]) == []  # 0.8 x median 97.5 = 78
    assert stragglers([100.0]) == []
    assert stragglers([0.0, 0.0]) == []
    assert stragglers([100.0, None, 10.0]) == [2]
    monitor = Monitor(3)
    for rank, rate in enumerate([1000.0, 950.0, 400.0]):
        steady(monitor, rank, rate)
    assert monitor.state()["stragglers"] == [2]
    assert "straggler" in monitor.text_summary().splitlines()[4]


def test_efficiency_against_a_baseline_and_its_source():
    monitor = Monitor(2)
    steady(monitor, 0, 900.0)
    steady(monitor, 1, 900.0)
    assert monitor.state()["efficiency"] is None
    assert "no baseline" in monitor.text_summary()
    monitor.set_baseline(1000.0, "1-rank run of this cell")
    monitor.finish()
    state = monitor.state()
    assert state["efficiency"] == pytest.approx(0.9)
    assert state["baseline"] == {"samples_per_s": 1000.0, "source": "1-rank run of this cell"}
    assert "scaling efficiency 90% of 2 x 1000.0 samples/s (1-rank run of this cell)" in monitor.text_summary()
    with pytest.raises(ValueError):
        monitor.set_baseline(0)


def test_cell_key_ignores_surrounding_whitespace():
    assert cell_key("x = 1\n") == cell_key("\nx = 1") != cell_key("x = 2")


def test_timeline_buffer_is_bounded_and_counts_what_it_drops():
    monitor = Monitor(1, max_events=10, timeline_s=1000)
    monitor.feed(batch(0, 0, events=[event(i, start=i * 10) for i in range(25)], ring_dropped=7))
    rank = monitor.state()["ranks"][0]
    assert len(monitor.state()["timeline"]["ranks"][0]["start_us"]) == 10
    assert (rank["events"], rank["buffer_dropped"], rank["ring_dropped"]) == (25, 15, 7)
    assert "   22" in monitor.text_summary()  # lost: 15 + 7


def test_timeline_expires_old_events_without_counting_them_dropped():
    monitor = Monitor(1, timeline_s=1.0)
    monitor.feed(batch(0, 0, events=[event(0, start=0)]))
    monitor.feed(batch(0, 1, events=[event(1, start=5_000_000)]))
    assert monitor.state()["timeline"]["ranks"][0]["start_us"] == [5_000_000]
    assert monitor.state()["ranks"][0]["buffer_dropped"] == 0


def test_health_lists_stalls_and_aborts_and_lost_batches_are_counted():
    monitor = Monitor(2)
    monitor.feed(batch(0, 0, events=[event(0, "STALL", name="ranks [1] did not submit g")], stalls=1))
    monitor.feed(batch(1, 2, events=[event(0, "ABORT", name="rank 1 raised ValueError")]))
    state = monitor.state()
    assert [(h["rank"], h["kind"]) for h in state["health"]] == [(0, "stall"), (1, "abort")]
    assert state["ranks"][1]["lost_batches"] == 2
    text = monitor.text_summary()
    assert "stalls 1, aborts 1; 2 batches lost" in text
    assert "rank 1 abort: rank 1 raised ValueError" in text


def test_delta_returns_only_what_is_new():
    monitor = Monitor(2)
    monitor.feed(batch(0, 0, events=[event(0, start=0)]))
    version = monitor.version
    monitor.feed(batch(1, 0, events=[event(0, start=5), event(1, "STALL", start=6)]))
    delta = monitor.delta(version)
    assert [len(r["start_us"]) for r in delta["timeline"]["ranks"]] == [0, 2]
    assert len(delta["health"]) == 1
    assert monitor.delta(monitor.version)["health"] == []
    assert [len(r["start_us"]) for r in monitor.state()["timeline"]["ranks"]] == [1, 2]


class FakeResult:
    def __init__(self, batches):
        self.metadata = {"data": {f"{KEY_PREFIX}{b['batch']}": b for b in batches}}


def test_collect_feeds_batches_in_order_and_takes_them_out():
    monitor = Monitor(2)
    results = [FakeResult([batch(0, n, now_us=n, samples=n) for n in (10, 2, 0, 1, 3, 4, 5, 6, 7, 8, 9)]),
               FakeResult([])]
    assert monitor.collect(results) == 11
    assert results[0].metadata["data"] == {}
    assert monitor.state()["ranks"][0]["lost_batches"] == 0
    assert monitor.collect(results) == 0


# -- through the magic ---------------------------------------------------------------------------


def magics(ip):
    return ip.magics_manager.registry["HvdMagics"]


def test_two_ranks_report_throughput_and_events(ip, capsys):
    result = ip.run_cell(HEAD + LOOP.format(seconds=2.0, floats=256, side=1))  # tight: many events to merge
    out = capsys.readouterr().out
    assert result.success, out
    state = magics(ip).last_monitor.state()
    json.dumps(state)
    assert all(r["mean_samples_per_s"] and r["mean_samples_per_s"] > 0 for r in state["ranks"])
    assert all(r["samples"] > 0 and r["events"] > 0 for r in state["ranks"])
    assert all(len(r["phase"]) > 0 for r in state["timeline"]["ranks"])
    assert state["finished"] and state["health"] == []
    assert "[hvd monitor] 2 ranks" in out and "total " in out
    ip.run_line_magic("hvd", "monitor")
    assert "[hvd monitor] 2 ranks" in capsys.readouterr().out


def test_a_short_cell_has_per_rank_and_total_means(ip, capsys):
    """A cell over before the publisher's first interval: its only batch still gives every mean."""
    cell = "import numpy as np\nfor i in range(20):\n    hvd.allreduce(np.ones(4, np.float32), name='s')\n" \
           "    hvd.monitor_step(32)"
    result = ip.run_cell(f"{HEAD}\n{cell}")
    assert result.success, capsys.readouterr().out
    state = magics(ip).last_monitor.state()
    assert [r["samples"] for r in state["ranks"]] == [640, 640]
    assert all(r["mean_samples_per_s"] and r["mean_samples_per_s"] > 0 for r in state["ranks"]), state["ranks"]
    assert state["mean_total_samples_per_s"] == pytest.approx(sum(r["mean_samples_per_s"] for r in state["ranks"]))


def test_cells_without_training_print_no_summary_and_no_monitor_disables_it(ip, capsys):
    ip.run_cell(f"{HEAD}\nx = 1")
    assert "[hvd monitor]" not in capsys.readouterr().out
    before = magics(ip).last_monitor
    ip.run_cell(f"{HEAD} --no-monitor\nhvd.monitor_step(1)")
    assert "[hvd monitor]" not in capsys.readouterr().out
    assert magics(ip).last_monitor is before


def test_a_one_rank_run_becomes_the_cells_baseline(ip):
    hvd_magics, cell = magics(ip), "train()\n"
    single = hvd_magics._new_monitor(cell, 1, None)
    steady(single, 0, 800.0)
    hvd_magics._keep(single)
    assert single.state()["efficiency"] == pytest.approx(1.0)
    assert hvd_magics._new_monitor(cell, 2, None).state()["baseline"] == {
        "samples_per_s": pytest.approx(800.0), "source": "1-rank run of this cell"}
    assert hvd_magics._new_monitor(cell, 2, 500.0).state()["baseline"]["source"] == "--baseline"
    assert hvd_magics._new_monitor("other()", 2, None).state()["baseline"] is None
