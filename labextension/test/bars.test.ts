import { describe, expect, it } from "vitest";
import { barFraction, niceMax, rateBars } from "../src/monitor/bars";
import type { RankSummary, Summary } from "../src/monitor/types";

function rank(r: number, live: number, mean: number | null, straggler = false): RankSummary {
  return {
    rank: r,
    samples: 0,
    steps: 0,
    samples_per_s: live,
    mean_samples_per_s: mean,
    straggler,
    events: 0,
    coarsened: 0,
    ring_dropped: 0,
    buffer_dropped: 0,
    lost_batches: 0,
    behind: false,
    stalls: 0,
    errors: 0,
    clock_offset_us: null,
  };
}

describe("niceMax", () => {
  it("rounds up to 1, 2, 2.5 or 5 × 10^k", () => {
    expect(niceMax(1234)).toBe(2000);
    expect(niceMax(2000)).toBe(2000);
    expect(niceMax(2001)).toBe(2500);
    expect(niceMax(7600)).toBe(10000);
    expect(niceMax(0.3)).toBe(0.5);
    expect(niceMax(0)).toBe(1);
    expect(niceMax(NaN)).toBe(1);
  });
});

describe("barFraction", () => {
  it("is value over max, clamped", () => {
    expect(barFraction(50, 200)).toBe(0.25);
    expect(barFraction(300, 200)).toBe(1);
    expect(barFraction(-5, 10)).toBe(0);
    expect(barFraction(null, 10)).toBe(0);
  });
});

describe("rateBars", () => {
  const summary: Summary = {
    finished: false,
    state: "running",
    ranks: [rank(0, 1000.04, 900), rank(1, 480, null, true)],
    total_samples_per_s: 1480.04,
    mean_total_samples_per_s: 1300,
    baseline: { samples_per_s: 600, source: "-np 1" },
  };
  it("shows live rates while running, the total against ranks × baseline", () => {
    const bars = rateBars(summary);
    expect(bars.ranks).toEqual([
      { rank: 0, value: 1000, fraction: 1, straggler: false },
      { rank: 1, value: 480, fraction: 0.48, straggler: true },
    ]);
    expect(bars.total).toEqual({ value: 1480, fraction: 0.74, ideal: 1200, idealFraction: 0.6 });
  });
  it("shows means once finished, live rates where a mean is unknown", () => {
    const bars = rateBars({ ...summary, finished: true, state: "finished" });
    expect(bars.ranks.map((b) => [b.value, b.fraction])).toEqual([
      [900, 0.9],
      [480, 0.48],
    ]);
    expect(bars.total.value).toBe(1300);
    expect(bars.total.fraction).toBe(0.65);
  });
  it("copes with an empty summary", () => {
    expect(rateBars({})).toEqual({
      ranks: [],
      total: { value: null, fraction: 0, ideal: null, idealFraction: null },
    });
  });
});
