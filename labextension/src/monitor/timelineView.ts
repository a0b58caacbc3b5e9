/** The timeline panel: toolbar, canvas with hover, zoom and pan, legend; redrawn only when something changed. */

import { h } from "./dom";
import { formatBytes, formatCount, formatDuration, formatOffset } from "./format";
import { laneGeometry, LaneGeometry, rowAt } from "./lanes";
import { panBy, slidingWindow, TimeView, viewLimits, xToTime, zoomAt } from "./layout";
import { phaseColour, phaseLabel, rowOf } from "./phases";
import { spanAt } from "./spans";
import type { EventStore } from "./store";
import { drawTimeline } from "./timelineDraw";

const WINDOWS_S = [2, 5, 10, 30];
const DEFAULT_WINDOW_S = 10;
const LIVE_FRAME_MS = 100; // at most ~10 redraws a second while following a running cell
const HOVER_PX = 3;

export class TimelineView {
  readonly el = h("div", "jhvd-timeline-panel");
  private readonly canvas = h("canvas", "jhvd-timeline");
  private readonly wrap = h("div", "jhvd-canvas-wrap");
  private readonly tooltip = h("div", "jhvd-tooltip");
  private readonly windowSelect = h("select", "jhvd-window");
  private readonly pauseButton = h("button", "jhvd-pause", "Pause");
  private readonly saveButton = h("button", "jhvd-save", "Save trace");
  private readonly hint = h("span", "jhvd-muted");
  private readonly legend = h("div", "jhvd-legend");
  private readonly observer: ResizeObserver;
  private legendPhases = -1;

  private shifts: number[] = [];
  private rankCount = 0;
  private finished = false;
  private follow = true;
  private windowUs = DEFAULT_WINDOW_S * 1e6;
  private userView: TimeView | null = null;
  private drawn: { view: TimeView; geometry: LaneGeometry; origin: number } | null = null;
  private drag: { x: number } | null = null;
  private width = 0;
  private frame = 0;
  private timer = 0;
  private lastDraw = 0;

  constructor(
    private readonly store: EventStore,
    onSave: () => void,
  ) {
    for (const s of WINDOWS_S) {
      const option = h("option", "", `last ${s} s`);
      option.value = String(s);
      option.selected = s === DEFAULT_WINDOW_S;
      this.windowSelect.append(option);
    }
    this.canvas.dataset.spans = "";
    this.windowSelect.title = "Time window shown while following the running cell";
    this.pauseButton.title = "Stop following to zoom and pan";
    this.saveButton.title = "Download the timeline as a Chrome trace (Perfetto, chrome://tracing)";
    const toolbar = h("div", "jhvd-toolbar");
    toolbar.append(h("span", "jhvd-section-title", "Timeline"), this.windowSelect, this.pauseButton, this.saveButton, this.hint);
    this.wrap.append(this.canvas);
    this.el.append(toolbar, this.wrap, this.legend, this.tooltip);

    this.windowSelect.addEventListener("change", this.onWindow);
    this.pauseButton.addEventListener("click", this.onPause);
    this.saveButton.addEventListener("click", onSave);
    this.canvas.addEventListener("wheel", this.onWheel, { passive: false });
    this.canvas.addEventListener("mousedown", this.onMouseDown);
    this.canvas.addEventListener("mousemove", this.onHover);
    this.canvas.addEventListener("mouseleave", this.onLeave);
    this.canvas.addEventListener("dblclick", this.onDoubleClick);
    window.addEventListener("mousemove", this.onDragMove);
    window.addEventListener("mouseup", this.onDragEnd);
    this.observer = new ResizeObserver(() => {
      this.width = this.wrap.clientWidth;
      this.schedule();
    });
    this.observer.observe(this.wrap);
    this.updateControls();
  }

  /** Shifts onto rank 0's clock, the rank count and whether the cell is over; redraws only on a change. */
  setRun(shifts: number[], rankCount: number, finished: boolean): void {
    const changed =
      finished !== this.finished ||
      rankCount !== this.rankCount ||
      shifts.length !== this.shifts.length ||
      shifts.some((s, i) => s !== this.shifts[i]);
    if (!changed) return;
    this.shifts = shifts;
    this.rankCount = rankCount;
    this.finished = finished;
    this.updateControls();
    this.schedule();
  }

