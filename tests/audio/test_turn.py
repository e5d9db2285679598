"""Semantic end of turn: the words' judge, and Smart Turn checked against pipecat's own
analyzer on the same speech (the model and its reference both ship in pipecat-ai)."""

from __future__ import annotations

import numpy as np
import pytest
from quicksilver.audio.resample import resample
from quicksilver.audio.turn import SmartTurn, bundled_model_path, unfinished

SILENCE = np.zeros(3200, np.float32)  # 200 ms: the pause at which a turn is judged


def piper(voice, text: str) -> np.ndarray:
    """Piper's speech at 16 kHz: the model hears a human-like voice's prosody in it
    (espeak's flat phrasing sounds finished or not almost at random to it)."""
    return resample(voice.speak(text), voice.sample_rate, 16000)


@pytest.fixture(scope="module")
def voice():
    """Piper without its noise, the same speech every run: with it, "Thank you." scored
    0.80-0.98 finished by the reference analyzer, and one run in many fell below 0.8."""
    from quicksilver.audio.tts import Voice

    return Voice(noise_scale=0.0, noise_w_scale=0.0)


@pytest.mark.parametrize(
    "transcript",
    ["What is 17 times", "Which number is larger, 15 or", "What is two hundred and",
     "How many letters are in the", "What is 17", "what's seventeen", "Spell the word,",
     "How many letters are in the word?", "Which is bigger?", "Which number is larger",
     "Well...", ""],
)  # fmt: skip
def test_words_that_break_off_are_unfinished(transcript):
    assert unfinished(transcript)


@pytest.mark.parametrize(
    "transcript",
    ["What is 17 times 3?", "Which number is larger, 15 or 50?", "Good afternoon!",
     "How many letters are in the word apple", "What is the date today?", "Who are you",
     "Spell the word dog.", "what is 9 minus 4", "Which is bigger, 7 or 12?",
     "Which is larger than 5, 3 or 9?"],
)  # fmt: skip
def test_whole_questions_are_not(transcript):
    assert not unfinished(transcript)


@pytest.fixture(scope="module")
def smart_turn() -> SmartTurn:
    return SmartTurn()


def test_the_model_comes_from_the_pipecat_wheel(smart_turn):
    assert bundled_model_path() == smart_turn.path
    assert smart_turn.path.name == "smart-turn-v3.2-cpu.onnx"


def test_features_and_verdicts_match_pipecats_own_analyzer(smart_turn, espeak, voice):
    from pipecat.audio.turn.smart_turn._whisper_features import compute_whisper_log_mel_features
    from pipecat.audio.turn.smart_turn.local_smart_turn_v3 import LocalSmartTurnAnalyzerV3

    reference = LocalSmartTurnAnalyzerV3(smart_turn_model_path=str(smart_turn.path))
    reference.set_sample_rate(16000)
    for speech in (espeak("how many letters are in the word"), piper(voice, "Thank you.")):
        speech = np.concatenate([speech, SILENCE])
        padded = np.pad(speech, (8 * 16000 - speech.size, 0))
        ours = smart_turn.features(speech)
        np.testing.assert_allclose(ours, compute_whisper_log_mel_features(padded), atol=1e-4)
    # the model is quantised: a verdict near 0.5 can flip on rounding, a clear one cannot
    expected = reference._predict_endpoint(speech)["probability"]
    assert expected > 0.8 and smart_turn.probability(speech) == pytest.approx(expected, abs=1e-3)


def test_a_finished_question_sounds_finished(smart_turn, voice):
    speech = np.concatenate([piper(voice, "What is seventeen times three?"), SILENCE])
    assert smart_turn.probability(speech) > 0.9


def test_a_missing_model_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no Smart Turn model at"):
        SmartTurn(tmp_path / "nothing.onnx")
