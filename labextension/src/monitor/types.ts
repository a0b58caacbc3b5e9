/** Shapes of the widget's synced traits and custom messages (JSON from the kernel's Monitor). */

export interface RankSummary {
  rank: number;
  samples: number;
  steps: number;
  samples_per_s: number;
  mean_samples_per_s: number | null;
  straggler: boolean;
  events: number;
  coarsened: number;
  ring_dropped: number;
  buffer_dropped: number;
  lost_batches: number;
  behind: boolean;
  stalls: number;
  errors: number;
  clock_offset_us: number | null;
}

export type RunState = "running" | "finished" | "failed";

export interface Summary {
  version?: number;
  cell?: string;
  finished?: boolean;
  elapsed_s?: number;
  window_s?: number;
  timeline_s?: number;
  ranks?: RankSummary[];
  total_samples_per_s?: number;
  mean_total_samples_per_s?: number | null;
  efficiency?: number | null;
  baseline?: { samples_per_s: number; source: string } | null;
  stragglers?: number[];
  health_omitted?: number;
  state?: RunState;
  failed_rank?: number | null;
  error?: string;
}

export interface HealthEntry {
  rank: number;
  kind: "stall" | "abort" | string;
  at_us: number;
  message: string;
}

/** One rank's events as columns; `phase` holds names (or indices into `phases`). */
export interface RankColumns {
  phase: (string | number)[];
  name: string[];
  op: string[];
  start_us: number[];
  dur_us: number[];
  bytes: number[];
  count: number[];
}

export interface TimelineColumns {
  /** The engine's timeline phases, in the order of their codes. */
  phases?: string[];
  /** The phases that report stalls and aborts (never merged away; drawn however short). */
  health_phases?: string[];
  columns?: string[];
  ranks?: RankColumns[];
}

/** The part of an anywidget model the view uses. */
export interface WidgetModel {
  get(name: string): unknown;
  on(event: string, callback: (...args: any[]) => void): void;
  off(event?: string | null, callback?: ((...args: any[]) => void) | null): void;
}

/** The run state shown: the kernel's, or derived from `finished` for older summaries. */
export function runState(summary: Summary): RunState {
  return summary.state ?? (summary.finished ? "finished" : "running");
}
