"""The question model that chooses among Whisper's hypotheses (audio/language_model.py)."""

from __future__ import annotations

import json
import math

import pytest
from quicksilver.audio.language_model import LETTER, NUMBER, QuestionModel, words

QUESTIONS = [
    "what is 17 plus 5",
    "tell me 40 minus 2",
    "what is nine times eight",
    "tell me three hundred and five plus ninety",
    "how many r's are there in strawberry",
    "how many t's are in pizza",
    "spell the word kitchen",
    "spell the word dog backwards",
] * 3


@pytest.fixture(scope="module")
def model() -> QuestionModel:
    return QuestionModel.train(QUESTIONS, min_count=1)


def test_words_are_canonical():
    assert words("What's 217 plus nine?") == ["what's", NUMBER, "plus", NUMBER]
    assert words("two hundred and five") == [NUMBER, "and", NUMBER]
    assert words("twenty-one") == [NUMBER]
    assert words("How many R's in strawberry") == ["how", "many", LETTER, "in", "strawberry"]
    assert words("count the t in turtle") == ["count", "the", LETTER, "in", "turtle"]
    assert words("a cat I saw") == ["a", "cat", "i", "saw"]  # words, not letters


def test_a_question_of_the_domain_beats_a_mishearing(model):
    assert model.score("tell me 10 plus 9") > model.score("tell me 10 plus i")
    assert model.score("how many t's are in turtle") > model.score("how many teas are in turtle")
    assert model.score("spell the word sugar") > model.score("tell the word sugar")


def test_an_unseen_word_costs_a_little_not_everything(model):
    unseen = model.score("spell the word zeppelin")
    assert math.isfinite(unseen)
    assert unseen < model.score("spell the word kitchen")
    assert unseen > model.score("zeppelin word the spell")


def test_probabilities_sum_to_one(model):
    context = ("what", "is")
    vocabulary = sorted(model.vocabulary)
    seen = sum(model.probability(context, word) for word in vocabulary)
    unseen = model.probability(context, "never-counted")
    assert seen + unseen == pytest.approx(1.0, abs=1e-9)


def test_rare_ngrams_are_pruned_but_words_kept():
    pruned = QuestionModel.train([*QUESTIONS, "what is the capital of peru"], min_count=2)
    assert "peru" in pruned.vocabulary
    assert "capital of peru" not in pruned.counts
    assert "what is" in pruned.counts


def test_saved_and_loaded_scores_the_same(model, tmp_path):
    path = model.save(tmp_path / "questions.lm.json")
    loaded = QuestionModel.load(path)
    for question in ("what is 3 plus 4", "spell the word zeppelin", ""):
        assert loaded.score(question) == model.score(question)


def test_a_file_that_is_not_a_question_model_is_refused(tmp_path):
    missing = tmp_path / "absent.json"
    with pytest.raises(ValueError, match="cannot read the question model"):
        QuestionModel.load(missing)
    other = tmp_path / "config.json"
    other.write_text(json.dumps({"format": "quicksilver-dllm"}))
    with pytest.raises(ValueError, match="is not a question model"):
        QuestionModel.load(other)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read"):
        QuestionModel.load(broken)
