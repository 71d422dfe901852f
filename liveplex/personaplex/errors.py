"""The model package's one exception root: what a checkpoint directory, file or voice can get wrong.

`CheckpointError` is raised by every loader in `liveplex.personaplex` (LM, Mimi, tokenizer, voices,
the directory loader); `MimiCheckpointError` and `VoiceError` are its subclasses, so a caller
catches one type (style §5: one root per component). It imports nothing, so any module of the
package, `mimi/` included, can raise it without an import cycle.
"""

from __future__ import annotations


class CheckpointError(Exception):
    """A checkpoint file or voice is missing, unreadable, or does not match the configuration.

    `problems` holds one line per problem, each naming the file and the key or field; all the
    problems found are reported together, not only the first.
    """

    def __init__(self, *problems: str) -> None:
        self.problems = tuple(problems)
        if len(self.problems) == 1:
            super().__init__(self.problems[0])
        else:
            super().__init__(f"{len(self.problems)} problems:\n  " + "\n  ".join(self.problems))
