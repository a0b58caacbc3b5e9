"""Run with HOROVOD_TIMELINE=<file>: the trace is valid JSON while running and covers all ranks."""
import json
import os
import time

import numpy as np
import pytest

import jupyter_hvd as hvd


def trace_events(path: str, complete) -> list:
    """On rank 0, the file's events once ``complete(events)`` holds (every rank forwards its events and the
    writer writes every 100 ms); then every rank goes on together."""
    events = []
    if hvd.rank() == 0:
        deadline = time.monotonic() + 60
        while True:
            try:
                with open(path) as f:
                    events = json.load(f)["traceEvents"]  # valid JSON while running, whenever read
            except FileNotFoundError:
                events = []
            if complete(events):
                break
            assert time.monotonic() < deadline, f"the trace never got complete: {len(events)} events"
            time.sleep(0.05)
    hvd.barrier()
    return events


def test_drain_events_has_every_phase():
    for i in range(5):
        hvd.grouped_allreduce([np.ones(1000, np.float32)] * 3, name=f"tl.{i}")  # too big to carry
    events, dropped = hvd.drain_events()
    phases = {e.phase for e in events}
    assert {"NEGOTIATE", "MEMCPY_IN_FUSION_BUFFER", "COLLECTIVE", "MEMCPY_OUT_FUSION_BUFFER"} <= phases
    assert all(e.rank == hvd.rank() and e.dur_us >= 0 for e in events) and dropped == 0
    later, _ = hvd.drain_events(since=events[-1].seq + 1)
    assert later == []


def test_file_is_valid_json_while_running_and_has_all_ranks():
    path = os.environ["HOROVOD_TIMELINE"]
    for i in range(20):
        hvd.allreduce(np.ones(10, np.float32), name=f"file.{i}")
    every_rank = set(range(hvd.size()))
    events = trace_events(path, lambda es: {e["pid"] for e in es} >= every_rank)
    if hvd.rank() == 0:  # named as in Horovod's timeline, which gives the wall-clock time of its start too
        assert {e["pid"] for e in events} == every_rank
        assert {"NEGOTIATE_ALLREDUCE", "ALLREDUCE"} <= {e["name"] for e in events}
        with open(path) as f:
            start_s = json.load(f)["otherData"]["start_time_since_epoch_in_micros"] / 1e6
        assert time.time() - 600 < start_s < time.time()


def test_start_and_stop_timeline_at_run_time(tmp_path_factory):
    path = os.environ["HOROVOD_TIMELINE"] + ".second.json"
    hvd.start_timeline(path)
    for i in range(5):
        hvd.allreduce(np.ones(4, np.float32), name=f"second.{i}")
    trace_events(path, lambda es: {e["pid"] for e in es if e.get("args", {}).get("tensor") == "second.4"} ==
                 set(range(hvd.size())))
    hvd.stop_timeline()
    if hvd.rank() == 0:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        assert any(e.get("args", {}).get("tensor") == "second.0" for e in events)
        assert not any(e.get("args", {}).get("tensor") == "file.0" for e in events)
        assert not any(e["name"] == "CYCLE_START" for e in events)  # only with mark_cycles


def test_mark_cycles_marks_every_rank_until_the_timeline_stops():
    path = os.environ["HOROVOD_TIMELINE"] + ".cycles.json"
    hvd.start_timeline(path, mark_cycles=True)
    for i in range(5):
        hvd.allreduce(np.ones(4, np.float32), name=f"cycles.{i}")
    trace_events(path, lambda es: all(sum(e["name"] == "CYCLE_START" and e["pid"] == r for e in es) >= 5
                                      for r in range(hvd.size())))
    hvd.stop_timeline()
    after = hvd.drain_events()[0][-1].seq + 1
    hvd.allreduce(np.ones(4, np.float32), name="cycles.after")
    assert not any(e.phase == "CYCLE" for e in hvd.drain_events(since=after)[0])
    if hvd.rank() == 0:
        with open(path) as f:
            marks = [e for e in json.load(f)["traceEvents"] if e["name"] == "CYCLE_START"]
        assert {e["pid"] for e in marks} == set(range(hvd.size()))
        assert all(e["ph"] == "i" for e in marks)
        assert all(sum(e["pid"] == r for e in marks) >= 5 for r in range(hvd.size()))  # one per allreduce at least


def test_a_timeline_path_that_is_a_symbolic_link_is_refused():
    """The file would be emptied through the link: a link planted in a shared folder could point anywhere."""
    target = os.environ["HOROVOD_TIMELINE"] + ".victim"
    link = os.environ["HOROVOD_TIMELINE"] + ".link.json"
    if hvd.rank() == 0:
        with open(target, "w") as f:
            f.write("keep me")
        os.symlink(target, link)
        with pytest.raises(ValueError, match="symbolic link"):
            hvd.start_timeline(link)
        with open(target) as f:
            assert f.read() == "keep me"
    else:
        hvd.start_timeline(link)  # forwards events to rank 0, which writes nothing
    hvd.barrier()
    hvd.stop_timeline()
