/** Aligning ranks' clocks on the timeline. */

/** Offsets closer to rank 0's than this are message latency, not a different clock. */
export const SAME_CLOCK_US = 20_000;

/**
 * Per-rank shifts (µs) that move each rank's events onto rank 0's clock. `offsets` are kernel clock
 * minus rank clock. Ranks on one host share the monotonic clock and their measured offsets differ only
 * by latency, so a shift is applied only when a rank's offset differs from rank 0's by more than
 * `threshold`; unknown offsets are not shifted.
 */
export function clockShifts(offsets: readonly (number | null)[], threshold = SAME_CLOCK_US): number[] {
  const reference = offsets[0];
  return offsets.map((offset) => {
    if (reference == null || offset == null) return 0;
    const shift = offset - reference;
    return Math.abs(shift) > threshold ? shift : 0;
  });
}
