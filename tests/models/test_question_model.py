"""The question model shipped beside reasoner-tiny (models/reasoner_tiny/question_model.py)."""

from __future__ import annotations

import numpy as np
import pytest
from quicksilver.assistant.loading import load_question_model
from quicksilver.audio.language_model import FILE_NAME, QuestionModel
from quicksilver.models import reasoner_tiny_folder
from quicksilver.models.reasoner_tiny.corpus import WORDS, is_held_out, phrasings, words_in
from quicksilver.models.reasoner_tiny.question_model import build

from tests.conftest import digits_in, silence


def test_the_shipped_file_is_what_the_script_builds():
    shipped = QuestionModel.load(reasoner_tiny_folder() / FILE_NAME)
    assert shipped.counts == build().counts


def test_held_out_words_never_reach_it():
    """Words held out to be spelled (but not those that also frame questions: "number")."""
    vocabulary = load_question_model("bundled").vocabulary
    in_training_phrasings = words_in(text for trained, _ in phrasings() for text in trained)
    held_out = {w for w in WORDS if is_held_out("word:" + w)} - in_training_phrasings
    trained = set(WORDS) - held_out
    assert held_out and not held_out & vocabulary
    assert len(trained & vocabulary) > len(trained) // 2  # the check can fail


def test_found_only_where_a_checkpoint_ships_one(tmp_path):
    assert isinstance(load_question_model("bundled"), QuestionModel)
    assert load_question_model(str(tmp_path)) is None  # a folder without one
    assert load_question_model("someone/some-diffusion-model") is None  # a hub id: no download
    assert load_question_model(str(tmp_path / "absent")) is None  # load_engine explains


def test_whisper_hears_the_question_it_was_asked(espeak):
    """Real Whisper on espeak's robotic "nine", which tiny.en ranks below "I": the question
    model picks the hypothesis that is a question of the domain."""
    from quicksilver.audio.stt import Transcriber
    from quicksilver.audio.textnorm import spoken_numbers_to_digits

    rescoring = Transcriber(cpu_threads=1, questions=load_question_model("bundled"))
    plain = Transcriber(cpu_threads=1)
    asked = {
        "tell me 12 plus 9": {"12", "9"},
        "what is 2 plus 9": {"2", "9"},
        "so tell me zero plus 9": {"0", "9"},
    }
    heard = {}
    for question, numbers in asked.items():
        audio = np.concatenate([silence(0.3), espeak(question), silence(0.15)])
        heard[question] = rescoring.transcribe(audio), plain.transcribe(audio)
        assert digits_in(heard[question][0]) == numbers, heard
        # what the rescoring chose among: Whisper's own readings, its first first
        readings = plain.hypotheses(audio, count=5)
        assert 1 < len(readings) <= 5
        assert spoken_numbers_to_digits(readings[0][0]) == heard[question][1]
        assert any(digits_in(text) == numbers for text, _ in readings), readings
    # without it, Whisper's first choice misses a number
    assert any(digits_in(heard[q][1]) != numbers for q, numbers in asked.items()), heard
    with pytest.raises(ValueError, match="count"):
        plain.hypotheses(audio, count=0)


def test_a_session_loads_the_engines_question_model():
    from quicksilver.assistant.config import Settings
    from quicksilver.assistant.factory import build_session
    from quicksilver.assistant.wiring import Wiring

    wiring = Wiring(microphone=False, speech=True, output="none", log=False)
    session = build_session(Settings(threads=1), wiring)
    assert isinstance(session.transcribe.transcriber.questions, QuestionModel)
    session = build_session(Settings(threads=1, question_model=False), wiring)
    assert session.transcribe.transcriber.questions is None  # --no-question-model
