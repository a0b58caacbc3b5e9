/** Merging spans narrower than a pixel into one rect, so a draw costs O(width), not O(events). */

export type EmitRect = (x0: number, x1: number) => void;

/**
 * Takes the spans of one phase in one sub-row, in start order, as pixel intervals. A span joins the
 * pending rect when it starts within a pixel of the rect's end and either it or the last span joined
 * is narrower than a pixel; wide spans that are apart stay separate rects.
 */
export class Coalescer {
  private x0 = 0;
  private x1 = 0;
  private open = false;
  private narrowTail = false;

  constructor(
    private readonly emit: EmitRect,
    private readonly pixel = 1,
  ) {}

  push(x0: number, x1: number): void {
    const narrow = x1 - x0 < this.pixel;
    if (this.open && x0 - this.x1 < this.pixel && (narrow || this.narrowTail)) {
      this.x1 = Math.max(this.x1, x1);
      this.narrowTail = narrow;
      return;
    }
    this.flush();
    this.open = true;
    this.x0 = x0;
    this.x1 = x1;
    this.narrowTail = narrow;
  }

  flush(): void {
    if (!this.open) return;
    this.open = false;
    this.emit(this.x0, this.x1);
  }
}
