/**
 * The speaker AudioWorklet: 24 kHz s16 model frames in from the page, device-rate audio out.
 *
 * Runs on the audio thread. Frames arrive as transferred Int16Arrays; they are resampled to the
 * device rate and queued in a `Playout` jitter buffer, which the render callback drains 128 samples
 * at a time. About ten times a second the node reports the buffer depth and counters back to the
 * page for the live stats.
 *
 * Messages in: an Int16Array (one frame), or `{drain: true}` when the session has ended.
 * Messages out: `{depthMs, underruns, dropped}`.
 */

import { Playout } from './playout.js';
import { Resampler } from './resample.js';
import { SAMPLE_RATE, toFloat } from './events.js';

const REPORT_S = 0.1;

class PlayoutProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    const { prebufferMs, capacityMs } = options.processorOptions;
    this.playout = new Playout(
      Math.round((capacityMs * sampleRate) / 1000),
      Math.round((prebufferMs * sampleRate) / 1000),
    );
    this.resampler = new Resampler(SAMPLE_RATE, sampleRate);
    this.nextReport = 0;
    this.port.onmessage = (event) => {
      if (event.data instanceof Int16Array) this.playout.push(this.resampler.push(toFloat(event.data)));
      else if (event.data.drain) this.playout.drain();
    };
  }

  process(inputs, outputs) {
    const channels = outputs[0];
    this.playout.pull(channels[0]);
    for (let c = 1; c < channels.length; c++) channels[c].set(channels[0]);
    if (currentTime >= this.nextReport) {
      this.nextReport = currentTime + REPORT_S;
      this.port.postMessage({
        depthMs: (this.playout.depth * 1000) / sampleRate,
        underruns: this.playout.underruns,
        dropped: this.playout.dropped,
      });
    }
    return true;
  }
}

registerProcessor('liveplex-playout', PlayoutProcessor);
