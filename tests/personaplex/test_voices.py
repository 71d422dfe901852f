"""Voice prompts: `.pt` reading and validation, `voices.tgz`, and `.wav` conversion (spec §4.2, §6.8)."""

from __future__ import annotations

import argparse
import io
import tarfile

import numpy as np
import pytest
import soundfile
import torch

from liveplex.personaplex import config, voices

CFG = config.tiny()
DIM = CFG.dim
SINE = torch.tensor(config.SINE)
DELAYED = torch.tensor(config.DELAYS, dtype=torch.bool)


def _codes(frames: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 2048, (frames, 8), generator=torch.Generator().manual_seed(seed))


def _pt_dict(frames: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """A voice as the reference saves it: embeddings of columns 0..N-1, the ring after column N+1."""
    columns = voices.wav_columns(_codes(frames + 1, seed), CFG.init_column)
    cache = torch.full((1, 17, 4), -2, dtype=torch.long)  # -2: the reference's not-yet-generated filler
    for c in range(frames + 2):
        cache[0, :, c % 4] = torch.where(DELAYED | (c <= frames), columns[c], cache[0, :, c % 4])
    embeddings = torch.randn(frames, 1, 1, DIM, generator=torch.Generator().manual_seed(seed))
    return {"embeddings": embeddings, "cache": cache}


def _save(obj: object) -> io.BytesIO:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return buffer


def _read(obj: object, max_frames: int = 250) -> voices.Voice:
    return voices.read_pt(_save(obj), "V", cfg=CFG, max_frames=max_frames, where="V.pt")


@pytest.mark.parametrize("frames", [1, 2, 3, 4, 5, 6, 7, 8])
def test_a_valid_pt_gives_n_embeddings_and_the_two_ring_columns(frames):
    data = _pt_dict(frames)
    voice = _read(data)
    columns = voices.wav_columns(_codes(frames + 1, 0), CFG.init_column)
    assert voice.frames == frames
    assert torch.equal(voice.embeddings, data["embeddings"].reshape(frames, DIM))
    assert torch.equal(voice.ring_n, columns[frames])
    assert torch.equal(voice.ring_next[DELAYED], columns[frames + 1][DELAYED])


def test_wav_columns_follow_the_reference_rules():
    codes = _codes(4, 1)
    cols = voices.wav_columns(codes, CFG.init_column)
    assert cols.shape == (5, 17)
    assert torch.equal(cols[0], torch.tensor([32000] + [2048] * 16))
    assert cols[1].tolist() == [3, int(codes[1, 0])] + [2048] * 7 + [config.SINE[0]] + [2048] * 7
    for c in (2, 3):
        assert cols[c].tolist() == [3, int(codes[c, 0]), *codes[c - 1, 1:].tolist(), *config.SINE]
    assert torch.equal(cols[4][DELAYED], torch.cat([codes[3, 1:], SINE[1:]]))


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d.pop("embeddings"), "missing `embeddings`"),
    (lambda d: d.pop("cache"), "missing `cache`"),
    (lambda d: d.update(cache=d["cache"][:, :, :3]), "`cache` is not a token ring"),
    (lambda d: d.update(cache=d["cache"].int()), "`cache` is not a token ring"),
    (lambda d: d.update(embeddings=d["embeddings"][..., :32]), r"`embeddings` is \[3, 1, 1, 32\]"),
    (lambda d: d.update(embeddings=d["embeddings"][:0]), "N = 0 frames"),
    (lambda d: d["cache"].__setitem__((0, 1, 3), -1), "stream 1 holds id -1"),
    (lambda d: d["cache"].__setitem__((0, 0, 3), 32001), "stream 0 holds id 32001"),
    (lambda d: d["cache"].__setitem__((0, 16, 0), 2049), "stream 16 holds id 2049"),
])
def test_malformed_pt_fields_are_named(change, message):
    data = _pt_dict(3)
    change(data)
    with pytest.raises(voices.VoiceError, match=f"V.pt: .*{message}"):
        _read(data)


def test_too_many_frames_are_refused():
    with pytest.raises(voices.VoiceError, match="N = 6 frames, expected 1..5"):
        _read(_pt_dict(6), max_frames=5)


