/** The browser's timeline as a Chrome trace (opens in Perfetto and chrome://tracing). */

import { rowLabels, rowOf } from "./phases";
import type { Span } from "./spans";

export interface ChromeEvent {
  name: string;
  ph: "X" | "M";
  pid: number;
  tid: number;
  cat?: string;
  ts?: number;
  dur?: number;
  args: Record<string, unknown>;
}

export interface ChromeTrace {
  traceEvents: ChromeEvent[];
  displayTimeUnit: "ms";
  otherData: Record<string, unknown>;
}

export interface TraceInput {
  /** Each rank's spans, sorted by start, in the rank's own clock. */
  ranks: readonly (readonly Span[])[];
  /** Per-rank shift onto rank 0's clock (µs). */
  shifts: readonly number[];
  rowCount: number;
  /** Counts to record with the trace, e.g. events merged and dropped. */
  otherData: Record<string, unknown>;
}

/**
 * One complete ("X") event per span, pid = rank and tid = the span's sub-row, with process and thread
 * name metadata. Timestamps are µs from the earliest aligned span, so they stay small and exact.
 */
export function toChromeTrace(input: TraceInput): ChromeTrace {
  const shiftOf = (rank: number) => input.shifts[rank] ?? 0;
  let origin = Infinity;
  input.ranks.forEach((spans, rank) => {
    if (spans.length > 0) origin = Math.min(origin, spans[0].start + shiftOf(rank));
  });
  if (!Number.isFinite(origin)) origin = 0;
  const labels = rowLabels(input.rowCount);
  const events: ChromeEvent[] = [];
  input.ranks.forEach((spans, rank) => {
    events.push({ name: "process_name", ph: "M", pid: rank, tid: 0, args: { name: `rank ${rank}` } });
    events.push({ name: "process_sort_index", ph: "M", pid: rank, tid: 0, args: { sort_index: rank } });
    labels.forEach((label, row) => {
      events.push({ name: "thread_name", ph: "M", pid: rank, tid: row, args: { name: label } });
    });
    const shift = shiftOf(rank);
    for (const s of spans) {
      events.push({
        name: s.name || s.phase,
        cat: s.phase,
        ph: "X",
        ts: s.start + shift - origin,
        dur: s.dur,
        pid: rank,
        tid: rowOf(s.phase),
        args: { op: s.op, bytes: s.bytes, count: s.count },
      });
    }
  });
  return {
    traceEvents: events,
    displayTimeUnit: "ms",
    otherData: { ...input.otherData, origin_us: origin, clock_shift_us: [...input.shifts] },
  };
}
