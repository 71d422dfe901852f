/**
 * The demo page: settings from `/live/config`, one call at a time, transcript, live stats.
 *
 * Wires the DOM to a call, an `AudioLink` (microphone and speaker worklets), a `Lateness`
 * tracker and the `/live/stats` poller. The call is an `RtcCall` (WebRTC: the microphone's track
 * as Opus, the agent's audio as a remote track played by an <audio> element) when `/live/config`
 * lists `webrtc` among the server's `transports` and the browser has WebRTC, unless the page was
 * opened with `?transport=websocket`; else a `Call` over the socket, whose frames go through the
 * worklets. A create the server still refuses with 501 (a replica without WebRTC behind the same
 * address) falls back to the socket within the same click, the microphone kept. A WebRTC call
 * whose gateway vanished re-offers by itself (`RtcCall.recover`); the page says so, and shows the
 * gap the caller heard (`#stat-reconnect` and a line in the transcript). Everything shown is
 * derived here; the modules it uses know nothing about the page.
 */

import { AudioLink, loudness } from './audio.js';
import { Call, sendableKey } from './call.js';
import { FRAME_MS } from './events.js';
import { Lateness } from './lateness.js';
import { RtcCall, WebRtcUnavailable, webRtcSupported } from './rtc-call.js';
import * as sparkline from './sparkline.js';
import * as stats from './stats.js';

const STATS_PERIOD_MS = 1000;
const SPARK_SLOTS = 60; // one minute of 1 s polls
const LATENESS_WINDOW = 250; // frames: the last 20 s

const $ = (id) => document.getElementById(id);
const ui = {
  model: $('model'),
  status: $('status'),
  keyField: $('key-field'),
  apiKey: $('api-key'),
  voice: $('voice'),
  persona: $('persona'),
  personaCount: $('persona-count'),
  start: $('start'),
  mute: $('mute'),
  end: $('end'),
  micLevel: $('mic-level'),
  agentLevel: $('agent-level'),
  clock: $('clock'),
  billed: $('billed'),
  sessionId: $('session-id'),
  problem: $('problem'),
  problemText: $('problem-text'),
  retry: $('retry'),
  transcript: $('transcript'),
  late: $('stat-late'),
  buffer: $('stat-buffer'),
  gaps: $('stat-gaps'),
  sessions: $('stat-sessions'),
  tick: $('stat-tick'),
  lateTicks: $('stat-late-ticks'),
  spark: $('spark'),
  transport: $('stat-transport'),
  reconnect: $('stat-reconnect'),
  agentAudio: $('agent-audio'),
  wakeField: $('wake-field'),
  wake: $('wake'),
  engineState: $('engine-state'),
};

const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
const socketUrl = `${scheme}://${location.host}/v1/live/sessions`;
const rtcWanted = new URLSearchParams(location.search).get('transport') !== 'websocket' && webRtcSupported();
let call = new Call(socketUrl); // until `/live/config` says whether the server takes WebRTC calls
let meter = null; // the agent's level off the remote track (WebRTC)
let liveSince = null; // performance.now() at session.started
let config = null;
let link = null; // AudioLink of the current call
let draining = false; // the call is over and the speaker is playing out its queue
let lateness = new Lateness(FRAME_MS, LATENESS_WINDOW);
let frames = 0;
let playout = { depthMs: null, underruns: 0, dropped: 0 };
let turn = null; // the transcript paragraph of the current call
let muted = false;
let starting = false; // inside startCall: a transport's own `idle` on the way is not the call's end
let lastStats = null;
let wakeAsked = false; // the current call's create asked to wait for speech (its resource does not say)
const tickHistory = [];

// ---- settings ---------------------------------------------------------------------------------

