/**
 * One call over WebRTC (docs/webrtc.md): the same `Call` to the page, another transport.
 *
 * The microphone's track goes out as Opus over RTP, the agent's audio comes back as a remote
 * track (the `remote` event carries its stream, for an <audio> element), and the protocol's events
 * cross the `oai-events` data channel, which is opened before the offer. The offer is posted to
 * `POST /v1/live/sessions` with the session (`client.live.create`'s body); the answer comes back
 * once the session started, and `session.started` is the channel's first message. A refused create
 * is an HTTP error body: `server_busy` leaves the call `ready` for a retry, a 401 blames the key,
 * and a server without WebRTC (501) or a browser without it is `WebRtcUnavailable`, so the page
 * falls back to the socket. Everything the server says is read by `Call.receive`.
 *
 * A live call whose media stops (no agent packet for `STALL_MS`: the agent sends one every 20 ms,
 * silence included) or whose connection fails is taken for lost at the server's end (its gateway
 * died): it re-offers on a new peer connection, the same microphone, to the same URL with
 * `?session_id=<id>&last_event_id=<the last event seen>`, which a load balancer sends to another
 * gateway; the session goes on there (docs/webrtc.md "Re-offer"). Meanwhile the call stays `live`;
 * a 404 (`session_not_found`: ended, or its park's window passed) ends it as `connection_lost`; a
 * 503 or no answer is tried again until `RECOVER_FOR_MS` passed. `reconnected` {gapMs} tells the
 * silence the caller heard, from the last agent packet before to the first after (to within
 * `WATCH_MS`).
 */

import { Call } from './call.js';
import * as events from './events.js';

/** How long ICE gathering may take before the offer goes with the candidates it has. */
const GATHER_MS = 2000;

/** No agent packet for this long on a live call: it is lost at the server's end. */
export const STALL_MS = 600;
/** How often the call's inbound packet count is read (`getStats`). */
const WATCH_MS = 50;
/** A re-offer answered but no packet this long after: re-offer again. */
const ANSWERED_WAIT_MS = 3000;
/** How long a lost call keeps re-offering: a pod keeps its session 15 s for its caller. */
const RECOVER_FOR_MS = 15000;
/** Between two re-offers that got no answer or a 503. */
const RETRY_MS = 250;

/** This server or browser has no WebRTC: use the WebSocket. */
export class WebRtcUnavailable extends Error {}

export function webRtcSupported() {
  return typeof RTCPeerConnection === 'function';
}

function gathered(pc) {
  return new Promise((resolve) => {
    if (pc.iceGatheringState === 'complete') return resolve();
    const timer = setTimeout(resolve, GATHER_MS);
    pc.addEventListener('icegatheringstatechange', () => {
      if (pc.iceGatheringState === 'complete') {
        clearTimeout(timer);
        resolve();
      }
    });
  });
}

/**
 * The STUN/TURN servers the server hands callers (`GET /v1/live/ice_servers`: its TURN server's
 * outside URLs, `turns:` on 443 where UDP is blocked, with a login minted for this call); none if
 * it hands none or cannot be asked (host candidates, as on loopback).
 */
async function iceServers(url, key) {
  const headers = key ? { Authorization: `Bearer ${key}` } : {};
  try {
    const response = await fetch(url.replace(/\/sessions$/, '/ice_servers'), { headers });
    return response.ok ? (await response.json()).ice_servers : [];
  } catch {
    return [];
  }
}

export class RtcCall extends Call {
  /** @param {string} url the `http(s)://…/v1/live/sessions` endpoint */
  constructor(url) {
    super(url);
    this.pc = null;
    this.channel = null;
    this.transport = 'WebRTC';
    this.sessionId = null;
    this.lastEventId = null; // the last server event seen: a re-offer is told the ones after it
    this.offered = null; // {settings, key, stream} of the start: a re-offer makes them again
    this.watch = null; // the inbound packet watch (an interval)
    this.heardAt = null; // performance.now() when the current call's packet count last grew
    this.lostAt = null; // when the call was taken for lost (re-offering since), or null
    this.answeredAt = null; // when a re-offer's answer was applied, until its first packets
    this.quiet = false; // the model is paused (`session.paused`): no agent packets, by design
  }

  /** A paused call's agent sends nothing (docs/pause.md), so its silence is not a lost gateway:
   * the stall watch waits while it is out, and counts again from its `session.resumed`. */
  receive(event) {
    if (event.type === 'session.paused' || event.type === 'session.resumed') {
      this.quiet = event.type === 'session.paused';
      this.heardAt = performance.now();
    }
    super.receive(event);
  }

