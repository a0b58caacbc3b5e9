"""Batches as a rank's publisher sends them, for feeding a kernel-side Monitor in tests."""
from jupyter_hvd.monitor.batch import to_columns
from jupyter_hvd.timeline import Event


def event(seq, phase="COLLECTIVE", start=0, dur=10, rank=0, name="g", nbytes=4):
    return Event(seq, rank, phase, name, "allreduce", start, dur, nbytes)


def batch(rank=0, n=0, now_us=0, samples=0, steps=0, last_step_us=0, events=(), ring_dropped=0, coarsened=0,
          stalls=0, first_step=(0, 0), started_us=0):
    """One batch; ``first_step`` is (µs, samples) at the end of the cell's first step."""
    columns, merged = to_columns(list(events), 512)
    return {"rank": rank, "batch": n, "now_us": now_us, "started_us": started_us, "samples": samples,
            "steps": steps, "first_step_us": first_step[0], "first_step_samples": first_step[1],
            "last_step_us": last_step_us, "events": columns, "ring_dropped": ring_dropped,
            "coarsened": coarsened + merged, "behind": False, "stalls": stalls, "errors": 0, "cpu_s": 0.0}


def steady(monitor, rank, rate, seconds=4.0, start_n=0, period_us=250_000):
    """Feed batches of a rank stepping at ``rate`` samples/s (one step per batch period)."""
    first = (period_us, int(rate * period_us / 1e6))
    for i in range(int(seconds * 1e6 / period_us) + 1):
        t = i * period_us
        samples = int(rate * t / 1e6)
        monitor.feed(batch(rank, start_n + i, now_us=t, samples=samples, steps=i, last_step_us=t,
                           first_step=first if i else (0, 0)))
