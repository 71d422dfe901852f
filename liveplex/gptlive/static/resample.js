/**
 * A streaming sample-rate converter: audio in blocks of any size, the same output whatever the split.
 *
 * Band-limited interpolation with a Blackman-windowed sinc. Output sample k sits at input position
 * k * from / to; its phase is an exact fraction (integer arithmetic, so a 4-minute call never drifts)
 * and the kernels for every phase are tabulated once. When converting down, the sinc's cutoff drops
 * to the output's Nyquist so that nothing above it aliases into speech. Samples before the first
 * input are taken as silence, which delays the output by `halfTaps` input samples (under 1 ms).
 *
 * Pure: no Web Audio, no clock. Both AudioWorklets import it; the tests drive it directly.
 */

/** Half the kernel length in input samples: 16 gives ~-60 dB stopband, ample for speech. */
export const HALF_TAPS = 16;

/** Cutoff as a fraction of the lower Nyquist: leaves a transition band for a short kernel. */
const CUTOFF = 0.92;

function gcd(a, b) {
  while (b) [a, b] = [b, a % b];
  return a;
}

function blackman(x) {
  // x in [-1, 1]
  return 0.42 + 0.5 * Math.cos(Math.PI * x) + 0.08 * Math.cos(2 * Math.PI * x);
}

function sinc(x) {
  if (x === 0) return 1;
  const px = Math.PI * x;
  return Math.sin(px) / px;
}

export class Resampler {
  /**
   * @param {number} fromRate input rate in Hz (an integer)
   * @param {number} toRate output rate in Hz (an integer)
   * @param {number} halfTaps half the kernel length, in input samples
   */
  constructor(fromRate, toRate, halfTaps = HALF_TAPS) {
    if (!Number.isInteger(fromRate) || !Number.isInteger(toRate) || fromRate <= 0 || toRate <= 0) {
      throw new RangeError(`rates must be positive integers, got ${fromRate} -> ${toRate}`);
    }
    const g = gcd(fromRate, toRate);
    /** Input samples per output sample is step / phases, in lowest terms. */
    this.step = fromRate / g;
    this.phases = toRate / g;
    this.halfTaps = halfTaps;
    this.passthrough = fromRate === toRate;
    this.kernels = this.passthrough ? null : tabulate(this.step, this.phases, halfTaps);
    // Input history: buf[start..end) holds absolute input samples [base, base + end - start).
    this.buf = new Float32Array(4096);
    this.start = 0;
    this.end = halfTaps; // leading silence primes the kernel
    this.base = -halfTaps;
    this.received = 0; // absolute input samples seen
    this.produced = 0; // absolute output samples emitted
    this.out = new Float32Array(1024);
  }

  /**
   * Feed input samples; returns the output samples they complete.
   * The returned array is a view into a reused buffer, valid until the next call.
   * @param {Float32Array} input
   * @returns {Float32Array}
   */
  push(input) {
    if (this.passthrough) return input;
    this.append(input);
    const { step, phases, halfTaps, kernels, buf } = this;
    const taps = 2 * halfTaps;
    // Output k needs input samples up to floor(k * step / phases) + halfTaps.
    const ready = Math.ceil(((this.received - halfTaps) * phases) / step);
    const count = Math.max(0, ready - this.produced);
    if (this.out.length < count) this.out = new Float32Array(2 * count);
    const out = this.out;
    const bufBase = this.base - this.start; // absolute index of buf[0]
    for (let n = 0; n < count; n++) {
      const k = this.produced + n;
      const num = k * step;
      const i = Math.floor(num / phases);
      const phase = num - i * phases;
      const kernel = phase * taps;
      // Taps cover input samples i - halfTaps + 1 .. i + halfTaps.
      const first = i - halfTaps + 1 - bufBase;
      let acc = 0;
      for (let t = 0; t < taps; t++) acc += buf[first + t] * kernels[kernel + t];
      out[n] = acc;
    }
    this.produced += count;
    this.trim();
    return out.subarray(0, count);
  }

  append(input) {
    if (this.end + input.length > this.buf.length) {
      const live = this.end - this.start;
      if (live + input.length <= this.buf.length / 2) {
        this.buf.copyWithin(0, this.start, this.end);
      } else {
        const grown = new Float32Array(2 * (live + input.length));
        grown.set(this.buf.subarray(this.start, this.end));
        this.buf = grown;
      }
      this.start = 0;
      this.end = live;
    }
    this.buf.set(input, this.end);
    this.end += input.length;
    this.received += input.length;
  }

  trim() {
    // Keep from the first sample the next output needs.
    const i = Math.floor((this.produced * this.step) / this.phases);
    const keepFrom = i - this.halfTaps + 1;
    const drop = keepFrom - this.base;
    if (drop > 0) {
      this.start += drop;
      this.base += drop;
    }
  }
}

function tabulate(step, phases, halfTaps) {
  // Cutoff relative to the input's Nyquist: 1 when converting up, to/from when converting down.
  const fc = CUTOFF * Math.min(1, phases / step);
  const taps = 2 * halfTaps;
  const kernels = new Float32Array(phases * taps);
  for (let p = 0; p < phases; p++) {
    const frac = p / phases;
    let sum = 0;
    for (let t = 0; t < taps; t++) {
      // Tap t reads input i - halfTaps + 1 + t; its distance from the output position is x.
      const x = frac + halfTaps - 1 - t;
      const w = Math.abs(x) < halfTaps ? blackman(x / halfTaps) * sinc(fc * x) : 0;
      kernels[p * taps + t] = w;
      sum += w;
    }
    for (let t = 0; t < taps; t++) kernels[p * taps + t] /= sum; // unity gain at DC
  }
  return kernels;
}
