"""Silero VAD with kept state, and endpointing on real speech with known silences."""

from __future__ import annotations

import numpy as np
import pytest
from quicksilver.audio.vad import (
    SileroVad,
    SpeechEnd,
    SpeechStart,
    VadConfig,
    VoiceActivity,
    speech_segments,
)

from tests.conftest import RATE, silence

TOLERANCE_S = 0.1


@pytest.fixture(scope="module")
def conversation(espeak):
    """Two questions with silences of known lengths, and the true (start, end) times."""
    first = espeak("What is seventeen times three?")
    second = espeak("Turn off the lights in the kitchen.")
    parts = [silence(0.8), first, silence(1.5), second, silence(1.0)]
    t0 = 0.8
    t1 = t0 + first.size / RATE
    t2 = t1 + 1.5
    t3 = t2 + second.size / RATE
    return np.concatenate(parts), [(t0, t1), (t2, t3)]


def test_segments_match_the_truth_within_100_ms(conversation):
    audio, truth = conversation
    found = speech_segments(audio)
    assert len(found) == 2, found
    for (start, end), (true_start, true_end) in zip(found, truth, strict=True):
        assert abs(start - true_start) <= TOLERANCE_S, (start, true_start)
        assert abs(end - true_end) <= TOLERANCE_S, (end, true_end)


def test_streaming_in_20ms_blocks_gives_the_same_events(conversation):
    audio, _ = conversation
    vad = VoiceActivity()
    events = []
    for i in range(0, audio.size, 320):
        events += vad.process(audio[i : i + 320])
    events += vad.flush()
    starts = [e for e in events if isinstance(e, SpeechStart)]
    ends = [e for e in events if isinstance(e, SpeechEnd)]
    assert [round(e.start_s, 3) for e in ends] == [round(s, 3) for s, _ in speech_segments(audio)]
    assert len(starts) == 2
    for start, end in zip(starts, ends, strict=True):
        # announced after min_speech; the end after the hang-over
        assert start.detected_s >= start.time_s + 0.2 - 0.04
        assert end.detected_s == pytest.approx(end.end_s + 0.5, abs=0.04)
        assert end.audio.size / RATE == pytest.approx(end.end_s - end.start_s + 0.3 + 0.15,
                                                      abs=0.07)  # fmt: skip


def test_state_is_kept_between_frames():
    rng = np.random.default_rng(3)
    audio = rng.standard_normal(RATE * 2).astype(np.float32) * 0.1
    model = SileroVad()
    whole = model.probabilities(audio)
    model.reset()
    framed = np.concatenate([model.probabilities(audio[i : i + 512])
                             for i in range(0, audio.size, 512)])  # fmt: skip
    np.testing.assert_allclose(whole, framed, atol=1e-5)


def test_no_speech_in_silence_or_moderate_white_noise():
    rng = np.random.default_rng(0)
    assert speech_segments(silence(5)) == []
    for level in (0.01, 0.05, 0.1):
        noise = (rng.standard_normal(RATE * 5) * level).astype(np.float32)
        assert speech_segments(noise) == [], level


def test_a_click_is_not_speech():
    click = np.concatenate([silence(1), np.hanning(400).astype(np.float32), silence(1)])
    assert speech_segments(click) == []


def test_pre_roll_keeps_the_first_syllable(espeak):
    speech = espeak("Seven")
    vad = VoiceActivity(VadConfig(pre_roll_ms=300))
    events = vad.process(np.concatenate([silence(1), speech, silence(1)]))
    end = next(e for e in events if isinstance(e, SpeechEnd))
    start_in_audio = int((1.0 - (end.start_s - 0.3)) * RATE)  # where the speech begins
    assert start_in_audio > 0.2 * RATE  # there is pre-roll before the onset
    assert np.abs(end.audio[: start_in_audio - 800]).max() < 0.01


def test_long_speech_is_cut_at_max_utterance(espeak):
    talk = np.concatenate([espeak("one two three four five six seven eight nine ten")] * 2)
    vad = VoiceActivity(VadConfig(max_utterance_s=2.0))
    events = vad.process(np.concatenate([silence(0.5), talk, silence(1)]))
    ends = [e for e in events if isinstance(e, SpeechEnd)]
    assert any(e.truncated for e in ends)
    assert all(e.end_s - e.start_s <= 2.0 + 0.04 for e in ends if e.truncated)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="threshold"):
        VadConfig(threshold=0.3, end_threshold=0.5)
    with pytest.raises(ValueError, match="negative"):
        VadConfig(hangover_ms=-1)


def test_a_judged_pause_can_end_at_once_or_last_longer(espeak):
    speech = espeak("what is seventeen times")
    quiet = np.zeros(16000, np.float32)
    vad = VoiceActivity(VadConfig(hangover_ms=1500))
    assert not [
        e for e in vad.process(np.concatenate([speech, quiet[:6400]])) if isinstance(e, SpeechEnd)
    ]
    (end,) = vad.limit_pause(300)  # 400 ms of silence is already past it: ends now
    assert isinstance(end, SpeechEnd) and not vad.in_speech

    vad = VoiceActivity(VadConfig(hangover_ms=500))
    vad.process(np.concatenate([speech, quiet[:4800]]))  # 300 ms into the pause
    assert vad.limit_pause(2000) == []  # the words break off: wait longer
    assert not [e for e in vad.process(quiet) if isinstance(e, SpeechEnd)]  # 1.3 s: still open
    assert [e for e in vad.process(quiet) if isinstance(e, SpeechEnd)]  # 2.3 s: over
