import { describe, expect, it } from "vitest";
import { clockShifts } from "../src/monitor/clock";

describe("clockShifts", () => {
  it("shifts only ranks whose offset differs from rank 0's by more than 20 ms", () => {
    expect(clockShifts([1000, 1500, 50_000, null])).toEqual([0, 0, 49_000, 0]);
    expect(clockShifts([0, 20_000, -20_001])).toEqual([0, 0, -20_001]);
  });
  it("shifts nothing without rank 0's offset", () => {
    expect(clockShifts([null, 5e6])).toEqual([0, 0]);
    expect(clockShifts([])).toEqual([]);
  });
  it("takes the threshold as a parameter", () => {
    expect(clockShifts([0, 150], 100)).toEqual([0, 150]);
  });
});
