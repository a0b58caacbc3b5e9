/** Throughput bars: which value each rank shows, a nice scale and bar fractions. */

import { shownRate } from "./format";
import type { Summary } from "./types";

export interface RateBar {
  rank: number;
  /** The value shown (rounded as displayed), or null before any is known. */
  value: number | null;
  /** Bar width as a fraction of the scale, 0..1. */
  fraction: number;
  straggler: boolean;
}

export interface RateBars {
  ranks: RateBar[];
  total: { value: number | null; fraction: number; ideal: number | null; idealFraction: number | null };
}

/** The smallest of 1, 2, 2.5, 5 × 10^k at or above `value` (1 for nothing to show). */
export function niceMax(value: number): number {
  if (!(value > 0) || !Number.isFinite(value)) return 1;
  const exponent = Math.floor(Math.log10(value));
  for (const m of [1, 2, 2.5, 5, 10]) {
    const candidate = Number((m * Math.pow(10, exponent)).toPrecision(12));
    if (candidate >= value) return candidate;
  }
  return Number(Math.pow(10, exponent + 1).toPrecision(12));
}

/** `value / max` clamped to 0..1; unknown values are 0. */
export function barFraction(value: number | null, max: number): number {
  if (value == null || !Number.isFinite(value) || !(max > 0)) return 0;
  return Math.min(1, Math.max(0, value / max));
}

/**
 * The bars for a summary: live rates while running, means once finished (live when a mean is unknown).
 * Ranks share one scale; the total has its own, widened to the ideal (ranks × baseline) when known.
 */
export function rateBars(summary: Summary): RateBars {
  const finished = summary.finished === true || (summary.state !== undefined && summary.state !== "running");
  const ranks = summary.ranks ?? [];
  const values = ranks.map((r) => shownRate(finished ? (r.mean_samples_per_s ?? r.samples_per_s) : r.samples_per_s));
  const scale = niceMax(Math.max(0, ...values.map((v) => v ?? 0)));
  const total = shownRate(
    finished ? (summary.mean_total_samples_per_s ?? summary.total_samples_per_s) : summary.total_samples_per_s,
  );
  const ideal = summary.baseline ? summary.baseline.samples_per_s * ranks.length : null;
  const totalScale = niceMax(Math.max(total ?? 0, ideal ?? 0));
  return {
    ranks: ranks.map((r, i) => ({
      rank: r.rank,
      value: values[i],
      fraction: barFraction(values[i], scale),
      straggler: r.straggler,
    })),
    total: {
      value: total,
      fraction: barFraction(total, totalScale),
      ideal,
      idealFraction: ideal == null ? null : barFraction(ideal, totalScale),
    },
  };
}
