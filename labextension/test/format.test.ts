import { describe, expect, it } from "vitest";
import { formatBytes, formatDuration, formatElapsed, formatOffset, formatRate, shownRate } from "../src/monitor/format";
import { efficiencyText } from "../src/monitor/header";
import { phaseColour, phaseLabel, rowOf } from "../src/monitor/phases";

describe("format", () => {
  it("formats rates with one decimal and separators", () => {
    expect(formatRate(1234.5)).toBe("1,234.5/s");
    expect(formatRate(1234.56)).toBe("1,234.6/s");
    expect(formatRate(0)).toBe("0.0/s");
    expect(formatRate(null)).toBe("–");
    expect(shownRate(1234.56)).toBe(1234.6);
    expect(shownRate(Infinity)).toBeNull();
  });
  it("formats durations, sizes and times", () => {
    expect(formatDuration(5.5)).toBe("5.5 µs");
    expect(formatDuration(850)).toBe("850 µs");
    expect(formatDuration(12_345)).toBe("12.3 ms");
    expect(formatDuration(1_250_000)).toBe("1.25 s");
    expect(formatBytes(512)).toBe("512 B");
    expect(formatBytes(4096)).toBe("4.0 KiB");
    expect(formatBytes(25 * 1024 * 1024)).toBe("25.0 MiB");
    expect(formatElapsed(12.34)).toBe("12.3 s");
    expect(formatElapsed(125.9)).toBe("2 min 05 s");
    expect(formatOffset(12_345_678)).toBe("12.346 s");
  });
  it("says where the efficiency baseline came from", () => {
    expect(efficiencyText({})).toBe("no baseline: run the cell with -np 1 or pass --baseline");
    const baseline = { samples_per_s: 600, source: "-np 1 run" };
    const ranks = [{}, {}] as never;
    expect(efficiencyText({ ranks, baseline, efficiency: 0.9368 })).toBe(
      "scaling efficiency 94% of 2 × 600.0/s (-np 1 run)",
    );
    expect(efficiencyText({ ranks, baseline, efficiency: null })).toBe(
      "scaling efficiency not measured yet; baseline 2 × 600.0/s (-np 1 run)",
    );
  });
});

describe("phases", () => {
  it("puts known phases in their rows and unknown ones in 'other'", () => {
    expect(rowOf("NEGOTIATE")).toBe(0);
    expect(rowOf("MEMCPY_OUT_FUSION_BUFFER")).toBe(1);
    expect(rowOf("COLLECTIVE")).toBe(2);
    expect(rowOf("ABORT")).toBe(4);
    expect(rowOf("NCCL_ALLREDUCE")).toBe(5);
  });
  it("gives unknown phases a stable fallback colour", () => {
    expect(phaseColour("COLLECTIVE")).toBe("#3d85c6");
    const colour = phaseColour("WAIT_FOR_DATA");
    expect(colour).toMatch(/^#[0-9a-f]{6}$/);
    expect(phaseColour("WAIT_FOR_DATA")).toBe(colour);
    expect(phaseLabel("MEMCPY_IN_FUSION_BUFFER")).toBe("memcpy in");
    expect(phaseLabel("NCCL_ALLREDUCE")).toBe("nccl allreduce");
  });
});
