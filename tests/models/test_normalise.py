"""Spoken questions reach reasoner-tiny in one canonical form."""

from __future__ import annotations

import pytest
from quicksilver.audio.textnorm import int_to_words
from quicksilver.engine import ChatTemplate, Tokenizer
from quicksilver.models.reasoner_tiny import normalise
from quicksilver.models.reasoner_tiny.corpus import UNITS, number_words, training_items
from quicksilver.models.reasoner_tiny.normalise import LABELS, ONE_OF, normalise_spoken


@pytest.mark.parametrize(
    ("heard", "canonical"),
    [
        ("What's seventeen times three?", "what is 17 times 3"),
        ("um, what is 17 x 3", "what is 17 times 3"),
        ("17*3", "17 times 3"),
        ("What's eight x 4?", "what is 8 times 4"),  # Whisper writes both in one question
        ("three point five x two", "3.5 times 2"),
        ("x marks the spot", "x marks the spot"),
        ("Convert 5 km to m.", "convert 5 kilometers to m"),  # "m" alone only after a number
        ("how many mm are in 4cm", "how many millimeters are in 4 centimeters"),
        ("1 hr in mins", "1 hour in minutes"),
        ("How many metres are in a kilometre?", "how many meters are in 1 kilometer"),
        ("spell metre", "spell metre"),  # the asked word is kept as said
        ("count the letter m in mom", "count the letter m in mom"),
        ("mm, what is 5 plus 2", "what is 5 plus 2"),  # a filler, not millimeters
        ("Three hundred and five plus eighty-five.", "305 plus 85"),
        ("one thousand two hundred and thirty four minus 1,200", "1234 minus 1200"),
        ("what is 9 - 3", "what is 9 minus 3"),
        ("fifty-three - twenty-one", "53 minus 21"),
        ("twenty one divided by seven", "21 divided by 7"),
        ("84 / 7", "84 divided by 7"),
        ("nine point one one or nine point nine, which is bigger?", "9.11 or 9.9 which is bigger"),
        ("Is 9.11 bigger than 9.9?", "is 9.11 bigger than 9.9"),
        ("what is a hundred times two", "what is 100 times 2"),
        ("How many minutes are in an hour?", "how many minutes are in 1 hour"),
        ("convert a kilometer to meters", "convert 1 kilometer to meters"),
        ("wait a second", "wait a second"),  # no conversion asked
        ("tell me a joke", "tell me a joke"),
        ("How many R's are in strawberry?", "how many r's are in strawberry"),
        ("What is the first letter of banana?", "what is the first letter of banana"),
        ("the 21st of March", "the 21 of march"),
        ("Uh, spell banana backwards.", "spell banana backwards"),
        ("three four", "3 4"),
        ("sort 37, eighty, eighteen and 14", "sort 37 80 18 and 14"),  # no 98
        ("Order 5, 2, 8, 1.", "order 5 2 8 and 1"),  # a list as Whisper may write it
        ("put twelve, three, forty-five, six in order", "put 12 3 45 and 6 in order"),
        ("sort 3, 1, 2 for me, and quickly", "sort 3 1 2 for me and quickly"),
        ("Which one is bigger, seventy-four or one?", "which one is bigger 74 or 1"),
        ("the other one", "the other one"),
        ("one of them", "1 of them"),
        ("is one bigger than the one hundred", "is 1 bigger than the 100"),
        ("Spell the word summer?", "spell summer"),
        ("um spell the word gentle backwards.", "spell gentle backwards"),
        ("How many r's are in the word strawberry?", "how many r's are in strawberry"),
        ("What's the first letter of the word kitten", "what is the first letter of kitten"),
        ("what is the word for dog", "what is the word for dog"),  # no operand follows
        ("what does the word mean", "what does the word mean"),
        ("how do you spell word", "how do you spell word"),  # the operand itself
        ("Hello there!", "hello there"),
        ("   ", ""),
    ],
)
def test_transcripts_become_canonical(heard, canonical):
    assert normalise_spoken(heard) == canonical


def test_no_training_question_carries_a_label_so_the_shipped_build_reads_them_as_before():
    """Dropping "the word" before an operand is new to the preparation the shipped build
    was trained with; it changes nothing that build was trained on."""
    for item in training_items(20_000, seed=5):
        assert not LABELS & set(item.question.lower().replace("?", " ").split()), item


def test_a_list_gets_its_and_only_where_training_never_writes_one(monkeypatch):
    """The "and" before a list's last number is for lists written without it; training's
    questions (an augmented word perhaps between the list and its "and") read as before,
    so the shipped build sees them as it was trained."""
    questions = [item.question for item in training_items(20_000, seed=3)]
    with_and = [normalise_spoken(question) for question in questions]
    monkeypatch.setattr(normalise, "_lists_with_and", lambda words: words)
    assert with_and == [normalise_spoken(question) for question in questions]
    assert normalise_spoken("order 5, 2, 8, 1") == "order 5 2 8 1"  # the patch took


def test_every_number_said_either_way_reads_back_as_its_digits():
    """One table of number words: the corpus says numbers with "and", the voice without,
    and the normaliser reads both back."""
    for n in range(10_000):
        assert normalise_spoken(number_words(n)) == str(n)
        assert normalise_spoken(int_to_words(n)) == str(n)


def test_only_templates_that_name_the_preparation_normalise_user_text():
    question = "What's seventeen times three?"
    plain, spoken = (
        Tokenizer.byte_level(),
        Tokenizer.byte_level(template=ChatTemplate(preparation="reasoner-tiny-before-slots")),
    )
    system = {"role": "system", "content": "Today is Sunday, November 29, 2026."}
    messages = [system, {"role": "user", "content": question}]
    assert question in plain.hf.decode(plain.prompt_ids(messages))
    rendered = spoken.hf.decode(spoken.prompt_ids(messages))
    assert "what is 17 times 3" in rendered
    assert "Today is Sunday, November 29, 2026." in rendered  # system text untouched


def test_every_conversion_unit_but_second_is_one_after_a_or_an():
    """normalise cannot import the corpus (the corpus imports it), so its unit list is its
    own: this keeps it in step with the units the corpus converts."""
    names = {name for unit in UNITS for name in unit[:2]}
    assert names - {"second"} <= ONE_OF and "second" not in ONE_OF
    for name in names - {"second"}:
        article = "an" if name == "hour" else "a"
        assert normalise_spoken(f"convert {article} {name}") == f"convert 1 {name}"
