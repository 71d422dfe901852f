"""The Mimi codec as one module: batched, streaming, one 80 ms frame per call.

`encode_step` and `decode_step` take each row's state explicitly and update it in place. Every
op is per row and has a static shape, so rows never influence one another (a row's result is the
same in any batch) and a step can be captured in a CUDA graph.
"""

from __future__ import annotations

import torch
from torch import nn

from liveplex.personaplex.mimi import config as mimi_config
from liveplex.personaplex.mimi import conv, quantizer, seanet, transformer
from liveplex.personaplex.mimi import state as mimi_state


class Mimi(nn.Module):
    """Mimi with parameters named exactly like the checkpoint's keys (spec §2.3)."""

    def __init__(self, cfg: mimi_config.MimiConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = seanet.Encoder(cfg)
        self.decoder = seanet.Decoder(cfg)
        self.encoder_transformer = transformer.Transformer(cfg)
        self.decoder_transformer = transformer.Transformer(cfg)
        self.downsample = conv.Downsample(cfg.dimension, cfg.downsample_stride)
        self.upsample = conv.Upsample(cfg.dimension, cfg.downsample_stride)
        self.quantizer = quantizer.SplitQuantizer(cfg)
        self.register_load_state_dict_post_hook(lambda module, _keys: module.refresh())

    @torch.no_grad()
    def refresh(self) -> None:
        """Recompute what is derived from the stored tensors (centroids, LayerScale-folded
        projections); after every load (`load_state_dict` does it by itself)."""
        self.quantizer.refresh()
        self.encoder_transformer.refresh()
        self.decoder_transformer.refresh()

    @property
    def device(self) -> torch.device:
        return self.downsample.conv.conv.conv.weight.device  # type: ignore[union-attr]

    def init_state(self, batch: int) -> mimi_state.MimiState:
        """Fresh state for `batch` rows on the model's device (fp32, zeros)."""
        device, cfg = self.device, self.cfg
        steps = cfg.downsample_stride  # 25 Hz latent steps per frame
        return mimi_state.MimiState(
            encoder=mimi_state.EncoderState(
                convs=self.encoder.init_states(batch, cfg.frame_samples, device),
                ring=self.encoder_transformer.init_ring(batch, device),
                down=torch.zeros(batch, *self.downsample.conv.state_shape(steps), device=device),
                started=torch.zeros(batch, dtype=torch.bool, device=device),
            ),
            decoder=mimi_state.DecoderState(
                up=torch.zeros(batch, *self.upsample.convtr.state_shape(), device=device),
                ring=self.decoder_transformer.init_ring(batch, device),
                convs=self.decoder.init_states(batch, steps, device),
            ),
        )

    @torch.no_grad()
    def encode_step(self, pcm: torch.Tensor, state: mimi_state.MimiState) -> torch.Tensor:
        """One frame per row: pcm [B, 1920] float in [-1, 1] -> codes [B, 8] int64.

        Updates `state.encoder` in place; `state` must have exactly B rows (use `head(B)`).
        """
        B, T = pcm.shape
        assert T == self.cfg.frame_samples, f"pcm must be [B, {self.cfg.frame_samples}], got {tuple(pcm.shape)}"
        enc = state.encoder
        assert enc.started.shape[0] == B, "state rows must equal the batch"
        latent = self.encoder.step(pcm[:, None, :], enc.convs)
        latent = self.encoder_transformer.step(latent, enc.ring)
        latent = self.downsample.step(latent, enc.down, enc.started)
        return self.quantizer.encode(latent)[:, :, 0]

    @torch.no_grad()
    def decode_step(self, codes: torch.Tensor, state: mimi_state.MimiState) -> torch.Tensor:
        """One frame per row: codes [B, 8] (ids < 2048) -> pcm [B, 1920] float, unclipped.

        Updates `state.decoder` in place.
        """
        B, Q = codes.shape
        assert Q == self.cfg.codebooks, f"codes must be [B, {self.cfg.codebooks}], got {tuple(codes.shape)}"
        dec = state.decoder
        assert dec.up.shape[0] == B, "state rows must equal the batch"
        latent = self.quantizer.decode(codes[:, :, None])
        latent = self.upsample.step(latent, dec.up)
        latent = self.decoder_transformer.step(latent, dec.ring)
        return self.decoder.step(latent, dec.convs)[:, 0, :]
