import { describe, expect, it } from "vitest";
import { eventLosses, lossLine } from "../src/monitor/counts";
import type { Summary } from "../src/monitor/types";

const counters = (coarsened: number, ring: number, buffer: number, lost: number) =>
  ({ coarsened, ring_dropped: ring, buffer_dropped: buffer, lost_batches: lost }) as never;

describe("event losses", () => {
  const summary: Summary = { ranks: [counters(1000, 1, 2, 1), counters(200, 0, 3, 0)], health_omitted: 4 };
  it("sums the ranks' counters, the browser's drops and omitted health entries", () => {
    expect(eventLosses(summary, 7)).toEqual({ merged: 1200, dropped: 17, lostBatches: 1 });
  });
  it("says it in one line, or nothing when nothing was lost", () => {
    expect(lossLine(eventLosses(summary, 7))).toBe("1,200 events merged, 17 dropped, 1 batch lost");
    expect(lossLine({ merged: 0, dropped: 3, lostBatches: 2 })).toBe("0 events merged, 3 dropped, 2 batches lost");
    expect(lossLine(eventLosses({}, 0))).toBe("");
  });
});
