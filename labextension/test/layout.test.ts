import { describe, expect, it } from "vitest";
import {
  clampView,
  niceStep,
  niceTicks,
  panBy,
  slidingWindow,
  tickLabel,
  timeToX,
  viewLimits,
  xToTime,
  zoomAt,
} from "../src/monitor/layout";

const limits = { start_us: -20, end_us: 1020 };

describe("time ↔ x", () => {
  const view = { start_us: 1000, end_us: 2000 };
  it("maps linearly over the width", () => {
    expect(timeToX(view, 500, 1500)).toBe(250);
    expect(timeToX(view, 500, 1000)).toBe(0);
    expect(timeToX(view, 500, 2200)).toBe(600);
    expect(xToTime(view, 500, 100)).toBe(1200);
    expect(xToTime(view, 500, timeToX(view, 500, 1734))).toBeCloseTo(1734, 9);
  });
});

describe("sliding window and limits", () => {
  it("ends at the newest event", () => {
    expect(slidingWindow(5e6, 2e6)).toEqual({ start_us: 3e6, end_us: 5e6 });
  });
  it("widens the data by 2% per side, at least half the minimum span", () => {
    expect(viewLimits({ start_us: 0, end_us: 1000 })).toEqual({ start_us: -20, end_us: 1020 });
    expect(viewLimits({ start_us: 500, end_us: 500 })).toEqual({ start_us: 495, end_us: 505 });
  });
  it("clamps span and position into the limits", () => {
    expect(clampView({ start_us: 1000, end_us: 1100 }, limits)).toEqual({ start_us: 920, end_us: 1020 });
    expect(clampView({ start_us: -500, end_us: 5000 }, limits)).toEqual(limits);
    expect(clampView({ start_us: 100, end_us: 102 }, limits)).toEqual({ start_us: 96, end_us: 106 });
  });
});

describe("zoomAt", () => {
  it("keeps the time under the anchor fixed", () => {
    const view = zoomAt({ start_us: 0, end_us: 1000 }, 100, 25, 0.5, limits);
    expect(view).toEqual({ start_us: 125, end_us: 625 });
    expect(timeToX(view, 100, 250)).toBe(25);
  });
  it("stops at the minimum span", () => {
    expect(zoomAt({ start_us: 0, end_us: 100 }, 100, 50, 0.01, limits)).toEqual({ start_us: 45, end_us: 55 });
  });
  it("never zooms out beyond the data and margin", () => {
    expect(zoomAt({ start_us: 0, end_us: 1000 }, 100, 50, 10, limits)).toEqual(limits);
  });
  it("shifts back inside when zooming out at an edge", () => {
    expect(zoomAt({ start_us: -20, end_us: 80 }, 100, 100, 2, limits)).toEqual({ start_us: -20, end_us: 180 });
  });
});

describe("panBy", () => {
  const view = { start_us: 100, end_us: 200 };
  it("moves by the dragged time", () => {
    expect(panBy(view, 100, 10, limits)).toEqual({ start_us: 90, end_us: 190 });
    expect(panBy(view, 100, -30, limits)).toEqual({ start_us: 130, end_us: 230 });
  });
  it("clamps at both ends", () => {
    expect(panBy(view, 100, 1000, limits)).toEqual({ start_us: -20, end_us: 80 });
    expect(panBy(view, 100, -2000, limits)).toEqual({ start_us: 920, end_us: 1020 });
  });
});

describe("ticks", () => {
  it("picks 1, 2 or 5 × 10^k", () => {
    expect(niceStep(1000, 5)).toBe(200);
    expect(niceStep(10e6, 10)).toBe(1e6);
    expect(niceStep(7, 3)).toBe(5);
    expect(niceStep(950, 1)).toBe(1000);
  });
  it("lists multiples of the step within the range", () => {
    expect(niceTicks(130, 1070, 5)).toEqual({ step: 200, ticks: [200, 400, 600, 800, 1000] });
    expect(niceTicks(-1500, 1500, 6).ticks).toEqual([-1500, -1000, -500, 0, 500, 1000, 1500]);
    expect(niceTicks(0, 0, 5).ticks).toEqual([]);
  });
  it("labels in the unit of the step", () => {
    expect(tickLabel(1.5e6, 5e5)).toBe("1.5 s");
    expect(tickLabel(2e6, 1e6)).toBe("2 s");
    expect(tickLabel(250e3, 50e3)).toBe("250 ms");
    expect(tickLabel(2.5e3, 500)).toBe("2.5 ms");
    expect(tickLabel(3e5, 1e5)).toBe("0.3 s");
    expect(tickLabel(1200, 200)).toBe("1.2 ms");
    expect(tickLabel(1.2e6, 2e5)).toBe("1.2 s");
    expect(tickLabel(40, 20)).toBe("40 µs");
  });
});
