/**
 * The microphone AudioWorklet: device-rate float audio in, 24 kHz s16 chunks out to the page.
 *
 * Runs on the audio thread. Each 128-sample render quantum is mixed to mono, resampled to the
 * engine's 24 kHz and gathered into fixed chunks (`chunkSamples`, 20 ms by default) that are
 * transferred, not copied, to the main thread, which sends them as `session.input_audio.append`.
 * The node has no outputs: Chrome pulls output-less worklet nodes on its own.
 */

import { Resampler } from './resample.js';
import { SAMPLE_RATE, toPcm16 } from './events.js';

class CaptureProcessor extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.chunkSamples = options.processorOptions.chunkSamples;
    this.resampler = new Resampler(sampleRate, SAMPLE_RATE);
    this.mono = new Float32Array(128);
    this.chunk = new Float32Array(this.chunkSamples);
    this.filled = 0;
  }

  process(inputs) {
    const channels = inputs[0];
    if (channels.length === 0) return true; // source not started yet
    const frames = channels[0].length;
    if (this.mono.length !== frames) this.mono = new Float32Array(frames);
    this.mono.set(channels[0]);
    for (let c = 1; c < channels.length; c++) {
      for (let i = 0; i < frames; i++) this.mono[i] += channels[c][i];
    }
    if (channels.length > 1) for (let i = 0; i < frames; i++) this.mono[i] /= channels.length;

    const out = this.resampler.push(this.mono);
    let read = 0;
    while (read < out.length) {
      const n = Math.min(out.length - read, this.chunkSamples - this.filled);
      this.chunk.set(out.subarray(read, read + n), this.filled);
      this.filled += n;
      read += n;
      if (this.filled === this.chunkSamples) {
        const pcm = toPcm16(this.chunk);
        this.port.postMessage(pcm, [pcm.buffer]);
        this.filled = 0;
      }
    }
    return true;
  }
}

registerProcessor('liveplex-capture', CaptureProcessor);
