/** Throughput bars: one per rank and a total, stragglers marked. */

import { rateBars } from "./bars";
import { h } from "./dom";
import { formatRate } from "./format";
import type { Summary } from "./types";

interface BarRow {
  row: HTMLElement;
  label: HTMLElement;
  fill: HTMLElement;
  value: HTMLElement;
}

function barRow(className: string): BarRow & { track: HTMLElement } {
  const row = h("div", className);
  const label = h("span", "jhvd-rate-label");
  const track = h("div", "jhvd-rate-track");
  const fill = h("div", "jhvd-rate-fill");
  const value = h("span", "jhvd-rate-value");
  track.append(fill);
  row.append(label, track, value);
  return { row, label, fill, value, track };
}

function setBar(bar: BarRow, value: number | null, fraction: number): void {
  bar.row.dataset.rate = value == null ? "" : String(value);
  bar.fill.style.width = `${(fraction * 100).toFixed(2)}%`;
  bar.value.textContent = formatRate(value);
}

export class Throughput {
  readonly el = h("div", "jhvd-throughput");
  private readonly grid = h("div", "jhvd-rates");
  private readonly rows: BarRow[] = [];
  private readonly total = barRow("jhvd-rate-total");
  private readonly ideal = h("div", "jhvd-rate-ideal");

  constructor() {
    this.total.label.textContent = "total";
    this.total.track.append(this.ideal);
    this.grid.append(this.total.row);
    this.el.append(h("div", "jhvd-section-title", "Throughput (samples/s)"), this.grid);
  }

  update(summary: Summary): void {
    const bars = rateBars(summary);
    while (this.rows.length < bars.ranks.length) {
      const bar = barRow("jhvd-rate");
      this.grid.insertBefore(bar.row, this.total.row);
      this.rows.push(bar);
    }
    while (this.rows.length > bars.ranks.length) this.rows.pop()?.row.remove();
    bars.ranks.forEach((b, i) => {
      const bar = this.rows[i];
      bar.row.dataset.rank = String(b.rank);
      bar.row.dataset.straggler = String(b.straggler);
      bar.label.replaceChildren(`rank ${b.rank}`);
      if (b.straggler) bar.label.append(h("span", "jhvd-straggler-tag", "straggler"));
      setBar(bar, b.value, b.fraction);
    });
    setBar(this.total, bars.total.value, bars.total.fraction);
    const ideal = bars.total.idealFraction;
    this.ideal.style.display = ideal == null ? "none" : "";
    this.ideal.style.left = `calc(${((ideal ?? 0) * 100).toFixed(2)}% - 2px)`;
    this.ideal.title = bars.total.ideal == null ? "" : `ideal: ${formatRate(bars.total.ideal)} (ranks × baseline)`;
  }
}
