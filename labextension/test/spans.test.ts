import { describe, expect, it } from "vitest";
import { insertSorted, lowerBound, Span, spanAt, upperBound, visibleRange } from "../src/monitor/spans";

function span(start: number, dur = 1, name = "", phase = "COLLECTIVE"): Span {
  return { phase, name, op: "allreduce", start, dur, bytes: 0, count: 1 };
}

const starts = (list: Span[]) => list.map((s) => s.start);

describe("binary search", () => {
  const list = [10, 20, 20, 30].map((t) => span(t));
  it("finds bounds", () => {
    expect(lowerBound(list, 20)).toBe(1);
    expect(upperBound(list, 20)).toBe(3);
    expect(lowerBound(list, 5)).toBe(0);
    expect(upperBound(list, 30)).toBe(4);
    expect(lowerBound(list, 31)).toBe(4);
  });
  it("widens the visible range back by the longest duration", () => {
    const spans = [0, 100, 200, 300, 400].map((t) => span(t, 60));
    expect(visibleRange(spans, 250, 320, 60)).toEqual([2, 4]);
    expect(visibleRange(spans, 250, 320, 0)).toEqual([3, 4]);
    expect(visibleRange(spans, 1000, 2000, 60)).toEqual([5, 5]);
  });
});

describe("insertSorted", () => {
  it("appends a batch that arrives in order", () => {
    const list = [0, 10, 20].map((t) => span(t));
    expect(insertSorted(list, [span(40), span(30)], 100)).toBe(0);
    expect(starts(list)).toEqual([0, 10, 20, 30, 40]);
  });
  it("merges an overlapping batch, equal starts in arrival order", () => {
    const list = [span(0), span(10), span(20, 1, "old")];
    insertSorted(list, [span(15), span(20, 1, "new"), span(5), span(25)], 100);
    expect(starts(list)).toEqual([0, 5, 10, 15, 20, 20, 25]);
    expect(list.filter((s) => s.start === 20).map((s) => s.name)).toEqual(["old", "new"]);
  });
  it("drops the oldest beyond the bound and counts them", () => {
    const list = [0, 10, 20, 30, 40].map((t) => span(t));
    expect(insertSorted(list, [span(5), span(50)], 4)).toBe(3);
    expect(starts(list)).toEqual([20, 30, 40, 50]);
    expect(insertSorted(list, [], 4)).toBe(0);
  });
});

describe("spanAt", () => {
  const spans = [span(0, 100, "long"), span(40, 10, "short"), span(200, 5, "far"), span(45, 2, "other", "QUEUE")];
  spans.sort((a, b) => a.start - b.start);
  const collective = (s: Span) => s.phase === "COLLECTIVE";
  it("prefers the shortest span containing t", () => {
    expect(spanAt(spans, 100, 45, 2, collective)?.name).toBe("short");
    expect(spanAt(spans, 100, 80, 2, collective)?.name).toBe("long");
  });
  it("finds a span within the tolerance, else none", () => {
    expect(spanAt(spans, 100, 198, 3, collective)?.name).toBe("far");
    expect(spanAt(spans, 100, 150, 2, collective)).toBeNull();
    expect(spanAt(spans, 100, 46, 2, (s) => s.phase === "QUEUE")?.name).toBe("other");
  });
});
