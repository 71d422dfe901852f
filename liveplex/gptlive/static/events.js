/**
 * The GPT-Live wire format as the page speaks it: client events and 24 kHz s16le audio in base64.
 *
 * gpt-live §4 and §6. Pure functions over plain values; `call.js` is the only user of the socket.
 */

/** The engine's rate and frame (live-contract §2.1): every byte on the wire is at this rate. */
export const SAMPLE_RATE = 24000;
export const FRAME_MS = 80;
export const FORMAT = Object.freeze({ type: 'audio/pcm', rate: SAMPLE_RATE });

let counter = 0;

/** A fresh client event id, so replies and errors can be matched to the command. */
export function eventId(prefix) {
  counter += 1;
  return `${prefix}_${Date.now().toString(36)}_${counter}`;
}

/**
 * `session.start`: instructions and voice are omitted when empty so the server default applies.
 * @param {{model: string, instructions?: string, voice?: string}} settings
 */
export function start(settings, id) {
  const session = mediaSession({ ...settings, wake: false }); // a socket's start refuses the wake fields
  session.audio = { ...session.audio, format: FORMAT };
  return { type: 'session.start', event_id: id, session };
}

/** Seconds of quiet after which a "wake on speech" call's model pauses (`idle_timeout_s`). */
export const WAKE_IDLE_S = 5;

/** The session of a WebRTC create (`MediaSessionConfig`): no format, the transport negotiates it.
 * With `settings.wake`, the model waits for the caller's speech and pauses after `WAKE_IDLE_S` of
 * quiet (`wake_policy`, `idle_timeout_s`: docs/pause.md); a socket's start has no such fields. */
export function mediaSession(settings) {
  const session = { model: settings.model };
  if (settings.wake) Object.assign(session, { wake_policy: { type: 'speech' }, idle_timeout_s: WAKE_IDLE_S });
  if (settings.instructions && settings.instructions.trim()) session.instructions = settings.instructions;
  if (settings.voice) session.audio = { output: { voice: settings.voice } };
  return session;
}

/** `session.input_audio.append` of s16le samples. @param {Int16Array} samples */
export function append(samples) {
  return { type: 'session.input_audio.append', audio: encodePcm16(samples) };
}

export function mute(id) {
  return { type: 'session.input_audio.mute', event_id: id };
}

export function unmute(id) {
  return { type: 'session.input_audio.unmute', event_id: id };
}

export function close(id) {
  return { type: 'session.close', event_id: id };
}

/** Float samples in [-1, 1] to s16 with clipping. @param {Float32Array} samples */
export function toPcm16(samples) {
  const out = new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i]));
    out[i] = Math.round(s < 0 ? s * 32768 : s * 32767);
  }
  return out;
}

/** s16 samples to float in [-1, 1). @param {Int16Array} samples */
export function toFloat(samples) {
  const out = new Float32Array(samples.length);
  for (let i = 0; i < samples.length; i++) out[i] = samples[i] / 32768;
  return out;
}

/** s16 samples to base64 of little-endian bytes (the wire's order whatever the host's). */
export function encodePcm16(samples) {
  const bytes = new Uint8Array(samples.length * 2);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < samples.length; i++) view.setInt16(2 * i, samples[i], true);
  return toBase64(bytes);
}

/** base64 of little-endian s16 bytes to samples; a trailing odd byte is ignored. */
export function decodePcm16(text) {
  const bytes = fromBase64(text);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Int16Array(bytes.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = view.getInt16(2 * i, true);
  return out;
}

function toBase64(bytes) {
  if (bytes.toBase64) return bytes.toBase64();
  let binary = '';
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

function fromBase64(text) {
  if (Uint8Array.fromBase64) return Uint8Array.fromBase64(text);
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}