async function loadConfig() {
  const response = await fetch('/live/config');
  if (!response.ok) throw new Error(`GET /live/config answered ${response.status}`);
  config = await response.json();
  if (rtcWanted && (config.transports ?? []).includes('webrtc')) {
    use(new RtcCall(`${location.protocol}//${location.host}/v1/live/sessions`));
  }
  ui.model.textContent = config.model;
  ui.keyField.hidden = !config.api_key_required;
  ui.voice.replaceChildren(
    ...config.voices.map((name) => new Option(name, name, name === config.voice, name === config.voice)),
  );
  ui.persona.value = config.instructions;
  ui.persona.placeholder = config.instructions;
  countPersona();
  showWake();
}

/** "Wake on speech" is offered only where it can work: a WebRTC call (the fields are a call's,
 * docs/webrtc.md) to a server whose `/live/config` says it can pause (`pauses`); else a server
 * would refuse the create by name. */
function showWake() {
  ui.wakeField.hidden = !(config?.pauses && call.transport === 'WebRTC');
  setControls();
}

/** The server counts Unicode code points (gpt-live §5.1); `maxlength` would count UTF-16 units. */
function countPersona() {
  if (!config) return;
  const used = [...ui.persona.value].length;
  const over = used > config.max_instructions_chars;
  ui.personaCount.textContent = `${used} / ${config.max_instructions_chars}`;
  ui.persona.setAttribute('aria-invalid', String(over));
  ui.personaCount.classList.toggle('over', over);
  setControls();
}

/** The settings a start sends; remembers whether they ask the model to wait for speech. */
function settings() {
  wakeAsked = ui.wake.checked && !ui.wakeField.hidden;
  return { model: config.model, instructions: ui.persona.value, voice: ui.voice.value, wake: wakeAsked };
}

// ---- call controls ----------------------------------------------------------------------------

/** The key to offer, or why there is none to offer on a pod that needs one. */
function apiKey() {
  if (!config.api_key_required) return { key: null, problem: null };
  const key = ui.apiKey.value.trim();
  if (!key) return { key, problem: 'This pod needs an API key: enter it above.' };
  if (!sendableKey(key)) return { key, problem: 'This key has characters a browser cannot send.' };
  return { key, problem: null };
}

async function startCall() {
  clearProblem();
  const { key, problem } = apiKey();
  if (problem) {
    showProblem(problem, false);
    ui.apiKey.focus();
    return;
  }
  ui.start.disabled = true;
  starting = true;
  try {
    if (!link) {
      link = await AudioLink.open(onChunk, onPlayout);
      resetCallStats();
    }
    await link.resume();
    try {
      await call.start(settings(), key, link.stream);
    } catch (error) {
      if (!(error instanceof WebRtcUnavailable)) throw error;
      use(new Call(socketUrl)); // this server has no WebRTC: the socket, from now on
      showWake();
      await call.start(settings(), key);
    }
  } catch (error) {
    showProblem(error.name === 'NotAllowedError'
      ? 'Microphone access was refused: allow it in the browser to talk.'
      : `Could not start the call: ${error.message}`, false);
    await closeAudio();
  } finally {
    starting = false;
    setControls();
  }
}

/** Make `next` the page's call: its events wired, its transport shown. */
function use(next) {
  call = next;
  wire(call);
  ui.transport.textContent = call.transport;
  document.body.dataset.call = call.state;
}

function resetCallStats() {
  lateness = new Lateness(FRAME_MS, LATENESS_WINDOW);
  frames = 0;
  playout = { depthMs: null, underruns: 0, dropped: 0 };
  muted = false;
  ui.clock.textContent = '0:00';
  ui.billed.textContent = '0.0 s';
  ui.sessionId.textContent = '—';
  ui.reconnect.textContent = '—';
  showEngine(null);
}

/** Whether the model hears the caller: `listening`, `paused` (out of the batch until speech, a
 * wake-on-speech call's state before its first words too), or null between calls. */
function showEngine(state) {
  ui.engineState.textContent = state ?? '—';
  if (state) document.body.dataset.engine = state;
  else delete document.body.dataset.engine;
}

function onChunk(pcm) {
  ui.micLevel.value = level(pcm);
  call.send(pcm);
}

function onPlayout(report) {
  playout = report;
  if (draining && report.depthMs === 0) closeAudio();
}