def test_non_zip_truncated_and_non_tensor_files_are_refused():
    good = _save(_pt_dict(3)).getvalue()
    for payload in (b"RIFF this is not a torch file", good[: len(good) // 2]):
        with pytest.raises(voices.VoiceError, match="V.pt: not a readable torch.save zip file"):
            voices.read_pt(io.BytesIO(payload), "V", cfg=CFG, max_frames=250, where="V.pt")
    with pytest.raises(voices.VoiceError, match="V.pt: refused by weights_only"):
        _read({**_pt_dict(3), "extra": argparse.Namespace(a=1)})
    with pytest.raises(voices.VoiceError, match="V.pt: expected a dict of tensors"):
        _read([torch.zeros(1)])


def _write_pt(path, frames, seed=0):
    torch.save(_pt_dict(frames, seed), path)


def test_voices_tgz_is_read_without_extraction_and_voices_dir_wins(tmp_path):
    members = {"voices/NATF2.pt": 3, "voices/VARM1.pt": 5}
    with tarfile.open(tmp_path / "voices.tgz", "w:gz") as tar:
        for name, frames in members.items():
            payload = _save(_pt_dict(frames)).getvalue()
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    loaded = voices.load_voices(tmp_path, cfg=CFG, max_frames=250)
    assert {k: v.frames for k, v in loaded.items()} == {"NATF2": 3, "VARM1": 5}
    assert not (tmp_path / "voices").exists()
    (tmp_path / "voices").mkdir()
    _write_pt(tmp_path / "voices" / "NATM0.pt", 4)
    assert list(voices.load_voices(tmp_path, cfg=CFG, max_frames=250)) == ["NATM0"]


def test_custom_voices_add_to_the_shipped_ones_and_duplicates_are_refused(tmp_path):
    (tmp_path / "voices").mkdir()
    custom = tmp_path / "custom"
    custom.mkdir()
    _write_pt(tmp_path / "voices" / "NATF2.pt", 3)
    _write_pt(custom / "Mine.pt", 2)
    assert sorted(voices.load_voices(tmp_path, cfg=CFG, max_frames=250, custom_dir=custom)) == ["Mine", "NATF2"]
    _write_pt(custom / "NATF2.pt", 2)
    with pytest.raises(voices.VoiceError, match="'NATF2' is already loaded"):
        voices.load_voices(tmp_path, cfg=CFG, max_frames=250, custom_dir=custom)


def test_a_wav_needs_a_converter(tmp_path):
    (tmp_path / "voices").mkdir()
    soundfile.write(tmp_path / "voices" / "clip.wav", np.zeros(24000), 24000)
    with pytest.raises(voices.VoiceError, match="clip.wav: a .wav voice needs Mimi"):
        voices.load_voices(tmp_path, cfg=CFG, max_frames=250)


@pytest.fixture
def embed():
    tables = torch.nn.ModuleList(torch.nn.Embedding(2049, DIM) for _ in range(16))
    text = torch.nn.Embedding(32001, DIM)

    def run(columns: torch.Tensor) -> torch.Tensor:
        return text(columns[:, 0]) + sum(t(columns[:, 1 + q]) for q, t in enumerate(tables))

    return run


def _clip(path, seconds: float, rate: int) -> None:
    t = np.arange(int(seconds * rate)) / rate
    left = 0.3 * np.sin(2 * np.pi * 220 * t) * (1 + np.sin(2 * np.pi * 3 * t))
    right = 0.2 * np.sin(2 * np.pi * 530 * t)
    soundfile.write(path, np.stack([left, right], axis=1), rate)


def test_a_wav_voice_equals_the_pt_the_reference_would_save(tmp_path, our_mimi, embed):
    _clip(tmp_path / "Mine.wav", 0.9, 16000)  # 0.9 s -> 12 frames (last zero-padded), N = 11
    voice = voices.load_voices(tmp_path, cfg=CFG, max_frames=250, custom_dir=tmp_path,
                               wav=voices.WavConverter(our_mimi, embed))["Mine"]
    assert voice.frames == 11
    assert voice.ring_n[0] == config.TEXT_PAD and voice.ring_n[9] == config.SINE[0]
    assert torch.equal(voice.ring_next[DELAYED][7:], SINE[1:])
    cache = torch.zeros(1, 17, 4, dtype=torch.long)
    cache[0, :, 11 % 4], cache[0, :, 12 % 4] = voice.ring_n, voice.ring_next
    saved = {"embeddings": voice.embeddings.reshape(11, 1, 1, DIM), "cache": cache}
    again = voices.read_pt(_save(saved), "Mine", cfg=CFG, max_frames=250)
    for field in ("embeddings", "ring_n", "ring_next"):
        assert torch.equal(getattr(voice, field), getattr(again, field)), field


def test_a_wav_too_short_or_too_long_is_refused(tmp_path, our_mimi, embed):
    converter = voices.WavConverter(our_mimi, embed)
    _clip(tmp_path / "short.wav", 0.2, 24000)
    with pytest.raises(voices.VoiceError, match="short.wav: audio is 0.20 s, too short"):
        voices.read_wav(tmp_path / "short.wav", our_mimi, embed, init=CFG.init_column, max_frames=250)
    _clip(tmp_path / "long.wav", 1.0, 24000)
    with pytest.raises(voices.VoiceError, match="long.wav: 13 frames give N = 12, expected 1..5"):
        voices.read_wav(tmp_path / "long.wav", converter.mimi, converter.embed, init=CFG.init_column, max_frames=5)