  /** The store changed. */
  changed(): void {
    this.schedule();
  }

  dispose(): void {
    cancelAnimationFrame(this.frame);
    clearTimeout(this.timer);
    this.observer.disconnect();
    window.removeEventListener("mousemove", this.onDragMove);
    window.removeEventListener("mouseup", this.onDragEnd);
  }

  private get interactive(): boolean {
    return this.finished || !this.follow;
  }

  private currentView(): TimeView | null {
    const bounds = this.store.bounds(this.shifts);
    if (!bounds) return null;
    if (!this.interactive) return slidingWindow(bounds.end_us, this.windowUs);
    return this.userView ?? viewLimits(bounds);
  }

  private limits(): TimeView | null {
    const bounds = this.store.bounds(this.shifts);
    return bounds && viewLimits(bounds);
  }

  private updateControls(): void {
    this.pauseButton.textContent = this.follow ? "Pause" : "Follow live";
    this.pauseButton.disabled = this.finished;
    this.windowSelect.disabled = this.interactive;
    this.hint.textContent = this.interactive
      ? "wheel: zoom · drag: pan · double-click: fit"
      : "following the newest events";
    this.el.dataset.interactive = String(this.interactive);
  }

  private schedule(): void {
    if (this.frame || this.timer) return;
    const wait = this.interactive ? 0 : LIVE_FRAME_MS - (performance.now() - this.lastDraw);
    if (wait > 0) {
      this.timer = window.setTimeout(() => {
        this.timer = 0;
        this.frame = requestAnimationFrame(this.draw);
      }, wait);
    } else {
      this.frame = requestAnimationFrame(this.draw);
    }
  }

  private readonly draw = (): void => {
    this.frame = 0;
    this.lastDraw = performance.now();
    this.updateLegend();
    const rankCount = Math.max(this.rankCount, this.store.ranks.length, 1);
    const geometry = laneGeometry(rankCount, this.store.rowCount);
    const width = this.width || this.wrap.clientWidth;
    if (width <= 0) return;
    const dpr = window.devicePixelRatio || 1;
    const pixelWidth = Math.round(width * dpr);
    const pixelHeight = Math.round(geometry.height * dpr);
    if (this.canvas.width !== pixelWidth || this.canvas.height !== pixelHeight) {
      this.canvas.width = pixelWidth;
      this.canvas.height = pixelHeight;
      this.canvas.style.height = `${geometry.height}px`;
    }
    const ctx = this.canvas.getContext("2d");
    if (!ctx) return;
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    const style = getComputedStyle(this.canvas);
    const paint = { text: style.color, grid: style.borderTopColor, font: style.fontFamily || "sans-serif" };
    const view = this.currentView();
    const origin = this.store.origin(this.shifts);
    if (!view || origin == null) {
      ctx.clearRect(0, 0, width, geometry.height);
      ctx.fillStyle = paint.text;
      ctx.font = `12px ${paint.font}`;
      ctx.fillText(this.finished ? "no timeline events" : "waiting for timeline events…", 8, 24);
      this.drawn = null;
      this.canvas.dataset.spans = "";
      return;
    }
    const counts = drawTimeline(ctx, { store: this.store, shifts: this.shifts, view, origin, geometry, width, paint });
    this.drawn = { view, geometry, origin };
    this.canvas.dataset.spans = counts.join(",");
  };

  private updateLegend(): void {
    const phases = [...new Set([...this.store.phases, ...this.store.otherPhases])];
    if (phases.length === this.legendPhases) return;
    this.legendPhases = phases.length;
    this.legend.replaceChildren(
      ...phases.map((phase) => {
        const item = h("span");
        const swatch = h("i", "jhvd-swatch");
        swatch.style.background = phaseColour(phase);
        item.append(swatch, phaseLabel(phase));
        return item;
      }),
    );
  }

  private plotX(event: MouseEvent): { x: number; y: number; plotWidth: number } | null {
    if (!this.drawn) return null;
    const box = this.canvas.getBoundingClientRect();
    const g = this.drawn.geometry;
    const plotWidth = box.width - g.labelWidth;
    const x = event.clientX - box.left - g.labelWidth;
    return plotWidth > 0 ? { x, y: event.clientY - box.top, plotWidth } : null;
  }