async function closeAudio() {
  const closing = link;
  link = null;
  meter?.close();
  meter = null;
  ui.agentAudio.srcObject = null;
  draining = false;
  ui.micLevel.value = 0;
  ui.agentLevel.value = 0;
  setControls();
  if (closing) await closing.close();
}

/** The loudness of a chunk, for the level meters. */
function level(pcm) {
  let sum = 0;
  for (let i = 0; i < pcm.length; i++) sum += pcm[i] * pcm[i];
  return loudness(Math.sqrt(sum / Math.max(1, pcm.length)) / 32768);
}

/** A call's events to the page, while it is the page's call (a replaced one is ignored). */
function wire(target) {
  const on = (type, handler) => target.addEventListener(type, (event) => target === call && handler(event));
  on('state', (event) => {
    const { state } = event.detail;
    document.body.dataset.call = state;
    ui.status.textContent = {
      idle: 'Idle', connecting: 'Connecting…', ready: 'Not started', starting: 'Starting…',
      live: 'Live', closing: 'Ending…',
    }[state];
    ui.status.className = `pill ${state}`;
    // never started: nothing to play out (but a start in progress closes it itself, if it fails)
    if (state === 'idle' && link && !draining && !starting) closeAudio();
    setControls();
  });

  on('started', (event) => {
    liveSince = performance.now();
    // a wake policy's call starts waiting for speech: its first `session.resumed` says it runs
    showEngine(wakeAsked ? 'paused' : 'listening');
    ui.sessionId.textContent = event.detail.session.id;
    turn = document.createElement('p');
    turn.className = 'turn';
    const stamp = document.createElement('span');
    stamp.className = 'stamp';
    stamp.textContent = new Date().toLocaleTimeString();
    const words = document.createElement('span');
    words.className = 'words';
    turn.append(stamp, words);
    ui.transcript.querySelector('.placeholder')?.remove();
    ui.transcript.append(turn);
  });

  on('audio', (event) => {
    const { pcm } = event.detail;
    lateness.arrive(performance.now());
    frames += 1;
    ui.agentLevel.value = level(pcm);
    if (Math.floor((frames * FRAME_MS) / 1000) > Math.floor(((frames - 1) * FRAME_MS) / 1000)) {
      ui.clock.textContent = clock(frames * FRAME_MS); // once per second of the audio timeline
    }
    link?.play(pcm);
  });

  on('transcript', (event) => {
    if (!turn) return;
    turn.querySelector('.words').textContent += event.detail.text;
    ui.transcript.scrollTop = ui.transcript.scrollHeight;
  });

  on('usage', (event) => {
    ui.billed.textContent = `${event.detail.seconds.toFixed(1)} s`;
  });

  on('paused', (event) => {
    showEngine(event.detail.paused ? 'paused' : 'listening');
  });

  on('muted', (event) => {
    muted = event.detail.muted;
    setControls();
  });

  on('problem', (event) => {
    const { code, message, retry } = event.detail;
    showProblem(code === 'server_busy' ? `The pod is full: ${message}` : `${message} (${code})`, retry);
  });

  on('closed', (event) => {
    const { reason, seconds } = event.detail;
    if (seconds !== null) ui.billed.textContent = `${seconds.toFixed(1)} s`;
    note('ended', `call ended: ${reason.replaceAll('_', ' ')}`);
    turn = null;
    showEngine(null);
    if (link) {
      draining = true;
      link.stopCapture();
      link.drain();
    }
    document.body.dataset.ended = reason;
  });

  on('reconnecting', () => {
    ui.status.textContent = 'Reconnecting…';
    note('reconnecting', 'the call dropped: reconnecting…');
  });

  on('reconnected', (event) => {
    const gap = `${(event.detail.gapMs / 1000).toFixed(2)} s`;
    ui.status.textContent = 'Live';
    ui.reconnect.textContent = gap;
    turn?.querySelector('.reconnecting')?.remove();
    note('reconnected', `reconnected: a gap of ${gap}`);
    document.body.dataset.gapMs = event.detail.gapMs.toFixed(0);
  });

  on('remote', (event) => {
    meter?.close(); // a re-offered call's new track replaces the old one
    ui.agentAudio.srcObject = event.detail.stream;
    ui.agentAudio.play().catch(() => {});
    meter = link ? link.meter(event.detail.stream) : null;
  });
}

