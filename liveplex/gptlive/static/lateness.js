/**
 * Caller-side lateness of model frames against their slot on the 80 ms timeline.
 *
 * The n-th `session.output_audio.delta` is frame n (gpt-live §6.2), so it is due at
 * origin + 80 ms * n. The origin is the earliest arrival seen for any frame (the minimum of
 * arrival - 80 ms * n), so lateness is never negative, does not hinge on the first frame being
 * on time, and measures exactly the delay a jitter buffer must absorb. Percentiles are over the
 * last `window` frames, so a slow start does not pin the figure for the rest of the call.
 *
 * Pure: arrival times come in as arguments (ms, any monotonic clock).
 */

export class Lateness {
  /**
   * @param {number} frameMs the frame period in ms
   * @param {number} window how many recent frames the percentiles cover
   */
  constructor(frameMs, window) {
    this.frameMs = frameMs;
    this.window = window;
    this.frames = 0;
    this.origin = Infinity;
    this.offsets = new Float64Array(window); // arrival - frameMs * n, a ring
  }

  /** Record the arrival of the next frame at `nowMs`. */
  arrive(nowMs) {
    const offset = nowMs - this.frameMs * this.frames;
    this.offsets[this.frames % this.window] = offset;
    this.frames += 1;
    if (offset < this.origin) this.origin = offset;
  }

  /** The q-quantile (0..1) of lateness in ms over the window, or null before any frame. */
  quantile(q) {
    const n = Math.min(this.frames, this.window);
    if (n === 0) return null;
    const sorted = this.offsets.slice(0, n).sort();
    const rank = Math.min(n - 1, Math.ceil(q * n) - 1);
    return sorted[Math.max(0, rank)] - this.origin;
  }
}
