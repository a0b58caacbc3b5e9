/** The %%hvd live monitor view (anywidget ESM): header, throughput bars, engine timeline and health. */

import { clockShifts } from "./clock";
import { eventLosses } from "./counts";
import { h } from "./dom";
import { formatOffset } from "./format";
import { Header } from "./header";
import { HealthPanel } from "./health";
import { downloadJson } from "./save";
import { EventStore } from "./store";
import { injectStyles } from "./styles";
import { Throughput } from "./throughput";
import { TimelineView } from "./timelineView";
import { toChromeTrace } from "./trace";
import { HealthEntry, runState, Summary, TimelineColumns, WidgetModel } from "./types";

function render({ model, el }: { model: WidgetModel; el: HTMLElement }): () => void {
  injectStyles(el.ownerDocument);
  const store = new EventStore();
  let summary: Summary = {};
  let shifts: number[] = [];

  const summaryOf = (): Summary => (model.get("summary") as Summary | null) ?? {};
  const healthOf = (): HealthEntry[] => (model.get("health") as HealthEntry[] | null) ?? [];
  const timelineOf = (): TimelineColumns => (model.get("timeline") as TimelineColumns | null) ?? {};

  const saveTrace = (): void => {
    const losses = eventLosses(summary, store.dropped);
    const trace = toChromeTrace({
      ranks: store.ranks.map((r) => r.spans),
      shifts,
      rowCount: store.rowCount,
      otherData: {
        cell: summary.cell ?? "",
        events_merged: losses.merged,
        events_dropped: losses.dropped,
        batches_lost: losses.lostBatches,
        browser_dropped: store.dropped,
        health_omitted: summary.health_omitted ?? 0,
      },
    });
    downloadJson(trace, "hvd-trace.json");
  };

  const root = h("div", "jhvd-monitor");
  const header = new Header();
  const throughput = new Throughput();
  const timeline = new TimelineView(store, saveTrace);
  const health = new HealthPanel((rank, at_us) => {
    const origin = store.origin(shifts);
    return origin == null ? "" : formatOffset(at_us + (shifts[rank] ?? 0) - origin);
  });
  root.append(header.el, throughput.el, timeline.el, health.el);
  el.append(root);

  const showHealth = (): void => health.update(summary, healthOf(), store.dropped, store.origin(shifts));

  const onSummary = (): void => {
    summary = summaryOf();
    const ranks = summary.ranks ?? [];
    const state = runState(summary);
    shifts = clockShifts(ranks.map((r) => r.clock_offset_us));
    root.dataset.state = state;
    root.dataset.ranks = String(Math.max(ranks.length, store.ranks.length));
    header.update(summary);
    throughput.update(summary);
    timeline.setRun(shifts, ranks.length, state !== "running");
    showHealth();
  };

  const ingest = (data: TimelineColumns): void => {
    store.ingest(data);
    root.dataset.ranks = String(Math.max(summary.ranks?.length ?? 0, store.ranks.length));
    timeline.changed();
    showHealth();
  };

  const onTimeline = (): void => {
    const data = timelineOf();
    if (store.empty && (data.ranks?.length ?? 0) > 0) ingest(data);
  };

  const onMessage = (content: { type?: string; timeline?: TimelineColumns }): void => {
    if (content?.type === "events" && content.timeline) ingest(content.timeline);
  };

  model.on("change:summary", onSummary);
  model.on("change:health", showHealth);
  model.on("change:timeline", onTimeline);
  model.on("msg:custom", onMessage);
  onSummary();
  onTimeline();

  return () => {
    model.off("change:summary", onSummary);
    model.off("change:health", showHealth);
    model.off("change:timeline", onTimeline);
    model.off("msg:custom", onMessage);
    timeline.dispose();
    root.remove();
  };
}

export default { render };
