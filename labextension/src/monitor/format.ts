/** Number, duration and size formatting for labels and tooltips. */

const oneDecimal = new Intl.NumberFormat("en-US", { minimumFractionDigits: 1, maximumFractionDigits: 1 });

/** A value rounded the way it is shown (one decimal), as a number. */
export function shownRate(value: number | null | undefined): number | null {
  return value == null || !Number.isFinite(value) ? null : Math.round(value * 10) / 10;
}

/** "1,234.5/s", or an en dash when unknown. */
export function formatRate(value: number | null | undefined): string {
  const shown = shownRate(value);
  return shown == null ? "–" : `${oneDecimal.format(shown)}/s`;
}

/** A duration in µs with a unit that keeps three significant figures: "850 µs", "12.3 ms", "1.25 s". */
export function formatDuration(us: number): string {
  const abs = Math.abs(us);
  if (abs < 1e3) return `${abs < 10 ? us.toFixed(1) : Math.round(us)} µs`;
  if (abs < 1e6) return `${(us / 1e3).toPrecision(3)} ms`;
  return `${(us / 1e6).toPrecision(3)} s`;
}

/** Bytes in binary units: "512 B", "4.0 KiB", "25.3 MiB". */
export function formatBytes(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** Elapsed wall time: "12.3 s", "2 min 05 s". */
export function formatElapsed(seconds: number): string {
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  const whole = Math.floor(seconds);
  return `${Math.floor(whole / 60)} min ${String(whole % 60).padStart(2, "0")} s`;
}

/** A count with thousands separators. */
export function formatCount(n: number): string {
  return n.toLocaleString("en-US");
}

/** A time since the timeline's origin: "12.346 s". */
export function formatOffset(us: number, decimals = 3): string {
  return `${(us / 1e6).toFixed(decimals)} s`;
}
