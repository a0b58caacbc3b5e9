/**
 * How the widget draws engine phases: the sub-row and colour of each. Which phases exist, in what order,
 * and which report health, come from the engine with the widget's state (TimelineColumns); a phase this
 * file does not style goes to the "other" row with a fallback colour.
 */

export interface PhaseRow {
  label: string;
  phases: readonly string[];
}

/** The sub-rows of every rank's lane, top to bottom; phases not listed go to a trailing "other" row. */
export const PHASE_ROWS: readonly PhaseRow[] = [
  { label: "negotiate / queue / wait", phases: ["NEGOTIATE", "QUEUE", "WAIT_FOR_DATA"] },
  { label: "memcpy in / out", phases: ["MEMCPY_IN_FUSION_BUFFER", "MEMCPY_OUT_FUSION_BUFFER"] },
  { label: "collective", phases: ["COLLECTIVE"] },
  { label: "cycle", phases: ["CYCLE"] },
  { label: "stall / stop", phases: ["STALL", "ABORT", "SHUTDOWN"] },
];

export const OTHER_ROW = PHASE_ROWS.length;

const KNOWN_COLOURS: Record<string, string> = {
  NEGOTIATE: "#8e7cc3",
  QUEUE: "#c2b5e8",
  WAIT_FOR_DATA: "#17becf",
  MEMCPY_IN_FUSION_BUFFER: "#f0a04b",
  MEMCPY_OUT_FUSION_BUFFER: "#c8742a",
  COLLECTIVE: "#3d85c6",
  CYCLE: "#93c47d",
  STALL: "#e6a700",
  ABORT: "#d93025",
  SHUTDOWN: "#7f7f7f",
};

const FALLBACK_COLOURS = ["#bcbd22", "#e377c2", "#8c564b", "#2ca02c", "#9467bd", "#7f7f7f"];

const ROW_OF = new Map<string, number>(PHASE_ROWS.flatMap((row, i) => row.phases.map((p) => [p, i] as const)));

export function rowOf(phase: string): number {
  return ROW_OF.get(phase) ?? OTHER_ROW;
}

/** A phase's colour; unknown phases get a stable one from a fallback palette (by a hash of the name). */
export function phaseColour(phase: string): string {
  const known = KNOWN_COLOURS[phase];
  if (known) return known;
  let hash = 0;
  for (let i = 0; i < phase.length; i++) hash = (hash * 31 + phase.charCodeAt(i)) >>> 0;
  return FALLBACK_COLOURS[hash % FALLBACK_COLOURS.length];
}

/** Row labels for a lane with `rowCount` sub-rows. */
export function rowLabels(rowCount: number): string[] {
  return [...PHASE_ROWS.map((r) => r.label), "other"].slice(0, rowCount);
}

const SHORT_LABELS: Record<string, string> = {
  MEMCPY_IN_FUSION_BUFFER: "memcpy in",
  MEMCPY_OUT_FUSION_BUFFER: "memcpy out",
};

/** A phase name for the legend: "memcpy in", "collective", "nccl allreduce". */
export function phaseLabel(phase: string): string {
  return SHORT_LABELS[phase] ?? phase.toLowerCase().replace(/_/g, " ");
}
