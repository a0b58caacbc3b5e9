/** The view's stylesheet, injected once per page; JupyterLab theme variables with light-theme fallbacks. */

const STYLE_ID = "jhvd-monitor-style";

const CSS = `
.jhvd-monitor {
  --jhvd-fg: var(--jp-ui-font-color1, #212121);
  --jhvd-fg2: var(--jp-ui-font-color2, #616161);
  --jhvd-border: var(--jp-border-color2, #e0e0e0);
  --jhvd-bg: var(--jp-layout-color1, #fff);
  --jhvd-bg2: var(--jp-layout-color2, #eee);
  --jhvd-accent: var(--jp-brand-color1, #1976d2);
  --jhvd-ok: var(--jp-success-color1, #388e3c);
  --jhvd-warn: var(--jp-warn-color1, #f57c00);
  --jhvd-error: var(--jp-error-color1, #d32f2f);
  font-family: var(--jp-ui-font-family, system-ui, -apple-system, "Segoe UI", sans-serif);
  font-size: var(--jp-ui-font-size1, 13px);
  color: var(--jhvd-fg);
  border: 1px solid var(--jhvd-border);
  border-radius: 4px;
  padding: 8px 10px;
  display: flex;
  flex-direction: column;
  gap: 8px;
  max-width: 100%;
  box-sizing: border-box;
}
.jhvd-header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 4px 14px; }
.jhvd-badge {
  font-weight: 600; font-size: 11px; text-transform: uppercase; letter-spacing: 0.04em;
  padding: 1px 7px; border-radius: 9px; color: #fff; background: var(--jhvd-accent);
}
.jhvd-monitor[data-state="finished"] .jhvd-badge { background: var(--jhvd-ok); }
.jhvd-monitor[data-state="failed"] .jhvd-badge { background: var(--jhvd-error); }
.jhvd-stat { white-space: nowrap; }
.jhvd-stat b { font-weight: 600; font-variant-numeric: tabular-nums; }
.jhvd-muted { color: var(--jhvd-fg2); }
.jhvd-section-title { font-size: 11px; font-weight: 600; color: var(--jhvd-fg2); text-transform: uppercase; letter-spacing: 0.04em; }
.jhvd-rates { display: grid; grid-template-columns: max-content 1fr max-content; gap: 3px 8px; align-items: center; }
.jhvd-rate, .jhvd-rate-total { display: contents; }
.jhvd-rate-label { white-space: nowrap; font-variant-numeric: tabular-nums; }
.jhvd-rate-track { position: relative; height: 12px; background: var(--jhvd-bg2); border-radius: 2px; overflow: hidden; }
.jhvd-rate-fill { height: 100%; width: 0; background: var(--jhvd-accent); border-radius: 2px; transition: width 0.3s ease-out; }
.jhvd-rate-total .jhvd-rate-fill { background: var(--jhvd-ok); }
.jhvd-rate[data-straggler="true"] .jhvd-rate-fill { background: var(--jhvd-warn); }
.jhvd-rate-ideal { position: absolute; top: 0; bottom: 0; width: 2px; background: var(--jhvd-fg2); }
.jhvd-rate-value { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; min-width: 11ch; }
.jhvd-rate-total .jhvd-rate-label, .jhvd-rate-total .jhvd-rate-value { font-weight: 600; }
.jhvd-straggler-tag { color: var(--jhvd-warn); font-size: 11px; font-weight: 600; margin-left: 4px; }
.jhvd-timeline-panel { position: relative; display: flex; flex-direction: column; gap: 4px; }
.jhvd-toolbar { display: flex; align-items: center; gap: 8px; flex-wrap: wrap; }
.jhvd-toolbar .jhvd-muted { font-size: 11px; margin-left: auto; }
.jhvd-toolbar button, .jhvd-toolbar select {
  font: inherit; font-size: 12px; color: var(--jhvd-fg); background: var(--jhvd-bg);
  border: 1px solid var(--jhvd-border); border-radius: 3px; padding: 1px 8px; cursor: pointer;
}
.jhvd-toolbar button:disabled, .jhvd-toolbar select:disabled { opacity: 0.5; cursor: default; }
.jhvd-canvas-wrap { position: relative; width: 100%; max-height: 520px; overflow-y: auto; overflow-x: hidden; }
.jhvd-timeline {
  display: block; width: 100%; cursor: default;
  color: var(--jhvd-fg2); border-color: var(--jhvd-border);
  font-family: var(--jp-ui-font-family, system-ui, sans-serif);
}
.jhvd-timeline-panel[data-interactive="true"] .jhvd-timeline { cursor: grab; }
.jhvd-timeline-panel[data-interactive="true"] .jhvd-timeline.jhvd-dragging { cursor: grabbing; }
.jhvd-tooltip {
  position: absolute; pointer-events: none; z-index: 2; display: none;
  background: var(--jhvd-bg); color: var(--jhvd-fg); border: 1px solid var(--jhvd-border);
  box-shadow: 0 2px 6px rgba(0, 0, 0, 0.2); border-radius: 3px; padding: 4px 7px;
  font-size: 11px; line-height: 1.4; white-space: nowrap; max-width: 420px; overflow: hidden; text-overflow: ellipsis;
}
.jhvd-tooltip b { font-weight: 600; }
.jhvd-legend { display: flex; flex-wrap: wrap; gap: 2px 12px; font-size: 11px; color: var(--jhvd-fg2); }
.jhvd-legend span { display: inline-flex; align-items: center; gap: 4px; }
.jhvd-swatch { width: 10px; height: 10px; border-radius: 2px; display: inline-block; }
.jhvd-health { display: flex; flex-direction: column; gap: 2px; font-size: 12px; }
.jhvd-health-list { max-height: 140px; overflow-y: auto; display: flex; flex-direction: column; gap: 1px; }
.jhvd-health-entry { font-family: var(--jp-code-font-family, monospace); font-size: 11px; white-space: pre-wrap; word-break: break-word; }
.jhvd-health-entry[data-kind="stall"] .jhvd-health-kind { color: var(--jhvd-warn); font-weight: 600; }
.jhvd-health-entry[data-kind="abort"] .jhvd-health-kind { color: var(--jhvd-error); font-weight: 600; }
.jhvd-failed {
  color: var(--jhvd-error); font-weight: 600; border-left: 3px solid var(--jhvd-error);
  padding: 3px 8px; background: rgba(211, 47, 47, 0.08); white-space: pre-wrap; word-break: break-word;
}
.jhvd-losses { font-size: 11px; color: var(--jhvd-fg2); }
`;

/** Adds the stylesheet to the document unless a view already did. */
export function injectStyles(doc: Document): void {
  if (doc.getElementById(STYLE_ID)) return;
  const style = doc.createElement("style");
  style.id = STYLE_ID;
  style.textContent = CSS;
  doc.head.appendChild(style);
}
