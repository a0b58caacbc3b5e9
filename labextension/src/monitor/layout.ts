/** The timeline's time axis: time↔x mapping, sliding window, zoom and pan with clamping, nice ticks. */

/** A visible time range in µs (aligned rank clock). */
export interface TimeView {
  start_us: number;
  end_us: number;
}

/** The narrowest range a zoom may reach. */
export const MIN_SPAN_US = 10;

/** How far beyond the data a view may reach, as a fraction of the data's span. */
export const MARGIN_FRACTION = 0.02;

export function timeToX(view: TimeView, width: number, t: number): number {
  return ((t - view.start_us) * width) / (view.end_us - view.start_us);
}

export function xToTime(view: TimeView, width: number, x: number): number {
  return view.start_us + (x * (view.end_us - view.start_us)) / width;
}

/** The last `window_us` ending at the newest event. */
export function slidingWindow(newest_us: number, window_us: number): TimeView {
  return { start_us: newest_us - window_us, end_us: newest_us };
}

/** The data bounds widened by a margin on each side (at least half the minimum span): where views may go. */
export function viewLimits(bounds: TimeView, minSpan = MIN_SPAN_US): TimeView {
  const margin = Math.max((bounds.end_us - bounds.start_us) * MARGIN_FRACTION, minSpan / 2);
  return { start_us: bounds.start_us - margin, end_us: bounds.end_us + margin };
}

/** A view with its span kept within [minSpan, limits' span] and shifted to lie inside the limits. */
export function clampView(view: TimeView, limits: TimeView, minSpan = MIN_SPAN_US): TimeView {
  const maxSpan = limits.end_us - limits.start_us;
  const span = Math.min(Math.max(view.end_us - view.start_us, minSpan), maxSpan);
  const center = (view.start_us + view.end_us) / 2;
  let start = center - span / 2;
  start = Math.min(Math.max(start, limits.start_us), limits.end_us - span);
  return { start_us: start, end_us: start + span };
}

/** Zoom by `factor` (<1 zooms in) keeping the time under `anchorX` fixed, then clamp. */
export function zoomAt(
  view: TimeView,
  width: number,
  anchorX: number,
  factor: number,
  limits: TimeView,
  minSpan = MIN_SPAN_US,
): TimeView {
  const anchor = xToTime(view, width, anchorX);
  const maxSpan = limits.end_us - limits.start_us;
  const span = Math.min(Math.max((view.end_us - view.start_us) * factor, minSpan), maxSpan);
  const start = anchor - (anchorX / width) * span;
  return clampView({ start_us: start, end_us: start + span }, limits, minSpan);
}

/** Move the view by a drag of `dx` pixels (positive drags the content right, showing earlier time). */
export function panBy(view: TimeView, width: number, dx: number, limits: TimeView, minSpan = MIN_SPAN_US): TimeView {
  const shift = (dx * (view.end_us - view.start_us)) / width;
  return clampView({ start_us: view.start_us - shift, end_us: view.end_us - shift }, limits, minSpan);
}

/** The tick step among 1, 2, 5 × 10^k that gives at most `maxTicks` intervals over `span`. */
export function niceStep(span: number, maxTicks: number): number {
  const raw = span / Math.max(1, maxTicks);
  const power = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5]) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

/** Tick values (multiples of a nice step) within [start, end]. */
export function niceTicks(start: number, end: number, maxTicks: number): { step: number; ticks: number[] } {
  if (!(end > start)) return { step: 0, ticks: [] };
  const step = niceStep(end - start, maxTicks);
  const ticks: number[] = [];
  for (let k = Math.ceil(start / step); k * step <= end; k++) {
    ticks.push(Number((k * step).toPrecision(12)));
  }
  return { step, ticks };
}

/** A tick label for `us` in the unit that suits `step`, with as many decimals as the step needs: "1.5 s", "250 ms", "20 µs". */
export function tickLabel(us: number, step: number): string {
  const [unit, scale] = step >= 1e5 ? ["s", 1e6] : step >= 100 ? ["ms", 1e3] : ["µs", 1];
  const decimals = Math.max(0, -Math.floor(Math.log10(step / scale) + 1e-9));
  return `${(us / scale).toFixed(decimals)} ${unit}`;
}
