"""`History`: every column a session fed the model, from its first prompt column on.

A handover ships it and the importing engine rebuilds the session's KV ring from it by prefill
(docs/continuity.md): the ring holds keys of a sliding window, but each key depends on everything
before it through the layers, so only the whole history rebuilds it exactly. 34 bytes a frame
(17 ids as uint16), kept to `MAX_HISTORY_CONTEXTS` windows: past that the session runs on, and
can no longer be moved.
"""

from __future__ import annotations

import numpy as np

from liveplex.personaplex import config

MAX_HISTORY_CONTEXTS = 2
"""A history holds at most this many context windows of columns (6000 frames, 204 KB, at 3000)."""


class History:
    """Columns fed at positions `first`, `first + 1`, ...; grows by doubling up to its cap."""

    __slots__ = ("first", "cap", "_cols", "_n")

    def __init__(self, first: int, columns: np.ndarray, context: int) -> None:
        self.first = first
        """Position of the first column (the voice's frames come before it: their KV is the voice's)."""
        self.cap = MAX_HISTORY_CONTEXTS * context
        self._n = len(columns)
        self._cols = np.empty((min(self.cap, max(2 * self._n, 256)), config.NUM_STREAMS), np.uint16)
        self._cols[:self._n] = columns

    @property
    def full(self) -> bool:
        """The cap was reached: the history stopped, the session can no longer be moved."""
        return self._n > self.cap

    def append(self, column: np.ndarray) -> None:
        """One tick's fed column (17 ids); past the cap the history is only counted."""
        n = self._n
        if n < len(self._cols):
            self._cols[n] = column
        elif n < self.cap:
            grown = np.empty((min(self.cap, 2 * n), config.NUM_STREAMS), np.uint16)
            grown[:n] = self._cols[:n]
            grown[n] = column
            self._cols = grown
        self._n = n + 1

    def columns(self) -> np.ndarray:
        """[n, 17] uint16: the columns so far (a view), while not `full`."""
        assert not self.full, "a full history is not kept"
        return self._cols[:self._n]