  private readonly onWindow = (): void => {
    this.windowUs = Number(this.windowSelect.value) * 1e6;
    this.schedule();
  };

  private readonly onPause = (): void => {
    if (this.follow) {
      this.userView = this.currentView();
      this.follow = false;
    } else {
      this.follow = true;
      this.userView = null;
    }
    this.updateControls();
    this.schedule();
  };

  private readonly onWheel = (event: WheelEvent): void => {
    const at = this.plotX(event);
    const limits = this.limits();
    const view = this.currentView();
    if (!this.interactive || !at || !limits || !view) return;
    event.preventDefault();
    const lines = event.deltaMode === 1 ? 16 : event.deltaMode === 2 ? 400 : 1;
    const factor = Math.exp(event.deltaY * lines * 0.0015);
    this.userView = zoomAt(view, at.plotWidth, Math.max(0, at.x), factor, limits);
    this.hideTooltip();
    this.schedule();
  };

  private readonly onMouseDown = (event: MouseEvent): void => {
    if (!this.interactive || event.button !== 0) return;
    event.preventDefault();
    this.drag = { x: event.clientX };
    this.canvas.classList.add("jhvd-dragging");
    this.hideTooltip();
  };

  private readonly onDragMove = (event: MouseEvent): void => {
    if (!this.drag) return;
    const at = this.plotX(event);
    const limits = this.limits();
    const view = this.currentView();
    if (!at || !limits || !view) return;
    this.userView = panBy(view, at.plotWidth, event.clientX - this.drag.x, limits);
    this.drag.x = event.clientX;
    this.schedule();
  };

  private readonly onDragEnd = (): void => {
    this.drag = null;
    this.canvas.classList.remove("jhvd-dragging");
  };

  private readonly onDoubleClick = (): void => {
    if (!this.interactive) return;
    this.userView = null;
    this.schedule();
  };

  private readonly onLeave = (): void => this.hideTooltip();

  private hideTooltip(): void {
    this.tooltip.style.display = "none";
  }

  private readonly onHover = (event: MouseEvent): void => {
    const at = this.plotX(event);
    if (this.drag || !at || !this.drawn || at.x < 0) return this.hideTooltip();
    const { view, geometry, origin } = this.drawn;
    const cell = rowAt(geometry, at.y);
    const events = cell && this.store.ranks[cell.rank];
    if (!cell || !events) return this.hideTooltip();
    const shift = this.shifts[cell.rank] ?? 0;
    const t = xToTime(view, at.plotWidth, at.x) - shift;
    const tolerance = (HOVER_PX * (view.end_us - view.start_us)) / at.plotWidth;
    const span = spanAt(events.spans, events.maxDur, t, tolerance, (s) => rowOf(s.phase) === cell.row);
    if (!span) return this.hideTooltip();
    const lines: [string, string][] = [
      ["phase", span.phase],
      ["op", span.op || "–"],
      ["rank", String(cell.rank)],
      ["start", formatOffset(span.start + shift - origin)],
      ["duration", formatDuration(span.dur)],
      ["bytes", formatBytes(span.bytes)],
    ];
    if (span.count > 1) lines.push(["merged", `${formatCount(span.count)} events`]);
    const title = h("b", "", span.name || span.phase);
    this.tooltip.replaceChildren(title, ...lines.flatMap(([k, v]) => [h("br"), `${k}: ${v}`]));
    this.tooltip.style.display = "block";
    // Placed in the panel, outside the scrolling canvas box, flipped to stay within the panel.
    const box = this.el.getBoundingClientRect();
    const x = event.clientX - box.left;
    const y = event.clientY - box.top;
    const { offsetWidth: tipWidth, offsetHeight: tipHeight } = this.tooltip;
    this.tooltip.style.left = `${Math.max(0, x + 12 + tipWidth > box.width ? x - tipWidth - 12 : x + 12)}px`;
    this.tooltip.style.top = `${Math.max(0, y + 12 + tipHeight > box.height ? y - tipHeight - 12 : y + 12)}px`;
  };
}
