/**
 * The caller-side jitter buffer: model audio in as it arrives, out one render quantum at a time.
 *
 * Frames arrive every 80 ms with network jitter, while the audio device pulls 128 samples every
 * ~3 ms. Playout starts once `prebuffer` samples are queued; running dry while playing is a gap
 * (one underrun, silence, and a fresh prebuffer); past `capacity` the oldest samples are dropped so
 * that delay cannot grow without bound. The same rules as the server's jitter buffer
 * (live-contract §5), on float samples at the device rate.
 *
 * Pure: the playout AudioWorklet owns one; the tests drive it directly.
 */

export class Playout {
  /**
   * @param {number} capacity most samples held; older ones are dropped
   * @param {number} prebuffer samples queued before playing starts or resumes
   */
  constructor(capacity, prebuffer) {
    if (!(prebuffer > 0 && prebuffer <= capacity)) {
      throw new RangeError(`need 0 < prebuffer <= capacity, got ${prebuffer} and ${capacity}`);
    }
    this.capacity = capacity;
    this.prebuffer = prebuffer;
    this.ring = new Float32Array(capacity);
    this.head = 0; // index of the oldest sample
    this.depth = 0; // samples queued
    this.playing = false;
    /** Whether the stream has ended: running dry is then the end, not a gap. */
    this.draining = false;
    this.underruns = 0;
    this.dropped = 0; // samples dropped by the cap
    this.played = 0; // queued samples handed to the device
  }

  /** Queue samples, dropping the oldest past the capacity. @param {Float32Array} samples */
  push(samples) {
    let input = samples;
    if (input.length > this.capacity) {
      this.dropped += input.length - this.capacity;
      input = input.subarray(input.length - this.capacity);
    }
    const excess = this.depth + input.length - this.capacity;
    if (excess > 0) {
      this.head = (this.head + excess) % this.capacity;
      this.depth -= excess;
      this.dropped += excess;
    }
    const tail = (this.head + this.depth) % this.capacity;
    const first = Math.min(input.length, this.capacity - tail);
    this.ring.set(input.subarray(0, first), tail);
    this.ring.set(input.subarray(first), 0);
    this.depth += input.length;
    this.draining = false;
  }

  /** Mark the end of the stream: what is queued still plays, even below the prebuffer. */
  drain() {
    this.draining = true;
    if (this.depth > 0) this.playing = true;
  }

  /** Fill `out` with the next samples, or silence. @param {Float32Array} out */
  pull(out) {
    if (!this.playing && this.depth >= this.prebuffer) this.playing = true;
    let n = 0;
    if (this.playing) {
      n = Math.min(out.length, this.depth);
      const first = Math.min(n, this.capacity - this.head);
      out.set(this.ring.subarray(this.head, this.head + first), 0);
      out.set(this.ring.subarray(0, n - first), first);
      this.head = (this.head + n) % this.capacity;
      this.depth -= n;
      this.played += n;
      if (n < out.length) {
        if (!this.draining) this.underruns += 1;
        this.playing = false;
      }
    }
    out.fill(0, n);
  }
}
