/** The event accounting line: how many events were merged or lost between the ranks and the view. */

import { formatCount } from "./format";
import type { Summary } from "./types";

export interface EventLosses {
  merged: number;
  dropped: number;
  lostBatches: number;
}

/**
 * Merged: events coarsened on the ranks. Dropped: events lost from the ranks' rings and the kernel's
 * buffers, the browser store's own drops and health entries omitted. Lost batches are counted apart
 * since a batch holds many events.
 */
export function eventLosses(summary: Summary, browserDropped: number): EventLosses {
  const ranks = summary.ranks ?? [];
  const sum = (pick: (r: (typeof ranks)[number]) => number) => ranks.reduce((s, r) => s + (pick(r) || 0), 0);
  return {
    merged: sum((r) => r.coarsened),
    dropped: sum((r) => r.ring_dropped + r.buffer_dropped) + browserDropped + (summary.health_omitted ?? 0),
    lostBatches: sum((r) => r.lost_batches),
  };
}

/** "1,200 events merged, 35 dropped, 2 batches lost", or "" when nothing was lost. */
export function lossLine(losses: EventLosses): string {
  if (losses.merged === 0 && losses.dropped === 0 && losses.lostBatches === 0) return "";
  const parts = [`${formatCount(losses.merged)} events merged`, `${formatCount(losses.dropped)} dropped`];
  if (losses.lostBatches > 0) {
    parts.push(`${formatCount(losses.lostBatches)} ${losses.lostBatches === 1 ? "batch" : "batches"} lost`);
  }
  return parts.join(", ");
}
