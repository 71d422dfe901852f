"""The demo page's pure JS modules, run in headless Chromium: resampler, playout, lateness, wire."""

from __future__ import annotations

import base64
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from playwright import sync_api

pytestmark = pytest.mark.browser

RATES = [(44_100, 24_000), (48_000, 24_000), (24_000, 48_000), (24_000, 44_100), (16_000, 24_000)]
HALF_TAPS = 16
"""resample.js's kernel half-length: the first output needs this many inputs past its position."""

in_browser = settings(max_examples=40, deadline=None)  # each example is a round trip to the page


def run(page: sync_api.Page, module: str, body: str, arg: object = None) -> object:
    """Evaluate `body` (a function body that sees `m`, the imported module, and `arg`) in the page."""
    return page.evaluate(f"async (arg) => {{ const m = await import('/static/{module}'); {body} }}", arg)


def resample(page: sync_api.Page, rates: tuple[int, int], signal: list[float], splits: list[int]) -> list[float]:
    """Push `signal` through one Resampler in the pieces that `splits` cut; return all output."""
    return run(page, "resample.js", """
        const r = new m.Resampler(arg.from, arg.to);
        const out = [];
        let prev = 0;
        for (const cut of [...arg.splits, arg.signal.length]) {
          out.push(...r.push(Float32Array.from(arg.signal.slice(prev, cut))));
          prev = cut;
        }
        return out;
    """, {"from": rates[0], "to": rates[1], "signal": signal, "splits": splits})


def tone(freq: float, rate: int, seconds: float) -> list[float]:
    t = np.arange(int(rate * seconds)) / rate
    return np.sin(2 * np.pi * freq * t).astype(np.float32).tolist()


def level_db(samples: list[float], skip: int) -> float:
    """RMS of a unit sine's output in dB relative to its input, ignoring the warm-up."""
    tail = np.asarray(samples[skip:], np.float64)
    return 20 * math.log10(math.sqrt(np.mean(tail * tail)) / math.sqrt(0.5))


@in_browser
@given(
    rates=st.sampled_from(RATES),
    seed=st.integers(0, 2**32 - 1),
    length=st.integers(0, 12_000),  # past the 4096-sample history buffer, so it compacts and grows
    cuts=st.lists(st.integers(0, 12_000), max_size=12),
)
def test_resampler_output_does_not_depend_on_how_input_is_split(modules, rates, seed, length, cuts) -> None:
    signal = np.random.default_rng(seed).uniform(-1, 1, length).astype(np.float32).tolist()
    splits = sorted(c for c in cuts if c <= length)
    whole = resample(modules, rates, signal, [])
    pieces = resample(modules, rates, signal, splits)
    assert pieces == whole
    # Output k is emitted once input k * from / to + HALF_TAPS has arrived.
    from_rate, to_rate = rates
    assert len(whole) == max(0, math.ceil((length - HALF_TAPS) * to_rate / from_rate))


@pytest.mark.parametrize("rates", RATES)
def test_resampler_keeps_speech_band_tones_exact(modules, rates) -> None:
    from_rate, to_rate = rates
    out = resample(modules, rates, tone(440.0, from_rate, 0.5), [1000, 1128])
    expected = tone(440.0, to_rate, 0.5)[: len(out)]
    error = np.abs(np.asarray(out) - np.asarray(expected))[HALF_TAPS * 4 :]  # past the onset transient
    assert np.max(error) < 1e-3
    for freq in (1000.0, 4000.0, 0.3 * min(rates)):  # up to 7.2 kHz, the top of wideband speech
        assert abs(level_db(resample(modules, rates, tone(freq, from_rate, 0.25), []), 200)) < 0.2


@pytest.mark.parametrize("rates", [(44_100, 24_000), (48_000, 24_000)])
@pytest.mark.parametrize("freq", [16_000.0, 20_000.0])
def test_resampler_keeps_tones_above_the_output_nyquist_from_aliasing(modules, rates, freq) -> None:
    out = resample(modules, rates, tone(freq, rates[0], 0.25), [])
    assert level_db(out, 200) < -60


