"""WebRTC calls (GPT-Live's browser and mobile transport) in the server layer pods and gateways
share: `POST /v1/live/sessions` with an SDP offer (`route`), read strictly (`offer`), served by a
`call.Call` beside the WebSocket pump, with its audio as Opus over RTP (`media`) and its events on
the `oai-events` data channel (`channel`). aiortc and PyAV are the `webrtc` extra; without them
the route answers 501. docs/webrtc.md.
"""
