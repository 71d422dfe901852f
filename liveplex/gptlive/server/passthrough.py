"""`Passthrough`: a socket whose session an upstream server runs and talks to the client about itself,
sans I/O.

A gateway's socket runs the protocol machine (`connection.Connection`) up to the start; once its
upstream pod answers `session.started` (relayed), `Connection.started_upstream` ends the
machine's part and this one takes the socket: frames go both ways verbatim, and it only decides
how the session ends on the client's side. Its inputs are the ends of a relayed session:

- `ended`: the upstream's `session.closed` was relayed; the socket closes as the upstream's did;
- `lost`: the upstream went away without ending the session (platform §7.8): `server_error`
  saying why, `session.closed` `connection_lost`, 1011;
- `disconnect`: the client left (`remote_hangup`);
- `shutdown`: the server stops (`server_shutdown`, told as `connection_lost`, 1001: gpt-live §9.2).

Like `Connection` it returns the commands to perform and appends the session's `Ended` to
`outcomes`, which the pump takes after each input. The session time in what it says is that of
the audio deltas relayed (`frames`, which the pump counts as it relays them): the upstream counts
usage, the relay only repeats it. A pod never enters this machine.
"""

from __future__ import annotations

from liveplex.gptlive import connection, errors, events

SERVICE_RESTART = 1012
"""The close that tells a client to reconnect (RFC 6455's "service restart"; the SDK retries it)."""


class Passthrough:
    """The passed-through session of one socket; see the module docstring."""

    def __init__(self, handoff: connection.Handoff, frames: int = 0) -> None:
        self._resource = handoff.resource
        self._info = handoff.info
        self.frames = frames
        """Audio deltas relayed to the client, counted by the pump as it relays them (from the
        session's own count, for a session continued on this socket)."""
        self.done = False
        self.outcomes: list[connection.Outcome] = []
        """The session's `Ended`, once; the pump takes it after the input that ended it."""

    @property
    def reading(self) -> bool:
        """Whether the pump reads the client (to forward it): while the session runs."""
        return not self.done

    def ended(self, reason: str, code: int = connection.NORMAL) -> list[connection.Command]:
        """The upstream's `session.closed` (with `reason`) was relayed, and its socket closed
        with `code`: the client's socket closes the same way."""
        if self.done:
            return []
        self._end(reason)
        return [connection.Close(code), connection.Release()]

    def lost(self, why: str) -> list[connection.Command]:
        """The upstream ended mid-session without ending it: the client hears `why`, and
        `connection_lost`."""
        if self.done:
            return []
        return [connection.Send(events.Error(errors.server_error(why), None)),
                *self._closed(connection.INTERNAL_ERROR, "connection_lost")]

    def disconnect(self) -> list[connection.Command]:
        """The client is gone: let go of the upstream."""
        if self.done:
            return []
        self._end("remote_hangup")
        return [connection.Release()]

    def handed_back(self) -> list[connection.Command]:
        """The server is stopping and the session is not: close 1012 with no word, so the client
        reconnects through another server and continues it there (docs/continuity.md "Re-attach")."""
        if self.done:
            return []
        self._end("handed_back")
        return [connection.Close(SERVICE_RESTART), connection.Release()]

    def shutdown(self) -> list[connection.Command]:
        """The server is stopping: the session ends as `server_shutdown` (gpt-live §9.2)."""
        if self.done:
            return []
        return [connection.Send(events.Error(errors.server_shutdown(), None)),
                *self._closed(connection.GOING_AWAY, "server_shutdown")]

    def _closed(self, code: int, counted: str) -> list[connection.Command]:
        """`session.closed` `connection_lost` as the client hears it, counted as `counted`, and
        the close with `code`."""
        seconds = connection.usage_seconds(self._info, self.frames)
        self._end(counted)
        closed = events.SessionClosed("connection_lost", self._resource, seconds, None)
        return [connection.Send(closed), connection.Close(code), connection.Release()]

    def _end(self, reason: str) -> None:
        self.done = True
        self.outcomes.append(connection.session_ended(reason, self._resource, self._info, self.frames))


class Pending:
    """A socket that continues a running session (a caller's re-attach, docs/continuity.md) until its
    upstream answers: nothing is read meanwhile (what the caller sends waits, then goes on with the
    session), and no session is counted here: it started on another socket."""

    reading = False

    def __init__(self) -> None:
        self.outcomes: list[connection.Outcome] = []

    def disconnect(self) -> list[connection.Command]:
        return [connection.Release()]

    def shutdown(self) -> list[connection.Command]:
        return [connection.Close(connection.GOING_AWAY), connection.Release()]
