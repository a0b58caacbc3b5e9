import { describe, expect, it } from "vitest";
import { Coalescer } from "../src/monitor/coalesce";

function run(spans: [number, number][]): [number, number][] {
  const rects: [number, number][] = [];
  const c = new Coalescer((x0, x1) => rects.push([x0, x1]));
  for (const [x0, x1] of spans) c.push(x0, x1);
  c.flush();
  return rects;
}

describe("Coalescer", () => {
  it("merges sub-pixel spans within a pixel of each other, keeps wide ones apart", () => {
    expect(
      run([
        [0, 0.2],
        [0.5, 0.7],
        [0.9, 1.1],
        [5, 10],
        [10.5, 20],
        [20.3, 20.4],
      ]),
    ).toEqual([
      [0, 1.1],
      [5, 10],
      [10.5, 20.4],
    ]);
  });
  it("turns 10,000 tiny adjacent spans into one rect", () => {
    const spans: [number, number][] = [];
    for (let i = 0; i < 10_000; i++) spans.push([i * 0.01, i * 0.01 + 0.005]);
    expect(run(spans)).toEqual([[0, 99.995]]);
  });
  it("keeps narrow spans that are more than a pixel apart", () => {
    const spans: [number, number][] = [];
    for (let i = 0; i < 50; i++) spans.push([i * 2, i * 2 + 0.5]);
    expect(run(spans)).toHaveLength(50);
  });
  it("emits nothing when nothing was pushed", () => {
    expect(run([])).toEqual([]);
  });
});
