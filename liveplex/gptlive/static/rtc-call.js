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
 */

import { Call } from './call.js';
import * as events from './events.js';

/** How long ICE gathering may take before the offer goes with the candidates it has. */
const GATHER_MS = 2000;

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
  }

  /** Make the offer with `stream`'s microphone track, post it, apply the answer. */
  async start(settings, key = null, stream = null) {
    if (this.state !== 'idle' && this.state !== 'ready') return;
    if (!webRtcSupported()) throw new WebRtcUnavailable('this browser has no WebRTC');
    this.ended = false;
    this.startId = null;
    this.setState('connecting');
    const pc = new RTCPeerConnection({ iceServers: await iceServers(this.url, key) });
    this.pc = pc;
    const channel = pc.createDataChannel('oai-events');
    this.channel = channel;
    channel.onmessage = (message) => this.receive(JSON.parse(message.data));
    channel.onclose = () => this.dropped(pc);
    pc.onconnectionstatechange = () => pc.connectionState === 'failed' && this.dropped(pc);
    pc.ontrack = (event) => this.emit('remote', { stream: event.streams[0] ?? new MediaStream([event.track]) });
    for (const track of stream.getAudioTracks()) pc.addTrack(track, stream);
    await pc.setLocalDescription(await pc.createOffer());
    await gathered(pc);
    const headers = { 'Content-Type': 'application/json' };
    if (key) headers.Authorization = `Bearer ${key}`;
    let response;
    try {
      response = await fetch(this.url, {
        method: 'POST', headers,
        body: JSON.stringify({ session: events.mediaSession(settings),
                               transport: { type: 'webrtc', sdp: pc.localDescription.sdp } }),
      });
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
    await pc.setRemoteDescription({ type: 'answer', sdp: body.transport.sdp });
  }

  /** Caller audio travels as RTP: the capture worklet's chunks are only metered. */
  send() {}

  transmit(event) {
    if (this.channel?.readyState === 'open') this.channel.send(JSON.stringify(event));
  }

  /** The peer connection or its channel went away without `session.closed`. */
  dropped(pc) {
    if (this.pc !== pc || this.ended) return;
    if (this.state === 'live' || this.state === 'closing') {
      this.problem('connection_lost', 'The call dropped.', false);
      this.finish('connection_lost', null);
    }
  }

  finish(reason, seconds) {
    super.finish(reason, seconds);
    this.hangUp();
  }

  hangUp() {
    const pc = this.pc;
    this.pc = null;
    this.channel = null;
    pc?.close();
  }
}
