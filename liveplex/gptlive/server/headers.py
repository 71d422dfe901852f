"""The headers a gateway's upstream upgrade carries to a pod (platform §7.4), written once."""

from __future__ import annotations

SESSION_ID = "X-Liveplex-Session-Id"
"""The id the gateway placed the session under; the pod starts the session with it, so the
reservation placement made is the one the session settles (matched case-insensitively)."""
POOL = "X-Liveplex-Pool"
"""The pool the session was placed in, for the pod's logs."""