def test_resampler_at_equal_rates_passes_audio_through(modules) -> None:
    signal = np.random.default_rng(1).uniform(-1, 1, 500).astype(np.float32).tolist()
    assert resample(modules, (24_000, 24_000), signal, [7, 300]) == signal


# ---- playout ----------------------------------------------------------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(st.just("push"), st.integers(0, 700)),
        st.tuples(st.just("pull"), st.integers(1, 300)),
        st.tuples(st.just("drain"), st.just(0)),
    ),
    max_size=40,
)


def play(page: sync_api.Page, capacity: int, prebuffer: int, steps: list[tuple[str, int]]) -> dict:
    """Run `steps` on a Playout fed the ramp 1, 2, 3, …; return what came out and its counters."""
    return run(page, "playout.js", """
        const p = new m.Playout(arg.capacity, arg.prebuffer);
        let next = 1;
        let pushed = 0;
        const heard = [];
        for (const [op, n] of arg.steps) {
          if (op === 'push') {
            p.push(Float32Array.from({ length: n }, () => next++));
            pushed += n;
          } else if (op === 'pull') {
            const out = new Float32Array(n);
            p.pull(out);
            heard.push(...out);
          } else {
            p.drain();
          }
        }
        return { pushed, heard, depth: p.depth, played: p.played, dropped: p.dropped,
                 underruns: p.underruns };
    """, {"capacity": capacity, "prebuffer": prebuffer, "steps": steps})


@in_browser
@given(capacity=st.integers(1, 1000), prebuffer_share=st.floats(0.01, 1.0), steps=ops)
def test_playout_conserves_samples_and_keeps_their_order(modules, capacity, prebuffer_share, steps) -> None:
    prebuffer = max(1, int(capacity * prebuffer_share))
    r = play(modules, capacity, prebuffer, steps)
    assert r["pushed"] == r["played"] + r["dropped"] + r["depth"]
    assert 0 <= r["depth"] <= capacity
    samples = [s for s in r["heard"] if s != 0]  # the ramp never contains 0: zeros are silence
    assert len(samples) == r["played"]
    assert samples == sorted(set(samples))  # FIFO: nothing repeated, nothing reordered


def test_playout_waits_for_the_prebuffer_then_counts_one_gap_per_dry_spell(modules) -> None:
    r = play(modules, 1000, 200, [("push", 150), ("pull", 100), ("push", 100), ("pull", 128), ("pull", 128),
                                  ("pull", 128), ("push", 150), ("pull", 128)])
    assert r["heard"][:100] == [0] * 100  # 150 < prebuffer: silence
    assert r["heard"][100:228] == list(range(1, 129))
    assert r["heard"][228:356] == list(range(129, 251)) + [0] * 6  # ran dry mid-quantum
    assert r["heard"][356:] == [0] * 256  # 150 queued again, under the prebuffer
    assert r["underruns"] == 1


def test_playout_plays_out_a_drained_stream_without_counting_a_gap(modules) -> None:
    r = play(modules, 1000, 200, [("push", 50), ("drain", 0), ("pull", 128)])
    assert r["heard"] == list(range(1, 51)) + [0] * 78
    assert r["underruns"] == 0


def test_playout_drops_the_oldest_samples_past_its_capacity(modules) -> None:
    r = play(modules, 100, 10, [("push", 80), ("push", 50), ("pull", 100)])
    assert r["dropped"] == 30
    assert r["heard"] == list(range(31, 131))


# ---- lateness ---------------------------------------------------------------------------------

def lateness(page: sync_api.Page, arrivals: list[float], q: float) -> float | None:
    return run(page, "lateness.js", """
        const l = new m.Lateness(80, 250);
        for (const t of arg.arrivals) l.arrive(t);
        return l.quantile(arg.q);
    """, {"arrivals": arrivals, "q": q})


