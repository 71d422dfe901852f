"""PersonaPlex-7B in PyTorch: the language model, batched over sessions at different positions.

Modules: `config` (architecture), `model_dir` (a whole checkpoint directory in one call),
`checkpoint` (LM loading), `errors` (the exception root), `slots` (the per-slot state interface),
`ring` (KV ring, attention backends), `temporal`,
`depformer`, `sampling`, `prompt` (layout, schedules, limit), `prefill` (voice prefix, ragged
prefill), `step` (the live step), `mimi` (the codec), `tokenizer`, `voices`, `voice_names` (the names, no torch). See
docs/personaplex.md. The package imports no submodule itself, so `voice_names` loads without torch.
"""
