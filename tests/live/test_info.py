"""`LiveInfo`: frame arithmetic and `check` (live-contract §3, §14)."""

from __future__ import annotations

import pytest

from liveplex.live import CheckError, LiveInfo, SessionDraft

INFO = LiveInfo(model="m", sample_rate=24000, frame_samples=1920, voices=("NATF2", "NATM1"),
                default_voice="NATF2", default_instructions="be kind",
                max_instructions_chars=10, max_sessions=4, max_frames=3000)


def test_frame_arithmetic() -> None:
    assert INFO.frame_ms(7) == 560
    assert INFO.period_ns() == 80_000_000
    assert INFO.frames_in(240 * 10**9) == 3000
    assert INFO.frames_in(500 * 10**6) == 6


@pytest.mark.parametrize("blank", [None, "", "   ", "\n\t"])
def test_check_fills_defaults_and_treats_blank_as_missing(blank: str | None) -> None:
    s = INFO.check(SessionDraft(voice=None, instructions=blank))
    assert (s.voice, s.instructions) == ("NATF2", "be kind")


def test_unknown_voice_names_its_param() -> None:
    with pytest.raises(CheckError) as e:
        INFO.check(SessionDraft(voice="nope"))
    assert e.value.param == "audio.output.voice"


def test_limit_counts_code_points() -> None:
    assert INFO.check(SessionDraft(instructions="🙂" * 10)).instructions == "🙂" * 10
    with pytest.raises(CheckError) as e:
        INFO.check(SessionDraft(instructions="🙂" * 11))
    assert e.value.param == "instructions"
