"""Whisper tiny.en on real speech, streaming partials, and the silence guards."""

from __future__ import annotations

import re

import numpy as np
import pytest
from quicksilver.audio.resample import resample
from quicksilver.audio.streaming import FinalText, PartialText, StreamingTranscriber
from quicksilver.audio.stt import SttOptions, Transcriber, _loop_period
from quicksilver.audio.vad import SpeechStart, VadConfig, VoiceActivity

from tests.conftest import RATE, digits_in, silence

QUESTION = "What is seventeen times three?"


def test_espeak_question_gives_digits(transcriber, espeak):
    text = transcriber.transcribe(espeak(QUESTION))
    assert {"17", "3"} <= digits_in(text), text
    assert "what" in text.lower()


def _words(text: str) -> list[str]:
    return re.sub(r"[^\w\s]", "", text.lower()).split()


def test_short_window_agrees_with_full_window(transcriber, espeak):
    """The fast path (clip-sized encoder window) says what the 30 s window says; the
    second sentence makes tiny.en loop on a short window, which must be cut back."""
    full = Transcriber(options=SttOptions(short_window=False))
    for sentence in (QUESTION, "Tell me a joke about computers."):
        audio = espeak(sentence)
        assert _words(transcriber.transcribe(audio)) == _words(full.transcribe(audio))


def test_short_window_length_follows_the_options(espeak):
    """The encoder reads the clip plus the margin, never less than the minimum: the
    window is what the encoder's time grows with, so it is a setting, measured in
    BENCHMARKS.md, and a shorter one must still hear the question."""
    audio = espeak(QUESTION)
    seconds = audio.size / RATE
    for minimum, margin in ((8.0, 2.0), (3.0, 1.0), (1.0, 0.5)):
        options = SttOptions(min_window_s=minimum, window_margin_s=margin)
        short = Transcriber(options=options)
        frames = short.short_window_features(audio).shape[1]
        assert frames == int(max(minimum, seconds + margin) * 100)
        assert {"17", "3"} <= digits_in(short.transcribe(audio)), (minimum, margin)
    for bad in (dict(min_window_s=0.0), dict(window_margin_s=-1.0)):
        with pytest.raises(ValueError, match="short window"):
            Transcriber(options=SttOptions(**bad))


def test_piper_speech_round_trips(transcriber, voice):
    spoken = voice.speak("The meeting starts at 9:30 tomorrow morning.")
    text = transcriber.transcribe(resample(spoken, voice.sample_rate, RATE)).lower()
    assert "meeting" in text and "tomorrow" in text, text


def test_silence_and_noise_give_no_text(transcriber):
    rng = np.random.default_rng(0)
    assert transcriber.transcribe(silence(3)) == ""
    assert transcriber.transcribe(np.zeros(0, np.float32)) == ""
    quiet_hiss = (rng.standard_normal(RATE * 3) * 0.003).astype(np.float32)
    loud_noise = np.clip(rng.standard_normal(RATE * 3) * 0.5, -1, 1).astype(np.float32)
    assert transcriber.transcribe(quiet_hiss) == ""
    assert transcriber.transcribe(loud_noise) == ""


def test_clipped_speech_is_still_understood(transcriber, espeak):
    clipped = np.clip(espeak(QUESTION) * 20, -1, 1)
    assert {"17", "3"} <= digits_in(transcriber.transcribe(clipped))


def test_ten_minute_recording(transcriber, espeak):
    """Long input is windowed and its silence skipped; nothing is invented in between."""
    question = espeak(QUESTION)
    audio = np.concatenate([silence(300), question, silence(297), question, silence(1)])
    assert audio.size / RATE > 599
    segments = list(transcriber.segments(audio))
    assert len(segments) == 2, segments
    assert all({"17", "3"} <= digits_in(s.text) for s in segments)
    assert segments[0].start_s == pytest.approx(300, abs=2)
    assert segments[1].start_s == pytest.approx(600, abs=5)


def test_int16_input_and_bad_shapes(transcriber, espeak):
    pcm = (espeak(QUESTION) * 32767).astype(np.int16)
    assert {"17", "3"} <= digits_in(transcriber.transcribe(pcm))
    with pytest.raises(ValueError, match="mono"):
        transcriber.transcribe(np.zeros((RATE, 2), np.float32))
    with pytest.raises(ValueError, match="NaN"):
        transcriber.transcribe(np.full(RATE, np.nan, np.float32))
    with pytest.raises(ValueError, match="32768"):
        transcriber.transcribe(pcm.astype(np.float32))


def test_missing_model_folder_is_explained(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"model\.bin"):
        Transcriber(tmp_path / "no-model")


def test_loop_detection():
    assert _loop_period([1, 2, 3, 1, 2, 3, 1, 2]) == 3
    assert _loop_period([5, 6, 5, 6]) is None  # said twice on purpose: kept
    assert _loop_period([1, 2, 3, 4]) is None


def test_streaming_partials_then_final(transcriber, espeak):
    question = espeak("Please remind me to call my mother tomorrow morning.")
    audio = np.concatenate([silence(0.7), question, silence(1.0)])
    stream = StreamingTranscriber(transcriber, VoiceActivity(VadConfig(hangover_ms=500)),
                                  partial_interval_s=0.5)  # fmt: skip
    events = []
    for i in range(0, audio.size, 320):
        events += stream.feed(audio[i : i + 320])
    events += stream.flush()
    kinds = [type(e) for e in events]
    assert kinds[0] is SpeechStart and kinds[-1] is FinalText and kinds.count(FinalText) == 1
    partials = [e for e in events if isinstance(e, PartialText)]
    assert len(partials) >= 3
    assert [p.audio_s for p in partials] == sorted(p.audio_s for p in partials)
    final = events[-1]
    assert "mother" in final.text.lower() and "tomorrow" in final.text.lower(), final.text
    assert final.end_s == pytest.approx(0.7 + question.size / RATE, abs=0.1)
    # partials stop once the speaker pauses, so none runs into the endpoint
    assert partials[-1].audio_s < final.end_s - final.start_s + 0.3 + 0.1
