/**
 * The page's audio devices: the microphone into the capture worklet, the playout worklet out.
 *
 * One AudioContext per call at the device's own rate (the worklets convert to and from 24 kHz, so
 * no browser has to resample a MediaStream for us). Echo cancellation stays on: the echo engine
 * would otherwise hear itself through the speakers and loop.
 */

/** Capture chunk: 20 ms at 24 kHz, small enough to keep the uplink smooth. */
export const CHUNK_SAMPLES = 480;

/** Playout jitter buffer: start after 120 ms (one 80 ms frame plus 40 ms of jitter), cap 480 ms. */
export const PREBUFFER_MS = 120;
export const CAPACITY_MS = 480;

/** Loudness on the meters' 60 dB scale: 0 at -60 dBFS and below, 1 at full scale. @param {number} rms 0..1 */
export function loudness(rms) {
  return Math.max(0, Math.min(1, (20 * Math.log10(rms + 1e-9) + 60) / 60));
}

export class AudioLink {
  /**
   * Ask for the microphone and start both worklets. Must run inside a user gesture (autoplay).
   * @param {(pcm: Int16Array) => void} onChunk called with each 24 kHz capture chunk
   * @param {(report: {depthMs: number, underruns: number, dropped: number}) => void} onPlayout
   */
  static async open(onChunk, onPlayout) {
    const context = new AudioContext({ latencyHint: 'interactive' });
    try {
      const base = new URL('.', import.meta.url);
      await Promise.all([
        context.audioWorklet.addModule(new URL('capture-worklet.js', base)),
        context.audioWorklet.addModule(new URL('playout-worklet.js', base)),
      ]);
      const stream = await navigator.mediaDevices.getUserMedia({
        audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
      });
      return new AudioLink(context, stream, onChunk, onPlayout);
    } catch (error) {
      await context.close();
      throw error;
    }
  }

  constructor(context, stream, onChunk, onPlayout) {
    this.context = context;
    this.stream = stream;
    this.source = context.createMediaStreamSource(stream);
    this.capture = new AudioWorkletNode(context, 'liveplex-capture', {
      numberOfInputs: 1,
      numberOfOutputs: 0,
      processorOptions: { chunkSamples: CHUNK_SAMPLES },
    });
    this.capture.port.onmessage = (event) => onChunk(event.data);
    this.playout = new AudioWorkletNode(context, 'liveplex-playout', {
      numberOfInputs: 0,
      numberOfOutputs: 1,
      outputChannelCount: [1],
      processorOptions: { prebufferMs: PREBUFFER_MS, capacityMs: CAPACITY_MS },
    });
    this.playout.port.onmessage = (event) => onPlayout(event.data);
    this.source.connect(this.capture);
    this.playout.connect(context.destination);
  }

  /** Resume a context the autoplay policy left suspended. */
  async resume() {
    if (this.context.state === 'suspended') await this.context.resume();
  }

  /** Queue one model frame for playout. @param {Int16Array} pcm */
  play(pcm) {
    this.playout.port.postMessage(pcm, [pcm.buffer]);
  }

  /**
   * A level meter on `stream` (a WebRTC call's remote track, which an <audio> element plays):
   * `level()` reads its loudness now.
   */
  meter(stream) {
    const analyser = this.context.createAnalyser();
    analyser.fftSize = 2048;
    const source = this.context.createMediaStreamSource(stream);
    source.connect(analyser);
    const samples = new Float32Array(analyser.fftSize);
    return {
      level: () => {
        analyser.getFloatTimeDomainData(samples);
        let sum = 0;
        for (let i = 0; i < samples.length; i++) sum += samples[i] * samples[i];
        return loudness(Math.sqrt(sum / samples.length));
      },
      close: () => source.disconnect(),
    };
  }

  /** The stream has ended: play out what is queued without counting the end as a gap. */
  drain() {
    this.playout.port.postMessage({ drain: true });
  }

  /** Stop capture now (the mic light goes off); playback ends when the context closes. */
  stopCapture() {
    this.source.disconnect();
    this.capture.port.onmessage = null;
    for (const track of this.stream.getTracks()) track.stop();
  }

  async close() {
    this.stopCapture();
    this.playout.port.onmessage = null;
    await this.context.close();
  }
}
