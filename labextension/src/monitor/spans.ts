/** Sorted span arrays: binary search, bounded merge insertion and lookups by time. */

/** One timeline row; `start` is in the rank's own clock (µs). */
export interface Span {
  phase: string;
  name: string;
  op: string;
  start: number;
  dur: number;
  bytes: number;
  count: number;
}

/** First index whose start is >= t. */
export function lowerBound(spans: readonly Span[], t: number): number {
  let lo = 0;
  let hi = spans.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (spans[mid].start < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** First index whose start is > t. */
export function upperBound(spans: readonly Span[], t: number): number {
  let lo = 0;
  let hi = spans.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (spans[mid].start <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Index range [lo, hi) of spans that may overlap [t0, t1]: those starting in [t0 - maxDur, t1].
 * Callers skip the few in the range that end before t0.
 */
export function visibleRange(spans: readonly Span[], t0: number, t1: number, maxDur: number): [number, number] {
  return [lowerBound(spans, t0 - maxDur), upperBound(spans, t1)];
}

/**
 * Merge `incoming` (any order) into `list` (sorted by start), keeping equal starts in arrival order,
 * then drop the oldest beyond `bound`. Returns how many were dropped. Appending in order costs
 * O(batch); an overlapping batch re-merges only the tail it overlaps.
 */
export function insertSorted(list: Span[], incoming: readonly Span[], bound: number): number {
  if (incoming.length > 0) {
    const add = [...incoming].sort((a, b) => a.start - b.start);
    const at = upperBound(list, add[0].start);
    const tail = list.splice(at);
    let i = 0;
    let j = 0;
    while (i < tail.length && j < add.length) {
      list.push(tail[i].start <= add[j].start ? tail[i++] : add[j++]);
    }
    while (i < tail.length) list.push(tail[i++]);
    while (j < add.length) list.push(add[j++]);
  }
  const over = list.length - bound;
  if (over <= 0) return 0;
  list.splice(0, over);
  return over;
}

/**
 * The span of sub-row `row` nearest to time t (within `tolerance`), preferring the shortest among
 * those that contain t, so a short span drawn over a long one can be picked.
 */
export function spanAt(
  spans: readonly Span[],
  maxDur: number,
  t: number,
  tolerance: number,
  inRow: (span: Span) => boolean,
): Span | null {
  const [lo, hi] = visibleRange(spans, t - tolerance, t + tolerance, maxDur);
  let best: Span | null = null;
  let bestDistance = Infinity;
  for (let i = lo; i < hi; i++) {
    const s = spans[i];
    if (!inRow(s)) continue;
    const distance = t < s.start ? s.start - t : t > s.start + s.dur ? t - s.start - s.dur : 0;
    if (distance > tolerance) continue;
    if (distance < bestDistance || (distance === bestDistance && best !== null && s.dur < best.dur)) {
      best = s;
      bestDistance = distance;
    }
  }
  return best;
}
