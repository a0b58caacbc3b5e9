import { describe, expect, it } from "vitest";
import { EventStore, spansFromColumns } from "../src/monitor/store";
import type { RankColumns } from "../src/monitor/types";

function columns(rows: [string | number, number, number][]): RankColumns {
  return {
    phase: rows.map((r) => r[0]),
    name: rows.map((_, i) => `t${i}`),
    op: rows.map(() => "allreduce"),
    start_us: rows.map((r) => r[1]),
    dur_us: rows.map((r) => r[2]),
    bytes: rows.map(() => 64),
    count: rows.map(() => 1),
  };
}

describe("spansFromColumns", () => {
  it("reads rows, phases by name or index", () => {
    const spans = spansFromColumns(columns([[1, 10, 5], ["QUEUE", 20, 3]]), ["NEGOTIATE", "COLLECTIVE"]);
    expect(spans).toEqual([
      { phase: "COLLECTIVE", name: "t0", op: "allreduce", start: 10, dur: 5, bytes: 64, count: 1 },
      { phase: "QUEUE", name: "t1", op: "allreduce", start: 20, dur: 3, bytes: 64, count: 1 },
    ]);
  });
});

describe("EventStore", () => {
  it("keeps ranks sorted with bounds, origin and drops", () => {
    const store = new EventStore(3);
    expect(store.empty).toBe(true);
    expect(store.bounds([0, 0])).toBeNull();
    store.ingest({ ranks: [columns([["COLLECTIVE", 100, 50], ["QUEUE", 20, 5]]), columns([["CYCLE", 1000, 10]])] });
    expect(store.empty).toBe(false);
    expect(store.ranks[0].spans.map((s) => s.start)).toEqual([20, 100]);
    expect(store.bounds([0, 0])).toEqual({ start_us: 20, end_us: 1010 });
    expect(store.bounds([0, -950])).toEqual({ start_us: 20, end_us: 150 });
    expect(store.origin([0, -990])).toBe(10);
    store.ingest({ ranks: [columns([["COLLECTIVE", 200, 1], ["COLLECTIVE", 300, 1]])] });
    expect(store.ranks[0].spans.map((s) => s.start)).toEqual([100, 200, 300]);
    expect(store.dropped).toBe(1);
    expect(store.origin([0, 0])).toBe(20);
    expect(store.ranks[0].maxDur).toBe(50);
    expect(store.ranks[0].maxEnd).toBe(301);
  });
  it("takes the phase list and the health phases from the state, and keeps them for later deltas", () => {
    const store = new EventStore();
    store.ingest({ phases: ["NEGOTIATE", "STALL", "NEW_PHASE"], health_phases: ["STALL"], ranks: [] });
    expect(store.phases).toEqual(["NEGOTIATE", "STALL", "NEW_PHASE"]);
    expect([...store.healthPhases]).toEqual(["STALL"]);
    store.ingest({ ranks: [columns([[2, 10, 5], [1, 20, 1]])] });
    expect(store.ranks[0].spans.map((s) => s.phase)).toEqual(["NEW_PHASE", "STALL"]);
    expect([...store.otherPhases]).toEqual(["NEW_PHASE"]);
  });
  it("adds an 'other' row for phases it has no row for", () => {
    const store = new EventStore();
    expect(store.rowCount).toBe(5);
    const revision = store.revision;
    store.ingest({ ranks: [columns([["NCCL_ALLREDUCE", 0, 1]])] });
    expect(store.rowCount).toBe(6);
    expect([...store.otherPhases]).toEqual(["NCCL_ALLREDUCE"]);
    expect(store.revision).toBe(revision + 1);
  });
});
