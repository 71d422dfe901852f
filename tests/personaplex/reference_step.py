"""The reference step machine (spec personaplex §3.2, §6.5), literally, on upstream's modules.

Batch 1, greedy, with the prompt of §4.3. It keeps the general token grid
G and the "given" marks S as dicts keyed by (stream, column), runs all 16 depformer steps, and
records everything a golden test compares: fed columns, logits, draws and emitted frames, and,
when given upstream's Mimi (`hear`), the caller codes it encoded with their nearest-centroid
margins and the PCM of every emitted agent frame. Mimi streams from fresh when the live audio
starts, as the reference resets its encoder after the prompt.
"""

from __future__ import annotations

import contextlib
import dataclasses

import torch

from liveplex.personaplex import config
from tests.personaplex import mimi_fixtures

D = config.DELAYS


@dataclasses.dataclass
class Record:
    fed: list[list[int]] = dataclasses.field(default_factory=list)
    text_logits: list[torch.Tensor] = dataclasses.field(default_factory=list)
    audio_logits: list[torch.Tensor] = dataclasses.field(default_factory=list)  # [16, card] per call
    draws: list[list[int]] = dataclasses.field(default_factory=list)  # text + agent cb0..7 (after forcing)
    emitted: list[list[int] | None] = dataclasses.field(default_factory=list)
    user_codes: list[list[int]] = dataclasses.field(default_factory=list)  # what Mimi encoded, per `hear`
    code_margins: list[torch.Tensor] = dataclasses.field(default_factory=list)  # [8] relative, per `hear`
    pcm: list[torch.Tensor] = dataclasses.field(default_factory=list)  # [1920] decoded agent frame, per `hear`


class Reference:
    """One session of the reference, from voice prompt to live calls."""

    def __init__(self, lm, voice: torch.Tensor | None = None, cache: torch.Tensor | None = None,
                 codec=None) -> None:  # codec: moshi MimiModel, for `hear`
        self.lm = lm
        self.codec = codec
        self.init = [lm.text_initial_token_id] + [lm.initial_token_id] * lm.n_q
        self.G: dict[tuple[int, int], int] = {}
        self.S: set[tuple[int, int]] = set()
        self.o = 0
        self.rec = Record()
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(torch.no_grad())
        self._stack.enter_context(lm.streaming(1))
        if codec is not None:
            self._stack.enter_context(codec.streaming(1))
        if voice is not None:
            assert cache is not None
            N = voice.shape[0]
            # As forward_text does internally: the embeddings go through the transformer directly.
            lm.transformer(voice[None].float())
            for k in range(17):
                for c in (N, N + 1):
                    if c == N or D[k] == 1:
                        self._give(k, c, int(cache[0, k, c % 4]))
            self.o = N + 1

    def close(self) -> None:
        self._stack.close()

    def _give(self, k: int, c: int, token: int) -> None:
        self.G[k, c] = token
        self.S.add((k, c))

    def prompt(self, role_ids: list[int]) -> None:
        """6 silence steps, L text steps, 6 silence steps (spec §4.3)."""
        for text in [config.TEXT_PAD] * 6 + list(role_ids) + [config.TEXT_PAD] * 6:
            self.step(user=list(config.SINE), agent=list(config.SILENCE), text=text)
        self.rec = Record()  # the prompt's draws are all discarded

    def step(self, user: list[int] | None = None, agent: list[int] | None = None,
             text: int | None = None) -> list[int] | None:
        """One reference call (spec §3.2), greedy: the engine is teacher-forced with these draws, so
        the reference itself never needs forcing."""
        o, lm = self.o, self.lm
        if text is not None:
            self._give(0, o, text)
        if agent is not None:
            for q in range(8):
                self._give(1 + q, o + D[1 + q], agent[q])
        if user is not None:
            for q in range(8):
                self._give(9 + q, o + D[9 + q], user[q])
        for k in range(17):
            if o <= D[k]:
                self._give(k, o, self.init[k])
        if o == 0:
            self.o = 1
            return None
        column = [self.G[k, o - 1] for k in range(17)]
        h, text_logits = lm.forward_text(torch.tensor(column).view(1, 17, 1))
        t = int(text_logits[0, 0, 0].argmax())
        if (0, o) in self.S:
            t = self.G[0, o]
        else:
            self.G[0, o] = t
        prev, draws, audio_logits = t, [t], []
        with lm.depformer.streaming(1):
            for s in range(16):
                logits = lm.forward_depformer(s, torch.tensor(prev).view(1, 1, 1), h)[0, 0, 0]
                audio_logits.append(logits.float())
                a = int(logits.argmax())
                if (1 + s, o) in self.S:
                    prev = self.G[1 + s, o]
                else:
                    prev = a
                    self.G[1 + s, o] = a
                if s < 8:
                    draws.append(prev)
        emitted = [self.G[k, o - 1 + D[k]] for k in range(17)] if o >= 2 else None
        self.rec.fed.append(column)
        self.rec.text_logits.append(text_logits[0, 0, 0].float())
        self.rec.audio_logits.append(torch.stack(audio_logits))
        self.rec.draws.append(draws)
        self.rec.emitted.append(emitted)
        self.o = o + 1
        return emitted

    def hear(self, pcm: torch.Tensor) -> list[int]:
        """One live call on a caller frame (pcm [1920]): Mimi encodes it, the step runs with those
        user codes, and the emitted agent frame is decoded."""
        latent = self.codec._encode_to_unquantized_latent(pcm.view(1, 1, -1))
        codes = self.codec.quantizer.encode(latent)
        self.rec.user_codes.append(codes[0, :, 0].tolist())
        self.rec.code_margins.append(mimi_fixtures.code_margins(self.codec, latent, codes)[0])
        emitted = self.step(user=codes[0, :, 0].tolist())
        assert emitted is not None, "hear() is for live calls, after the prompt"
        self.rec.pcm.append(self.codec.decode(torch.tensor(emitted[1:9]).view(1, 8, 1))[0, 0])
        return emitted
