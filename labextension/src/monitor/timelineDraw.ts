/** Painting the timeline canvas: lanes, axis, and coalesced spans per rank, sub-row and phase. */

import { Coalescer } from "./coalesce";
import { LaneGeometry, laneTop, rowTop } from "./lanes";
import { niceTicks, tickLabel, timeToX, TimeView } from "./layout";
import { phaseColour, rowOf } from "./phases";
import { visibleRange } from "./spans";
import type { EventStore } from "./store";

export interface Paint {
  text: string;
  grid: string;
  font: string;
}

export interface DrawInput {
  store: EventStore;
  shifts: readonly number[];
  view: TimeView;
  origin: number;
  geometry: LaneGeometry;
  width: number;
  paint: Paint;
}

const HEALTH_MIN_PX = 3;

/** Draws one frame (in CSS pixels) and returns how many span rects each rank got. */
export function drawTimeline(ctx: CanvasRenderingContext2D, d: DrawInput): number[] {
  const g = d.geometry;
  const plotWidth = Math.max(1, d.width - g.labelWidth);
  ctx.clearRect(0, 0, d.width, g.height);
  ctx.font = `${Math.min(11, Math.max(8, g.laneHeight))}px ${d.paint.font}`;
  ctx.textBaseline = "middle";
  for (let rank = 0; rank < g.rankCount; rank++) {
    const top = laneTop(g, rank);
    ctx.fillStyle = rank % 2 ? "rgba(128,128,128,0.10)" : "rgba(128,128,128,0.05)";
    ctx.fillRect(0, top, d.width, g.laneHeight);
    ctx.fillStyle = d.paint.text;
    ctx.fillText(`rank ${rank}`, 4, top + g.laneHeight / 2);
  }
  drawAxis(ctx, d, plotWidth);
  ctx.save();
  ctx.beginPath();
  ctx.rect(g.labelWidth, g.axisHeight, plotWidth, g.height - g.axisHeight);
  ctx.clip();
  ctx.translate(g.labelWidth, 0);
  const counts: number[] = [];
  for (let rank = 0; rank < g.rankCount; rank++) counts.push(drawRank(ctx, d, rank, plotWidth));
  ctx.restore();
  return counts;
}

function drawAxis(ctx: CanvasRenderingContext2D, d: DrawInput, plotWidth: number): void {
  const g = d.geometry;
  const { step, ticks } = niceTicks(
    d.view.start_us - d.origin,
    d.view.end_us - d.origin,
    Math.max(2, Math.floor(plotWidth / 90)),
  );
  ctx.font = `10px ${d.paint.font}`;
  ctx.textAlign = "center";
  for (const tick of ticks) {
    const x = Math.round(g.labelWidth + timeToX(d.view, plotWidth, tick + d.origin)) + 0.5;
    ctx.fillStyle = d.paint.grid;
    ctx.fillRect(x - 0.5, g.axisHeight - 4, 1, g.height - g.axisHeight + 4);
    ctx.fillStyle = d.paint.text;
    ctx.fillText(tickLabel(tick, step), Math.min(Math.max(x, g.labelWidth + 20), d.width - 24), g.axisHeight / 2 - 1);
  }
  ctx.textAlign = "start";
}

function drawRank(ctx: CanvasRenderingContext2D, d: DrawInput, rank: number, plotWidth: number): number {
  const events = d.store.ranks[rank];
  if (!events) return 0;
  const g = d.geometry;
  const shift = d.shifts[rank] ?? 0;
  const t0 = d.view.start_us - shift;
  const t1 = d.view.end_us - shift;
  const scale = plotWidth / (d.view.end_us - d.view.start_us);
  const pad = g.rowHeight >= 5 ? 1 : 0;
  const rects = new Map<string, number[]>(); // phase -> x, y, w, h quadruples
  const coalescers = new Map<string, Coalescer>();
  let count = 0;
  const coalescerFor = (phase: string): Coalescer => {
    let c = coalescers.get(phase);
    if (c) return c;
    const out: number[] = [];
    rects.set(phase, out);
    const y = rowTop(g, rank, rowOf(phase)) + pad;
    const h = g.rowHeight - pad;
    const health = d.store.healthPhases.has(phase);
    c = new Coalescer((x0, x1) => {
      const left = Math.max(x0, -2);
      const right = Math.min(x1, plotWidth + 2);
      const w = right - left;
      if (health && w < HEALTH_MIN_PX) out.push((left + right) / 2 - HEALTH_MIN_PX / 2, y, HEALTH_MIN_PX, h);
      else out.push(left, y, Math.max(w, 1), h);
      if (phase === "ABORT" || phase === "SHUTDOWN") out.push(left, laneTop(g, rank), 1.5, g.laneHeight);
      count += 1;
    });
    coalescers.set(phase, c);
    return c;
  };
  const [lo, hi] = visibleRange(events.spans, t0, t1, events.maxDur);
  for (let i = lo; i < hi; i++) {
    const s = events.spans[i];
    if (s.start + s.dur < t0) continue;
    const x0 = (s.start - t0) * scale;
    coalescerFor(s.phase).push(x0, x0 + s.dur * scale);
  }
  for (const c of coalescers.values()) c.flush();
  for (const [phase, out] of rects) {
    ctx.fillStyle = phaseColour(phase);
    ctx.beginPath();
    for (let i = 0; i < out.length; i += 4) ctx.rect(out[i], out[i + 1], out[i + 2], out[i + 3]);
    ctx.fill();
  }
  return count;
}
