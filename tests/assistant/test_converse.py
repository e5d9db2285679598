"""One voice turn from a recording: espeak speech in, the shipped model's spoken answer out."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from quicksilver.assistant.converse import converse
from quicksilver.assistant.session import NO_ANSWER
from quicksilver.audio.wavfile import read_wav, write_wav
from quicksilver.engine import Engine

from tests.assistant.conftest import REPO, clean_env
from tests.assistant.sessions import answers
from tests.conftest import RATE, digits_in, silence

# Whisper hears espeak's "Hello." as "Hello? Hello?", which this build of the shipped
# model does not take for a greeting when the date is in its context (see its card).
QUESTIONS = ["Thank you.", "What is seventeen times three?"]


@pytest.mark.parametrize("question", QUESTIONS)
def test_converse_answers_a_spoken_question_aloud(
    question, espeak, reasoner, transcriber, voice, tmp_path
):
    samples = np.concatenate([silence(0.5), espeak(question), silence(0.8)])
    output = tmp_path / "answer.wav"

    result = converse(samples, reasoner, transcriber, voice, output=output, steps=16)

    assert digits_in(result.transcript) == digits_in("17 3" if "times" in question else "")
    assert answers(question, result.answer), result.answer
    assert result.steps == 16
    timings = result.timings
    assert min(timings.vad_ms, timings.transcript_ms, timings.engine_ms, timings.speech_ms) > 0
    assert 0 < timings.first_audio_ms <= timings.speech_ms < timings.total_ms
    spoken = read_wav(output, sample_rate=None)
    assert spoken.size == result.answer_audio.size > 0
    heard = transcriber.transcribe(read_wav(output))
    assert answers(question, heard), heard


def test_converse_speaks_an_apology_when_the_model_writes_no_answer(
    espeak, silent_model, transcriber, voice, tmp_path
):
    samples = np.concatenate([silence(0.5), espeak("What is seventeen times three?"), silence(0.8)])
    output = tmp_path / "answer.wav"

    result = converse(samples, Engine.load(silent_model), transcriber, voice, output=output)

    assert result.answer == NO_ANSWER
    heard = transcriber.transcribe(read_wav(output)).lower()
    assert "sorry" in heard and "another way" in heard, heard


def test_converse_without_speech_says_so(reasoner, transcriber, voice):
    with pytest.raises(ValueError, match="no speech"):
        converse(silence(2.0), reasoner, transcriber, voice)


def test_converse_command_writes_the_answer_and_json(espeak, reasoner, tmp_path):
    question, answer = tmp_path / "question.wav", tmp_path / "answer.wav"
    write_wav(question, np.concatenate([silence(0.3), espeak("Thank you."), silence(0.5)]), RATE)
    env = clean_env(XDG_DATA_HOME=str(tmp_path / "data"), XDG_CONFIG_HOME=str(tmp_path))
    result = subprocess.run(
        [sys.executable, "-m", "quicksilver.ui.cli", "converse", "--input", str(question),
         "--output", str(answer), "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["transcript"].lower().startswith("thank you")
    assert answers("thank you", report["answer"]), report["answer"]
    assert report["steps"] == 16 and report["output"] == str(answer)
    assert set(report["timings_ms"]) >= {"vad_ms", "transcript_ms", "engine_ms", "total_ms"}
    assert read_wav(answer).size > 0
    log = (tmp_path / "data" / "quicksilver" / "history.jsonl").read_text()
    assert json.loads(log)["source"] == "file"
