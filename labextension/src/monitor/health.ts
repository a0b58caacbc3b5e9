/** Engine health: the failure line, stall and abort entries (newest last) and event losses. */

import { eventLosses, lossLine } from "./counts";
import { h } from "./dom";
import { HealthEntry, runState, Summary } from "./types";

/** A time label for a health entry (its rank's clock, µs), or "" when the timeline has no origin yet. */
export type TimeLabel = (rank: number, at_us: number) => string;

function sameEntry(a: HealthEntry, b: HealthEntry): boolean {
  return a.rank === b.rank && a.kind === b.kind && a.at_us === b.at_us && a.message === b.message;
}

export class HealthPanel {
  readonly el = h("div", "jhvd-health");
  private readonly failed = h("div", "jhvd-failed");
  private readonly title = h("div", "jhvd-section-title", "Engine health");
  private readonly list = h("div", "jhvd-health-list");
  private readonly empty = h("div", "jhvd-muted", "no stalls or aborts");
  private readonly losses = h("div", "jhvd-losses");
  private shown: HealthEntry[] = [];
  private origin: number | null = null;

  constructor(private readonly timeLabel: TimeLabel) {
    this.el.append(this.failed, this.title, this.list, this.empty, this.losses);
  }

  /** `origin` is the timeline's origin the time labels count from; entries are relabelled when it moves. */
  update(summary: Summary, health: HealthEntry[], browserDropped: number, origin: number | null): void {
    const failed = runState(summary) === "failed";
    this.failed.style.display = failed ? "" : "none";
    if (failed) {
      const who = summary.failed_rank != null ? `Rank ${summary.failed_rank} failed` : "The cell failed";
      this.failed.textContent = summary.error ? `${who}: ${summary.error}` : who;
    }
    if (origin !== this.origin) {
      this.origin = origin;
      this.shown = [];
      this.list.replaceChildren();
    }
    if (health !== this.shown) this.showEntries(health);
    const line = lossLine(eventLosses(summary, browserDropped));
    this.losses.textContent = line;
    this.losses.style.display = line ? "" : "none";
  }

  private showEntries(health: HealthEntry[]): void {
    const atBottom = this.list.scrollTop + this.list.clientHeight >= this.list.scrollHeight - 4;
    const reuse = health.length >= this.shown.length && this.shown.every((e, i) => sameEntry(e, health[i]));
    if (!reuse) this.list.replaceChildren();
    for (const entry of health.slice(reuse ? this.shown.length : 0)) {
      const row = h("div", "jhvd-health-entry");
      row.dataset.kind = entry.kind;
      row.dataset.rank = String(entry.rank);
      const when = this.timeLabel(entry.rank, entry.at_us);
      row.append(
        h("span", "jhvd-health-kind", entry.kind),
        ` rank ${entry.rank}${when ? ` at ${when}` : ""}: ${entry.message}`,
      );
      this.list.append(row);
    }
    this.shown = health;
    this.empty.style.display = health.length ? "none" : "";
    if (atBottom) this.list.scrollTop = this.list.scrollHeight;
  }
}