def test_lateness_of_frames_on_their_slots_is_zero_even_after_a_late_first_frame(modules) -> None:
    arrivals = [1000.0 + 80 * n for n in range(100)]
    arrivals[0] += 300  # the first frame was late: the others are still on time
    assert lateness(modules, arrivals, 0.5) == 0
    assert lateness(modules, arrivals, 1.0) == 300


def test_lateness_p99_reports_a_late_burst(modules) -> None:
    arrivals = [80.0 * n + (45 if n % 50 == 7 else 0) for n in range(200)]
    assert lateness(modules, arrivals, 0.99) == 45
    assert lateness(modules, [], 0.99) is None


@in_browser
@given(jitter=st.lists(st.floats(0, 500), min_size=1, max_size=300), shift=st.floats(-1e6, 1e6))
def test_lateness_is_never_negative_and_ignores_the_clock_origin(modules, jitter, shift) -> None:
    arrivals = [80.0 * n + j for n, j in enumerate(jitter)]
    p99 = lateness(modules, arrivals, 0.99)
    assert p99 >= 0
    assert lateness(modules, [t + shift for t in arrivals], 0.99) == pytest.approx(p99, abs=1e-6)


# ---- pod stats and the wire -------------------------------------------------------------------

def interval(page: sync_api.Page, prev: dict | None, cur: dict) -> dict:
    return run(page, "stats.js", "return m.interval(arg.prev, arg.cur);", {"prev": prev, "cur": cur})


def snapshot(ticks: int, busy_us: int, late: int, sessions: int = 2) -> dict:
    return {"sessions": sessions, "max_sessions": 16, "frame_ms": 80, "ticks": ticks,
            "tick_busy_us": busy_us, "last_tick_us": 900, "late_ticks": late}


def test_stats_interval_diffs_cumulative_counters(modules) -> None:
    figures = interval(modules, snapshot(100, 50_000, 1), snapshot(112, 62_000, 3))
    assert figures == {"sessions": 2, "maxSessions": 16, "frameMs": 80, "ticks": 12, "tickMs": 1.0,
                       "lastTickMs": 0.9, "lateTicks": 2}


@pytest.mark.parametrize("prev", [None, snapshot(5000, 9_000_000, 40)], ids=["first poll", "pod restarted"])
def test_stats_interval_without_a_usable_previous_poll_has_no_rates(modules, prev) -> None:
    figures = interval(modules, prev, snapshot(12, 6_000, 0))
    assert (figures["ticks"], figures["tickMs"], figures["lateTicks"]) == (0, None, 0)


@in_browser
@given(samples=st.lists(st.integers(-32768, 32767), max_size=2000))
def test_pcm16_base64_round_trips_as_little_endian(modules, samples) -> None:
    encoded = run(modules, "events.js", "return m.encodePcm16(Int16Array.from(arg));", samples)
    assert encoded == base64.b64encode(np.asarray(samples, "<i2").tobytes()).decode()
    assert run(modules, "events.js", "return Array.from(m.decodePcm16(arg));", encoded) == samples


def test_start_event_names_model_voice_and_persona_and_omits_a_blank_persona(modules) -> None:
    events = run(modules, "events.js", """
        return [m.start({model: 'gpt-live-1', instructions: 'Be brief.', voice: 'cedar'}, 's1'),
                m.start({model: 'gpt-live-1', instructions: '   ', voice: ''}, 's2')];
    """)
    fmt = {"type": "audio/pcm", "rate": 24000}
    assert events == [
        {"type": "session.start", "event_id": "s1", "session": {
            "model": "gpt-live-1", "instructions": "Be brief.",
            "audio": {"format": fmt, "output": {"voice": "cedar"}}}},
        {"type": "session.start", "event_id": "s2", "session": {"model": "gpt-live-1", "audio": {"format": fmt}}},
    ]


def test_float_to_pcm16_clips_instead_of_wrapping(modules) -> None:
    pcm = run(modules, "events.js", "return Array.from(m.toPcm16(Float32Array.from(arg)));",
              [-2.0, -1.0, 0.0, 0.5, 1.0, 3.0])
    assert pcm == [-32768, -32768, 0, 16384, 32767, 32767]
