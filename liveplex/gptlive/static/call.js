/**
 * One call over the GPT-Live socket: the page's side of the session states (gpt-live §3).
 *
 * `Call` owns the WebSocket. Commands go out through `start`, `send`, `mute` and `close`; what the
 * server says comes back as DOM events on the `Call` (an EventTarget), so the page wires its UI
 * without knowing the wire format:
 *
 *   state       {state}                 idle | connecting | ready | starting | live | closing
 *   started     {session}               the SessionResource of `session.started`
 *   audio       {pcm}                   one 80 ms model frame as 24 kHz Int16Array
 *   transcript  {text, startMs}         the agent's words, on the audio timeline
 *   usage       {seconds}               cumulative billed seconds
 *   muted       {muted}                 a mute or unmute ack
 *   problem     {code, message, retry}  an `error` event, or the socket failing
 *   closed      {reason, seconds}       the session is over
 *
 * `ready` means the socket is open without a session: after `server_busy` or a refused start the
 * same socket may send `session.start` again (gpt-live §8.3).
 *
 * A browser cannot set `Authorization` on a WebSocket: an API key travels as the subprotocol
 * `openai-insecure-api-key.KEY` (OpenAI's convention) next to `liveplex`, which the server selects.
 * A refused upgrade only shows as close 1006, so a failed connect with a key blames the key.
 */

import * as events from './events.js';

/** The server's close grace is 2 s (gpt-live §9.1); after this the page stops waiting. */
const CLOSE_WAIT_MS = 3000;

const PAGE_SUBPROTOCOL = 'liveplex';
const KEY_SUBPROTOCOL = 'openai-insecure-api-key.';
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/** Whether `key` can travel in a subprotocol (an HTTP token); others cannot leave a browser. */
export function sendableKey(key) {
  return TOKEN.test(key);
}

export class Call extends EventTarget {
  /** @param {string} url the `ws(s)://…/v1/live/sessions` endpoint */
  constructor(url) {
    super();
    this.url = url;
    this.socket = null;
    this.state = 'idle';
    this.startId = null;
    this.ended = false; // session.closed seen, or the socket failed
    this.closeTimer = null;
    this.transport = 'WebSocket';
  }

  /** Open the socket if needed (offering `key`, when given) and send `session.start`. */
  async start(settings, key = null) {
    if (this.state !== 'idle' && this.state !== 'ready') return;
    if (!this.socket) await this.connect(key);
    this.startId = events.eventId('start');
    this.ended = false;
    this.setState('starting');
    this.transmit(events.start(settings, this.startId));
  }

  /** Send caller audio; dropped unless the session is live. @param {Int16Array} pcm */
  send(pcm) {
    if (this.state === 'live') this.transmit(events.append(pcm));
  }

  mute(muted) {
    if (this.state !== 'live') return;
    this.transmit(muted ? events.mute(events.eventId('mute')) : events.unmute(events.eventId('unmute')));
  }

  /** Ask the server to end the session, then wait for `session.closed`. */
  close() {
    if (this.state === 'live') {
      this.setState('closing');
      this.transmit(events.close(events.eventId('close')));
      this.closeTimer = setTimeout(() => {
        this.problem('close_timeout', 'The server did not confirm the end of the call.', false);
        this.finish('close_requested', null);
      }, CLOSE_WAIT_MS);
    } else if (this.state === 'ready' || this.state === 'starting') {
      this.finish(null, null); // no session yet: just hang up (a pending start is dropped)
    }
  }

  connect(key) {
    this.setState('connecting');
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(this.url, key ? [PAGE_SUBPROTOCOL, KEY_SUBPROTOCOL + key] : []);
      this.socket = socket;
      socket.onopen = () => {
        this.setState('ready');
        resolve();
      };
      socket.onmessage = (message) => this.receive(JSON.parse(message.data));
      socket.onclose = (close) => {
        if (this.socket !== socket) return;
        this.socket = null;
        if (this.state === 'connecting') {
          this.setState('idle');
          reject(new Error(key
            ? 'the pod refused the connection: check the API key'
            : `cannot reach ${this.url} (close code ${close.code})`));
        } else if (!this.ended && this.state !== 'ready') {
          this.problem('connection_lost', `The connection dropped (close code ${close.code}).`, false);
          this.finish('connection_lost', null);
        } else {
          this.setState('idle');
        }
      };
    });
  }

  receive(event) {
    switch (event.type) {
      case 'session.output_audio.delta':
        this.emit('audio', { pcm: events.decodePcm16(event.delta) });
        break;
      case 'session.output_transcript.delta':
        this.emit('transcript', { text: event.delta, startMs: event.start_ms });
        break;
      case 'session.started':
        this.setState('live');
        this.emit('started', { session: event.session });
        break;
      case 'session.usage.updated':
        this.emit('usage', { seconds: event.usage.seconds });
        break;
      case 'session.paused':
      case 'session.resumed':
        this.emit('paused', { paused: event.type === 'session.paused' });
        break;
      case 'session.input_audio.muted':
      case 'session.input_audio.unmuted':
        this.emit('muted', { muted: event.type === 'session.input_audio.muted' });
        break;
      case 'session.closed':
        this.finish(event.reason, event.usage.seconds);
        break;
      case 'error':
        this.refuse(event);
        break;
      default:
        break; // `info` and anything newer: nothing to show
    }
  }

  refuse(event) {
    const { code, message } = event.error;
    if (this.state === 'starting' && event.client_event_id === this.startId) this.setState('ready');
    this.problem(code, message, code === 'server_busy');
  }

  /** The session is over: report it once, then let the server's close frame end the socket. */
  finish(reason, seconds) {
    clearTimeout(this.closeTimer);
    const hadSession = !this.ended && (this.state === 'live' || this.state === 'closing');
    this.ended = true;
    if (hadSession) this.emit('closed', { reason, seconds });
    if (this.socket) {
      const socket = this.socket;
      this.socket = null;
      socket.close(1000);
    }
    this.setState('idle');
  }

  transmit(event) {
    this.socket.send(JSON.stringify(event));
  }

  problem(code, message, retry) {
    this.emit('problem', { code, message, retry });
  }

  setState(state) {
    if (state === this.state) return;
    this.state = state;
    this.emit('state', { state });
  }

  emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail }));
  }
}
