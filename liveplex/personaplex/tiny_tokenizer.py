"""Train a small SentencePiece model shaped like PersonaPlex's, for `make-tiny` and the tests.

Like the real `tokenizer_spm_32k_3.model` it has control ids 0..3 (unk, BOS, EOS, PAD), then the
256 byte-fallback pieces `<0x00>`..`<0xFF>` at ids 4..259, keeps repeated spaces and applies no
normalisation (spec §6.7). Training is deterministic for a given corpus and runs in about a second.
"""

from __future__ import annotations

import io
import random

import sentencepiece

_WORDS = (
    "you are a wise and friendly teacher answer questions or provide advice in clear engaging way "
    "hello world the weather is nice today what time does store open please tell me about your day "
    "we can talk music books travel food science history sports family work plans weekend morning "
    "evening thanks sorry sure great really maybe never always sometimes because although however "
    "system assistant caller agent voice persona calm cheerful patient helpful short long answer"
).split()


def sample_corpus(lines: int = 2000, seed: int = 0) -> list[str]:
    """Generated English sentences with punctuation, digits and the `<system>` tag."""
    rng = random.Random(seed)
    corpus = []
    for i in range(lines):
        words = rng.choices(_WORDS, k=rng.randint(4, 14))
        sentence = " ".join(words).capitalize() + rng.choice([".", "!", "?", ","])
        if i % 7 == 0:
            sentence = f"<system> {sentence} <system>"
        if i % 11 == 0:
            sentence += f" {rng.randint(0, 9999)}"
        corpus.append(sentence)
    return corpus


def train(corpus: list[str] | None = None, vocab_size: int = 400) -> bytes:
    """Train a unigram model with byte fallback on `corpus` and return it serialized."""
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus or sample_corpus()),
        model_writer=model,
        model_type="unigram",
        vocab_size=vocab_size,
        byte_fallback=True,
        unk_id=0, bos_id=1, eos_id=2, pad_id=3,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        character_coverage=1.0,
        num_threads=1,
        minloglevel=2,
    )
    return model.getvalue()

