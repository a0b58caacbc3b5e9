/** The browser's bounded copy of every rank's timeline events, fed by the kernel's column batches. */

import { OTHER_ROW, rowOf } from "./phases";
import { insertSorted, Span } from "./spans";
import type { TimeView } from "./layout";
import type { RankColumns, TimelineColumns } from "./types";

/** Rows kept per rank; older ones are dropped and counted. */
export const RANK_BOUND = 50_000;

export class RankEvents {
  readonly spans: Span[] = [];
  dropped = 0;
  /** Longest duration seen: how far back a span that overlaps a time may start. */
  maxDur = 0;
  maxEnd = -Infinity;
  firstStart = Infinity;
}

/** Rows of one rank's columns; a phase given as an index is looked up in `phases`. */
export function spansFromColumns(columns: RankColumns, phases: readonly string[]): Span[] {
  const n = columns.start_us?.length ?? 0;
  const spans: Span[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const phase = columns.phase[i];
    spans[i] = {
      phase: typeof phase === "number" ? (phases[phase] ?? `PHASE_${phase}`) : String(phase),
      name: columns.name[i] ?? "",
      op: columns.op[i] ?? "",
      start: columns.start_us[i],
      dur: Math.max(0, columns.dur_us[i] ?? 0),
      bytes: columns.bytes[i] ?? 0,
      count: columns.count[i] ?? 1,
    };
  }
  return spans;
}

export class EventStore {
  readonly ranks: RankEvents[] = [];
  /** The engine's phases, as the last state named them. */
  phases: readonly string[] = [];
  /** The phases that report health, as the last state named them. */
  healthPhases: ReadonlySet<string> = new Set();
  /** Phases seen that have no row of their own. */
  readonly otherPhases = new Set<string>();
  /** Bumped on every change, so views know when to redraw. */
  revision = 0;

  constructor(readonly bound = RANK_BOUND) {}

  get empty(): boolean {
    return this.ranks.every((r) => r.spans.length === 0);
  }

  get dropped(): number {
    return this.ranks.reduce((sum, r) => sum + r.dropped, 0);
  }

  /** Sub-rows per lane: the known groups, plus "other" once a phase without a row is seen. */
  get rowCount(): number {
    return this.otherPhases.size > 0 ? OTHER_ROW + 1 : OTHER_ROW;
  }

  /** Aligned [earliest stored start, latest end] over all ranks, or null when empty. */
  bounds(shifts: readonly number[]): TimeView | null {
    let start = Infinity;
    let end = -Infinity;
    this.ranks.forEach((r, rank) => {
      if (r.spans.length === 0) return;
      const shift = shifts[rank] ?? 0;
      start = Math.min(start, r.spans[0].start + shift);
      end = Math.max(end, r.maxEnd + shift);
    });
    return start <= end ? { start_us: start, end_us: end } : null;
  }

  /** Aligned earliest start ever seen: the axis origin, which stays put while old events are dropped. */
  origin(shifts: readonly number[]): number | null {
    let origin = Infinity;
    this.ranks.forEach((r, rank) => {
      origin = Math.min(origin, r.firstStart + (shifts[rank] ?? 0));
    });
    return Number.isFinite(origin) ? origin : null;
  }

  ingest(timeline: TimelineColumns): void {
    if (timeline.phases) this.phases = timeline.phases;
    if (timeline.health_phases) this.healthPhases = new Set(timeline.health_phases);
    const phases = this.phases;
    (timeline.ranks ?? []).forEach((columns, rank) => {
      const spans = spansFromColumns(columns, phases);
      if (spans.length === 0) return;
      while (this.ranks.length <= rank) this.ranks.push(new RankEvents());
      const events = this.ranks[rank];
      for (const s of spans) {
        if (s.dur > events.maxDur) events.maxDur = s.dur;
        if (s.start + s.dur > events.maxEnd) events.maxEnd = s.start + s.dur;
        if (s.start < events.firstStart) events.firstStart = s.start;
        if (rowOf(s.phase) === OTHER_ROW) this.otherPhases.add(s.phase);
      }
      events.dropped += insertSorted(events.spans, spans, this.bound);
      this.revision += 1;
    });
  }
}
