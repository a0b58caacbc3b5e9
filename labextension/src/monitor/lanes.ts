/** Geometry of the timeline canvas: an axis band on top, then one lane per rank split into sub-rows. */

export interface LaneGeometry {
  /** Height of the axis band at the top. */
  axisHeight: number;
  /** Width of the rank label column on the left. */
  labelWidth: number;
  rowHeight: number;
  rowCount: number;
  laneHeight: number;
  laneGap: number;
  rankCount: number;
  /** Total canvas height in CSS pixels. */
  height: number;
}

const AXIS_HEIGHT = 20;
const LABEL_WIDTH = 56;
const TARGET_PLOT_HEIGHT = 320;
const MIN_ROW = 3;
const MAX_ROW = 10;

/** Rows shrink from 10 px towards 3 px as ranks are added, so a few ranks stay readable and many stay compact. */
export function laneGeometry(rankCount: number, rowCount: number): LaneGeometry {
  const ranks = Math.max(1, rankCount);
  const rowHeight = Math.min(MAX_ROW, Math.max(MIN_ROW, Math.floor(TARGET_PLOT_HEIGHT / (ranks * rowCount))));
  const laneHeight = rowHeight * rowCount;
  const laneGap = rowHeight >= 6 ? 6 : 2;
  return {
    axisHeight: AXIS_HEIGHT,
    labelWidth: LABEL_WIDTH,
    rowHeight,
    rowCount,
    laneHeight,
    laneGap,
    rankCount: ranks,
    height: AXIS_HEIGHT + ranks * (laneHeight + laneGap),
  };
}

/** Top y of a rank's lane. */
export function laneTop(g: LaneGeometry, rank: number): number {
  return g.axisHeight + rank * (g.laneHeight + g.laneGap) + g.laneGap / 2;
}

/** Top y of one sub-row of a rank's lane. */
export function rowTop(g: LaneGeometry, rank: number, row: number): number {
  return laneTop(g, rank) + row * g.rowHeight;
}

/** The rank and sub-row under a y coordinate, or null over the axis, a gap or below the last lane. */
export function rowAt(g: LaneGeometry, y: number): { rank: number; row: number } | null {
  const inPlot = y - g.axisHeight - g.laneGap / 2;
  if (inPlot < 0) return null;
  const pitch = g.laneHeight + g.laneGap;
  const rank = Math.floor(inPlot / pitch);
  const within = inPlot - rank * pitch;
  if (rank >= g.rankCount || within >= g.laneHeight) return null;
  return { rank, row: Math.floor(within / g.rowHeight) };
}