/** A small line in the current call's transcript paragraph. */
function note(kind, text) {
  const line = document.createElement('span');
  line.className = kind;
  line.textContent = text;
  turn?.append(line);
}

function setControls() {
  const state = call.state;
  const personaOk = ui.persona.getAttribute('aria-invalid') !== 'true';
  ui.start.disabled = !config || !personaOk || !(state === 'idle' || state === 'ready') || draining;
  ui.voice.disabled = ui.persona.disabled = ui.apiKey.disabled = ui.wake.disabled = !(state === 'idle' || state === 'ready');
  ui.mute.disabled = state !== 'live';
  ui.end.disabled = !(state === 'live' || state === 'ready' || state === 'starting');
  ui.mute.setAttribute('aria-pressed', String(muted));
  ui.mute.textContent = muted ? 'Unmute' : 'Mute';
}

function showProblem(text, retry) {
  ui.problemText.textContent = text;
  ui.retry.hidden = !retry;
  ui.problem.hidden = false;
}

function clearProblem() {
  ui.problem.hidden = true;
  ui.retry.hidden = true;
}

function clock(ms) {
  const s = Math.floor(ms / 1000);
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

// ---- live stats -------------------------------------------------------------------------------

async function pollStats() {
  try {
    // a keyed server shows its stats to key holders only: the key typed above, once there is one
    const { key } = apiKey();
    const headers = key && sendableKey(key) ? { Authorization: `Bearer ${key}` } : {};
    const response = await fetch('/live/stats', { headers, signal: AbortSignal.timeout(STATS_PERIOD_MS) });
    if (response.ok) {
      const snapshot = await response.json();
      showPod(stats.interval(lastStats, snapshot));
      lastStats = snapshot;
    }
  } catch {
    lastStats = null; // the pod is unreachable: show the caller side only
  }
  showCaller();
  setTimeout(pollStats, STATS_PERIOD_MS);
}

function showPod(figures) {
  ui.sessions.textContent = `${figures.sessions} / ${figures.maxSessions}`;
  ui.tick.textContent = figures.tickMs === null ? '—' : `${figures.tickMs.toFixed(2)} ms`;
  ui.lateTicks.textContent = String(figures.lateTicks);
  tickHistory.push(figures.tickMs);
  if (tickHistory.length > SPARK_SLOTS) tickHistory.shift();
  sparkline.draw(ui.spark, tickHistory, figures.frameMs, SPARK_SLOTS);
}

/** The page's own playout figures; a WebRTC call's audio is played by the browser's own jitter
 * buffer, whose figures the page does not see: shown as —. */
function showCaller() {
  const own = call.transport !== 'WebRTC';
  const p99 = lateness.quantile(0.99);
  ui.late.textContent = p99 === null ? '—' : `${p99.toFixed(0)} ms`;
  ui.buffer.textContent = playout.depthMs === null || !own ? '—' : `${playout.depthMs.toFixed(0)} ms`;
  ui.gaps.textContent = own ? String(playout.underruns) : '—';
}

// ---- wiring -----------------------------------------------------------------------------------

ui.persona.addEventListener('input', countPersona);
ui.start.addEventListener('click', startCall);
ui.retry.addEventListener('click', startCall);
ui.mute.addEventListener('click', () => call.mute(!muted));
ui.end.addEventListener('click', () => call.close());
use(call);

loadConfig().catch((error) => showProblem(`Cannot load the pod's settings: ${error.message}`, false));
pollStats();
setInterval(() => { // a WebRTC call has no frames to count: its meter and clock run on the page's time
  if (!meter) return;
  ui.agentLevel.value = meter.level();
  if (liveSince !== null && call.state === 'live') ui.clock.textContent = clock(performance.now() - liveSince);
}, 100);
