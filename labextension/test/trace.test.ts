import { describe, expect, it } from "vitest";
import type { Span } from "../src/monitor/spans";
import { toChromeTrace } from "../src/monitor/trace";

function span(start: number, dur: number, phase: string, name = ""): Span {
  return { phase, name, op: "allreduce", start, dur, bytes: 4096, count: 3 };
}

describe("toChromeTrace", () => {
  const trace = toChromeTrace({
    ranks: [[span(1000, 50, "COLLECTIVE", "grad.w"), span(1100, 0, "STALL", "grad.b")], [span(900, 10, "NEGOTIATE")]],
    shifts: [0, 500],
    rowCount: 5,
    otherData: { events_dropped: 2 },
  });
  const complete = trace.traceEvents.filter((e) => e.ph === "X");

  it("is JSON with µs timestamps from the earliest aligned span, pid per rank, tid per sub-row", () => {
    expect(JSON.parse(JSON.stringify(trace))).toEqual(trace);
    expect(trace.displayTimeUnit).toBe("ms");
    expect(complete).toEqual([
      {
        name: "grad.w",
        cat: "COLLECTIVE",
        ph: "X",
        ts: 0,
        dur: 50,
        pid: 0,
        tid: 2,
        args: { op: "allreduce", bytes: 4096, count: 3 },
      },
      { name: "grad.b", cat: "STALL", ph: "X", ts: 100, dur: 0, pid: 0, tid: 4, args: expect.any(Object) },
      { name: "NEGOTIATE", cat: "NEGOTIATE", ph: "X", ts: 400, dur: 10, pid: 1, tid: 0, args: expect.any(Object) },
    ]);
  });
  it("names processes 'rank N' and threads by sub-row", () => {
    const names = trace.traceEvents.filter((e) => e.name === "process_name").map((e) => [e.pid, e.args.name]);
    expect(names).toEqual([
      [0, "rank 0"],
      [1, "rank 1"],
    ]);
    const threads = trace.traceEvents.filter((e) => e.name === "thread_name" && e.pid === 1);
    expect(threads.map((e) => e.tid)).toEqual([0, 1, 2, 3, 4]);
    expect(threads[2].args.name).toBe("collective");
    expect(trace.traceEvents.every((e) => e.ph === "X" || e.ph === "M")).toBe(true);
  });
  it("records the counts, the origin and the clock shifts", () => {
    expect(trace.otherData).toEqual({ events_dropped: 2, origin_us: 1000, clock_shift_us: [0, 500] });
  });
  it("handles an empty timeline", () => {
    expect(toChromeTrace({ ranks: [], shifts: [], rowCount: 5, otherData: {} }).traceEvents).toEqual([]);
  });
});
