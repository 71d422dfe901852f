"""`liveplex personaplex make-tiny DIR` writes a directory that loads and steps."""

from __future__ import annotations

import sentencepiece
import torch

from liveplex import cli
from liveplex.personaplex import checkpoint, config, mimi, prefill, prompt, sampling, step


@torch.no_grad()
def test_make_tiny_output_loads_and_steps(tmp_path):
    assert cli.main(["personaplex", "make-tiny", str(tmp_path / "ck")]) == 0
    directory = tmp_path / "ck"
    cfg = config.tiny()
    lm = checkpoint.load_lm(directory / checkpoint.LM_FILE, cfg)
    assert lm.file_steps == 16
    codec = mimi.load(directory / mimi.checkpoint.FILE_NAME, cfg=mimi.tiny_config())
    sp = sentencepiece.SentencePieceProcessor(model_file=str(directory / "tokenizer_spm_32k_3.model"))
    assert [sp.id_to_piece(i) for i in range(4)] == ["<unk>", "<s>", "</s>", "<pad>"]
    assert sp.id_to_piece(4) == "<0x00>"
    role = sp.encode("<system> You are a teacher. <system>")
    voice = torch.load(directory / "voices" / "NATF2.pt", map_location="cpu", weights_only=True)
    N = voice["embeddings"].shape[0]
    emb = voice["embeddings"].reshape(N, cfg.dim)
    ring = voice["cache"][0]
    p = prompt.layout(emb, ring[:, N % 4], ring[:, (N + 1) % 4], role[:10], prompt.Schedule.UPSTREAM)
    pool, state = lm.temporal.new_pool(1), step.TokenState.allocate(1)
    sample = sampling.Sampling()
    prefill.admit(lm.temporal, lm.depformer, pool, state,
                  [prefill.Newcomer(0, p, prefill.voice_prefix(lm.temporal, emb), seed=1)],
                  prompt.Schedule.UPSTREAM, sample)
    codec_state = codec.init_state(1)
    rows = codec_state.head(1)
    pcm = torch.zeros(1, 1920)
    for _ in range(5):
        user = codec.encode_step(pcm, rows)
        out = step.live_step(lm.temporal, lm.depformer, pool, state, user, prompt.Schedule.UPSTREAM, sample)
        pcm = codec.decode_step(out.emitted[:, 1:], rows)
        assert pcm.shape == (1, 1920) and bool(torch.isfinite(pcm).all())
