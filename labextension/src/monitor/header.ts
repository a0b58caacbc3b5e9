/** The header line: run state, elapsed time, total throughput and scaling efficiency. */

import { h } from "./dom";
import { formatElapsed, formatRate } from "./format";
import { runState, Summary } from "./types";

const NO_BASELINE = "no baseline: run the cell with -np 1 or pass --baseline";

/** The efficiency text for a summary. */
export function efficiencyText(summary: Summary): string {
  const baseline = summary.baseline;
  if (!baseline) return NO_BASELINE;
  const ranks = summary.ranks?.length ?? 0;
  const of = `${ranks} × ${formatRate(baseline.samples_per_s)} (${baseline.source})`;
  if (summary.efficiency == null) return `scaling efficiency not measured yet; baseline ${of}`;
  return `scaling efficiency ${Math.round(summary.efficiency * 100)}% of ${of}`;
}

export class Header {
  readonly el = h("div", "jhvd-header");
  private readonly badge = h("span", "jhvd-badge");
  private readonly elapsed = h("span", "jhvd-stat");
  private readonly total = h("span", "jhvd-stat");
  private readonly efficiency = h("span", "jhvd-stat jhvd-muted");

  constructor() {
    this.el.append(this.badge, this.elapsed, this.total, this.efficiency);
  }

  update(summary: Summary): void {
    const state = runState(summary);
    this.badge.textContent =
      state === "failed" && summary.failed_rank != null ? `failed on rank ${summary.failed_rank}` : state;
    this.elapsed.textContent = formatElapsed(summary.elapsed_s ?? 0);
    const finished = state !== "running";
    const total = finished
      ? (summary.mean_total_samples_per_s ?? summary.total_samples_per_s)
      : summary.total_samples_per_s;
    this.total.replaceChildren(h("b", "", formatRate(total ?? null)), ` samples${finished ? " (mean)" : ""}`);
    this.efficiency.textContent = efficiencyText(summary);
  }
}