  /** Make the offer with `stream`'s microphone track, post it, apply the answer. */
  async start(settings, key = null, stream = null) {
    if (this.state !== 'idle' && this.state !== 'ready') return;
    if (!webRtcSupported()) throw new WebRtcUnavailable('this browser has no WebRTC');
    this.ended = false;
    this.startId = null;
    this.sessionId = null;
    this.lastEventId = null;
    this.quiet = false;
    this.offered = { settings, key, stream };
    this.setState('connecting');
    let response;
    try {
      response = await this.offer(this.url);
    } catch (error) {
      this.hangUp();
      this.setState('idle');
      throw new Error(`cannot reach ${this.url} (${error.message})`);
    }
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      this.hangUp();
      const { code = `http_${response.status}`, message = response.statusText } = body.error ?? {};
      if (response.status === 501) {
        this.setState('idle');
        throw new WebRtcUnavailable(message);
      }
      if (response.status === 401) {
        this.setState('idle');
        throw new Error('the pod refused the call: check the API key');
      }
      this.setState(code === 'server_busy' ? 'ready' : 'idle');
      this.problem(code, message, code === 'server_busy');
      return;
    }
    this.setState('starting');
    this.sessionId = body.session.id;
    await this.pc.setRemoteDescription({ type: 'answer', sdp: body.transport.sdp });
    this.watchMedia();
  }

  /** A new peer connection with the start's microphone and a data channel, its offer posted to
   * `url`: the fetch's response (its pc is `this.pc`). */
  async offer(url) {
    const { settings, key, stream } = this.offered;
    const pc = new RTCPeerConnection({ iceServers: await iceServers(this.url, key) });
    this.pc = pc;
    const channel = pc.createDataChannel('oai-events');
    this.channel = channel;
    channel.onmessage = (message) => {
      const event = JSON.parse(message.data);
      if (event.event_id) this.lastEventId = event.event_id;
      this.receive(event);
    };
    channel.onclose = () => this.dropped(pc);
    pc.onconnectionstatechange = () => pc.connectionState === 'failed' && this.dropped(pc);
    pc.ontrack = (event) => this.emit('remote', { stream: event.streams[0] ?? new MediaStream([event.track]) });
    for (const track of stream.getAudioTracks()) pc.addTrack(track, stream);
    await pc.setLocalDescription(await pc.createOffer());
    await gathered(pc);
    const headers = { 'Content-Type': 'application/json' };
    if (key) headers.Authorization = `Bearer ${key}`;
    return fetch(url, {
      method: 'POST', headers,
      body: JSON.stringify({ session: events.mediaSession(settings),
                             transport: { type: 'webrtc', sdp: pc.localDescription.sdp } }),
    });
  }

  /** Read the current call's inbound packet count every `WATCH_MS`: a live call whose count stood
   * still for `STALL_MS` once it had begun is lost; the first packets of a re-offered call end the
   * gap, and a re-offer answered without any within `ANSWERED_WAIT_MS` is made again. */
  watchMedia() {
    clearInterval(this.watch);
    let counted = 0;
    let pc = null;
    let reading = false; // a getStats still pending: skip this turn
    this.heardAt = performance.now();
    this.watch = setInterval(async () => {
      if (this.pc !== pc) [pc, counted] = [this.pc, 0];
      if (!pc || this.ended || reading) return;
      let received = counted;
      reading = true;
      try {
        (await pc.getStats()).forEach((stat) => {
          if (stat.type === 'inbound-rtp' && stat.kind === 'audio') received = stat.packetsReceived;
        });
      } finally {
        reading = false;
      }
      if (pc !== this.pc) return;
      const now = performance.now();
      if (received > counted) {
        counted = received;
        if (this.lostAt !== null) {
          this.emit('reconnected', { gapMs: now - this.heardAt });
          this.lostAt = this.answeredAt = null;
        }
        this.heardAt = now;
      } else if (this.lostAt !== null) {
        if (this.answeredAt !== null && now - this.answeredAt > ANSWERED_WAIT_MS) this.reoffer();
      } else if (this.state === 'live' && counted > 0 && !this.quiet && now - this.heardAt > STALL_MS) {
        this.recover();
      }
    }, WATCH_MS);
  }

  /** The call is lost at the server's end: re-offer it. */
  recover() {
    if (this.lostAt !== null || this.ended || !this.sessionId) return;
    this.lostAt = performance.now();
    this.emit('reconnecting', {});
    this.reoffer();
  }

  /** Re-offer the session until a gateway answers, it is refused, or `RECOVER_FOR_MS` passed. */
  async reoffer() {
    this.answeredAt = null;
    while (!this.ended) {
      this.hangUp();
      const query = new URLSearchParams({ session_id: this.sessionId });
      if (this.lastEventId) query.set('last_event_id', this.lastEventId);
      let response = null;
      try {
        response = await this.offer(`${this.url}?${query}`);
      } catch {
        // no answer: another try
      }
      if (this.ended) return;
      if (response?.ok) {
        const body = await response.json();
        await this.pc.setRemoteDescription({ type: 'answer', sdp: body.transport.sdp });
        this.answeredAt = performance.now();
        return; // the watch ends the gap when packets come, or re-offers again
      }
      const refused = response && response.status !== 503;
      if (refused || performance.now() - this.lostAt > RECOVER_FOR_MS) {
        const { code = 'connection_lost', message = 'The call dropped.' } = refused
          ? (await response.json().catch(() => ({}))).error ?? {} : {};
        this.lostAt = this.answeredAt = null;
        this.problem(code, `The call dropped and could not be continued: ${message}`, false);
        this.finish('connection_lost', null);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }

  /** Caller audio travels as RTP: the capture worklet's chunks are only metered. */
  send() {}

  transmit(event) {
    if (this.channel?.readyState === 'open') this.channel.send(JSON.stringify(event));
  }

  /** The peer connection or its channel went away without `session.closed`: a live call is
   * re-offered (`recover`), a closing one is over. */
  dropped(pc) {
    if (this.pc !== pc || this.ended) return;
    if (this.state === 'live') {
      this.recover();
    } else if (this.state === 'closing') {
      this.problem('connection_lost', 'The call dropped.', false);
      this.finish('connection_lost', null);
    }
  }

  finish(reason, seconds) {
    super.finish(reason, seconds);
    clearInterval(this.watch);
    this.watch = null;
    this.hangUp();
  }

  hangUp() {
    const pc = this.pc;
    this.pc = null;
    this.channel = null;
    pc?.close();
  }
}
