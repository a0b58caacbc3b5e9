import { describe, expect, it } from "vitest";
import { laneGeometry, laneTop, rowAt, rowTop } from "../src/monitor/lanes";

describe("laneGeometry", () => {
  it("gives few ranks full-height rows", () => {
    expect(laneGeometry(2, 5)).toEqual({
      axisHeight: 20,
      labelWidth: 56,
      rowHeight: 10,
      rowCount: 5,
      laneHeight: 50,
      laneGap: 6,
      rankCount: 2,
      height: 132,
    });
  });
  it("shrinks rows as ranks are added, down to 3 px", () => {
    expect(laneGeometry(8, 5)).toMatchObject({ rowHeight: 8, laneHeight: 40, laneGap: 6, height: 388 });
    expect(laneGeometry(16, 5)).toMatchObject({ rowHeight: 4, laneHeight: 20, laneGap: 2, height: 372 });
    expect(laneGeometry(64, 6)).toMatchObject({ rowHeight: 3, laneHeight: 18, laneGap: 2, height: 1300 });
  });
});

describe("rows", () => {
  const g = laneGeometry(2, 5);
  it("places lanes and sub-rows", () => {
    expect(laneTop(g, 0)).toBe(23);
    expect(laneTop(g, 1)).toBe(79);
    expect(rowTop(g, 1, 2)).toBe(99);
  });
  it("finds the row under y, none over the axis, gaps or past the last lane", () => {
    expect(rowAt(g, 99)).toEqual({ rank: 1, row: 2 });
    expect(rowAt(g, 108.9)).toEqual({ rank: 1, row: 2 });
    expect(rowAt(g, 109)).toEqual({ rank: 1, row: 3 });
    expect(rowAt(g, 23)).toEqual({ rank: 0, row: 0 });
    expect(rowAt(g, 10)).toBeNull();
    expect(rowAt(g, 74)).toBeNull();
    expect(rowAt(g, 200)).toBeNull();
  });
});
