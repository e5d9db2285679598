"""What decides whether a spoken question reaches the engine intact: the domain prompt
Whisper is given, clear errors for a model that cannot load, the thread budget, joining a
number Whisper wrote in pieces, and the benchmark's content-intact checker."""

from __future__ import annotations

import os

import numpy as np
import pytest
from quicksilver.audio.stt import DOMAIN_PROMPT, SttOptions, Transcriber
from quicksilver.audio.synthetic_speech import room_noise, with_noise
from quicksilver.audio.textnorm import spoken_numbers_to_digits
from quicksilver.audio.tts import Voice

from benchmarks.spoken_set import (
    content_intact,
    content_words,
    missing_content,
)
from tests.conftest import silence

# A made-up name: tiny.en writes it "Calmero" unless a prompt spells it.
NAME_SENTENCE = "Please call Kelvaro now."


@pytest.fixture(scope="module")
def name_speech(espeak) -> np.ndarray:
    return np.concatenate([silence(0.3), espeak(NAME_SENTENCE), silence(0.15)])


@pytest.mark.parametrize(
    "options",
    [
        SttOptions(initial_prompt="Kelvaro"),
        SttOptions(initial_prompt="Kelvaro", short_window=False),
        SttOptions(initial_prompt=None, hotwords="Kelvaro"),
    ],
    ids=["prompt", "prompt-full-window", "hotwords"],
)
def test_prompt_words_reach_whisper(name_speech, options):
    plain = Transcriber(options=SttOptions(initial_prompt=None))
    prompted = Transcriber(options=options)
    assert "Kelvaro" not in plain.transcribe(name_speech)
    assert "Kelvaro" in prompted.transcribe(name_speech)


def test_domain_prompt_is_the_default():
    assert SttOptions().initial_prompt == DOMAIN_PROMPT
    assert {"times", "plus", "divided", "Spell", "letter"} <= set(
        DOMAIN_PROMPT.replace("?", " ").replace(".", " ").split()
    )


def test_unknown_model_name_is_a_clear_error():
    with pytest.raises(
        ValueError, match=r"unknown Whisper model 'tinyy\.en'; did you mean 'tiny\.en'"
    ):
        Transcriber("tinyy.en")


def test_negative_thread_counts_are_refused():
    with pytest.raises(ValueError, match="cpu_threads"):
        Transcriber(cpu_threads=-1)
    with pytest.raises(ValueError, match="threads"):
        Voice(threads=-1)


def _threads_started(make) -> int:
    """OS threads this process gained while ``make()`` built a model and used it once."""
    before = len(os.listdir("/proc/self/task"))
    model = make()
    model.transcribe(room_noise(16000) * 0.1)
    return len(os.listdir("/proc/self/task")) - before


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_whisper_uses_the_threads_it_is_given():
    one = SttOptions(vad_gate=False)
    assert Transcriber(cpu_threads=1).cpu_threads == 1
    assert _threads_started(lambda: Transcriber(cpu_threads=3, options=one)) > _threads_started(
        lambda: Transcriber(cpu_threads=1, options=one)
    )


def test_piper_uses_the_threads_it_is_given():
    voice = Voice(threads=1)
    assert voice._piper.session.get_session_options().intra_op_num_threads == 1


@pytest.mark.parametrize(
    ("heard", "joined"),
    [
        ("What is 200 and 5 plus 90?", "What is 205 plus 90?"),
        ("is 43 greater than 500 and 97", "is 43 greater than 597"),
        ("greater than 590 7 for me", "greater than 597 for me"),
        ("what is 40 2 plus 1", "what is 42 plus 1"),
        ("put these in order 18, 68 and 31", "put these in order 18, 68 and 31"),
        ("sort 300, 5 and 20", "sort 300, 5 and 20"),
        ("which is bigger, 9.11 or 9.9", "which is bigger, 9.11 or 9.9"),
        ("in 2030 days", "in 2030 days"),
        ("1,200 and 5", "1,200 and 5"),
        ("3.40 5", "3.40 5"),
        ("Which 1 is bigger 91 or 76 please?", "Which one is bigger 91 or 76 please?"),
        ("is 5 more than that 1?", "is 5 more than that one?"),
        ("which 1.5 is bigger", "which 1.5 is bigger"),
        ("is 1 bigger than the 1 before", "is 1 bigger than the 1 before"),
    ],
)
def test_spoken_numbers_are_joined(heard, joined):
    assert spoken_numbers_to_digits(heard) == joined


def test_content_words_are_numbers_operators_units_and_asked_words():
    assert content_words("What's four hundred and ninety-two divided by twelve") == [
        "492", "divided", "by", "12",
    ]  # fmt: skip
    assert content_words("Hey how many f's are there in theater.") == ["f", "theater"]
    assert content_words("Hey change 77 kilograms into grams") == ["77", "kilograms", "grams"]
    assert content_words("okay spell the word spider backwards?") == [
        "spell", "spider", "backwards",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("question", "transcript", "missing"),
    [
        ("What is two hundred and five plus ninety?", "what is 205 plus 90", []),
        ("What is two hundred and five plus ninety?", "What is 200 and 5 plus i n t?",
         ["205", "90"]),
        ("How much is nine times eight?", "How much is I the time made?", ["9", "times", "8"]),
        ("Which number is larger, fifteen or fifty?", "which number is larger, 50 or 50.",
         ["15"]),
        ("Tell me 145 minus 2", "tell me 2 minus 145", ["minus", "2"]),  # in order
        ("how many t's are there in pizza", "How many Ts are in pizza?", []),
        ("how many t's are there in pizza", "How many teas are in pizza?", ["t"]),
        ("Spell the word dog.", "Tell the weird dog.", ["spell"]),
        ("um calculate 5 times 8 please", "5 times eight", []),  # frame words may go
    ],
)  # fmt: skip
def test_content_intact_checker(question, transcript, missing):
    assert missing_content(question, transcript) == missing
    assert content_intact(question, transcript) == (not missing)


def test_room_noise_is_mixed_at_the_asked_ratio():
    speech = np.concatenate([silence(0.3), np.sin(np.arange(16000) / 5).astype(np.float32) * 0.3])
    noisy = with_noise(speech, 20.0)
    noise = noisy - speech
    loud = np.abs(speech) > 0.01
    snr = 10 * np.log10(np.mean(speech[loud] ** 2) / np.mean(noise**2))
    assert snr == pytest.approx(20.0, abs=0.5)
    with pytest.raises(ValueError, match="silence"):
        with_noise(silence(1), 20.0)


def test_a_mishearing_that_asks_the_same_keeps_the_answer():
    """The benchmark's same-answer count: the shipped engine answers "what day is it" as
    it answers "what date is it", so that mishearing keeps the answer, while a misheard
    number does not; the report then adds a table of same answers."""
    from benchmarks.transcription import Tally, count_same_answers, report

    heard = [
        ("what date is it", "What day is it?"),
        ("what is 12 plus 9", "What is 12 plus 5?"),
        ("what is 12 plus 9", "What is 12 plus 9?"),
    ]
    tallies = {"option": {"voice clean": Tally(intact=1, total=3, seconds=[0.1], heard=heard)}}
    assert "Same answer" not in report(tallies, "option")
    count_same_answers(tallies, threads=1)
    assert tallies["option"]["voice clean"].alike == 2
    assert "Same answer:" in report(tallies, "option")
