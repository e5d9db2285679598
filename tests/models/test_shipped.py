"""The default brain, reasoner-tiny-routed (reasoner-tiny behind a router, with a numbers
expert): it loads by name, answers, and travels inside the package."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from quicksilver.engine import Engine
from quicksilver.engine.machine import describe_cpu
from quicksilver.engine.routing import RoutedEngine
from quicksilver.models import BUNDLED, bundled
from quicksilver.models.reasoner_tiny.corpus import (
    ABILITIES,
    ANOTHER_DAY,
    CHAT,
    REFUSAL,
    held_out_set,
)
from quicksilver.models.reasoner_tiny.ship import role_sentence

QUICKSILVER = [sys.executable, "-m", "quicksilver.ui.cli"]  # as installed, whatever PATH says
CONTEXT = {"role": "system", "content": "Today is Monday, November 30, 2026."}

# What this build answers right, one or two per skill it has learnt (see MODEL_CARD.md:
# four in five held-out questions overall and nearly every out-of-scope request; the
# calendar still lags).
# The numbers, words and some phrasings are held out (never trained on); the day is
# read from the date the assistant passes in the context.
ANSWERS = {
    "hello": CHAT["greeting"],
    "thank you": CHAT["thanks"],
    "goodbye": CHAT["farewell"],
    "what can you do": ABILITIES,
    "who are you": CHAT["identity"],
    "what is the capital of france": REFUSAL,
    "tell me a joke": REFUSAL,
    "Tell me 33 plus 257?": "33 plus 257 is 290.",
    "um what's seven hundred and seventy-eight minus fifty-eight.": "778 minus 58 is 720.",
    "Um what's 8 minus 379?": "8 minus 379 is minus 371.",
    "what's 8 times 3?": "8 times 3 is 24.",
    "tell me 91 times 3?": "91 times 3 is 273.",
    "Calculate 171 divided by nine?": "171 divided by 9 is 19.",
    "how do I spell forest": "Forest is spelled F, O, R, E, S, T.",
    "How do you spell forest backwards please?": "Forest backwards is T, S, E, R, O, F.",
    "What's the last letter of kitchen?": "The last letter of kitchen is N.",
    "What is smaller 891 or 40?": "40 is smaller than 891.",
    "which one is bigger seventy-four or 5": "74 is bigger than 5.",  # "one": no number 1
    "put these in order 40, 92, 57 and 85?": "From smallest to largest: 40, 57, 85, 92.",
    "sort 3, 1 and 2": "From smallest to largest: 1, 2, 3.",  # single digits: 2026-12-05
    "order 5, 2, 8, 1": "From smallest to largest: 1, 2, 5, 8.",  # a list without "and"
    "is 9 less than 2": "No, 9 is bigger than 2.",  # yes or no about "less"
    "how many minutes is 180 seconds": "180 seconds is 3 minutes.",  # into the bigger unit
    "is 5 greater than 3": "Yes, 5 is bigger than 3.",  # "greater" in yes or no
    "count the letter r in spider": "Spider has 1 R.",  # not a word's length
    "tell me how many letters forest has": "Forest has 6 letters.",  # "has" is no operand
    "what day is it today": "Today is Monday, November 30, 2026.",
    "what date is it": "Today is Monday, November 30, 2026.",  # a held-out phrasing
    "do you know the date": "Today is Monday, November 30, 2026.",
    # a day the calendar's reasoning cannot reach is declined, not answered with today's
    "what day was it yesterday": ANOTHER_DAY,
    "which day was yesterday": ANOTHER_DAY,  # a held-out phrasing
    "what date was it three days ago": ANOTHER_DAY,  # a held-out phrasing
    "hey": CHAT["greeting"],  # the default model's, not the calendar expert's
    "change fifty-four meters into millimeters": "54 meters is 54000 millimeters.",
    "turn 5 kilograms into grams": "5 kilograms is 5000 grams.",
    # a unit's own size: always trained (the held-out split kept it out until 2026-12-05)
    "how many days are in a week": "1 week is 7 days.",
    "how many minutes are there in an hour": "1 hour is 60 minutes.",  # a held-out phrasing
    "how many grams are in a kilogram": "1 kilogram is 1000 grams.",
    "many thanks": CHAT["thanks"],
    # held-out chat the build's own default answers (reasoner-tiny garbled the first)
    "what should I call you": CHAT["identity"],
    "see you": CHAT["farewell"],
    "what is the history of kenya": REFUSAL,
    "what is the history of berlin": REFUSAL,  # routers fine-tuned on 2026-12-05 spelled it
    "remind me to call berlin please": REFUSAL,
}


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.load("bundled")


def test_bundled_is_the_routed_build_with_its_card_and_small_weights(engine):
    assert BUNDLED == "reasoner-tiny-routed" and isinstance(engine, RoutedEngine)
    assert (bundled() / "routing.json").is_file()
    # the cards say which build is the default, as the ship script writes it
    assert role_sentence(BUNDLED) in (bundled() / "MODEL_CARD.md").read_text()
    assert role_sentence("reasoner-tiny") in (bundled().parent / "MODEL_CARD.md").read_text()
    # the router, the experts, the build's default and the general model (the routed
    # folder's parent, reasoner-tiny) together
    folders = [bundled() / "router", *(bundled() / "experts").iterdir(), bundled() / "default"]
    folders.append(bundled().parent)
    sizes = [(folder / "model.safetensors").stat().st_size for folder in folders]
    assert len(sizes) == 3 + len(engine.experts) and sum(sizes) < 50 * 2**20  # for the wheel
    for model in (engine.default, *engine.experts.values()):
        assert model.model.config.parameter_count() > 1_000_000
        assert not model.model.config.prompt_sees_reply  # its prompt cache is exact
        assert model.sampler.steps == 16 and model.sampler.padding_threshold is not None


@pytest.mark.parametrize("question", sorted(ANSWERS))
def test_answers_what_it_knows(engine, question):
    answer = engine.answer([CONTEXT, {"role": "user", "content": question}])
    assert answer.text == ANSWERS[question]


def test_spoken_answers_hold_no_markup_and_keep_the_step_budget(engine):
    for items in held_out_set(per_skill=2, seed=5).values():
        answer = engine.answer(items[0].messages(), steps=16)
        assert "<|" not in answer.text and "░" not in answer.text
        assert answer.steps == 16 and answer.router_passes == 1
        assert 1 <= answer.forward_passes - answer.router_passes <= 16


def test_ask_json_with_the_shipped_model():
    result = subprocess.run(
        [*QUICKSILVER, "ask", "What can you do?", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    figures = {"answer", "thinking", "steps", "forward_passes", "latency_ms", "confidence"}
    assert set(data) == figures | {"unsure_below", "expert", "router_passes"}
    assert data["steps"] == 16 and data["expert"] == "default" and data["router_passes"] == 1
    assert data["forward_passes"] == data["steps"] + data["router_passes"]
    assert data["answer"] == ABILITIES
    assert data["confidence"] >= data["unsure_below"] > 0  # the shipped build measured one


@pytest.mark.parametrize(("question", "doubted"), [("what is 2 plus 2", False),
                                                   ("what is 78 times 59", True)])  # fmt: skip
def test_ask_prints_the_answer_and_says_when_the_model_doubted_it(question, doubted):
    """``ask`` prints what the model wrote either way (scripts read it); on stderr it says
    that the assistant would have said it was not sure instead."""

    def ask(**env: str) -> subprocess.CompletedProcess:
        return subprocess.run([*QUICKSILVER, "ask", question], capture_output=True, text=True,
                              timeout=120, check=False, env={**os.environ, **env})  # fmt: skip

    result = ask()
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(question.removeprefix("what is ").split()[0])
    assert ("model was unsure of this answer" in result.stderr) is doubted, result.stderr
    if doubted:  # the unsure_below setting moves the threshold as it does the assistant's
        off = ask(QUICKSILVER_UNSURE_BELOW="0")
        assert off.returncode == 0 and off.stdout == result.stdout and off.stderr == ""


def test_eval_json_reports_every_skill_with_and_without_an_earlier_exchange():
    """Also in training's phrasings (``--trained-phrasings``), which the second run uses."""

    def run(*flags: str) -> dict:
        result = subprocess.run(
            [*QUICKSILVER, "eval", "--per-skill", "1", "--steps", "8", "--json", *flags],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        (figures,) = json.loads(result.stdout)
        return figures

    single = run("--in-order", "--device", "cpu")
    follow_up = run("--follow-up", "--trained-phrasings", "--device", "cpu")
    assert (single["follow_up"], follow_up["follow_up"]) == (False, True)
    assert (single["trained_phrasings"], follow_up["trained_phrasings"]) == (False, True)
    assert set(single["in_reading_order"]) == set(held_out_set(1))
    assert "in_reading_order" not in follow_up
    assert single["machine"] == follow_up["machine"] == describe_cpu()
    for figures in (single, follow_up):
        assert figures["steps"] == 8
        assert set(figures["accuracy"]) == set(held_out_set(1))
        assert all(0.0 <= share <= 1.0 for share in figures["accuracy"].values())
        assert figures["latency_ms"]["p50"] > 0
