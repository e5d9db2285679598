"""Operand slots: a question's numbers and spelled-out words at fixed prompt positions."""

from __future__ import annotations

import pytest
from quicksilver.engine import ChatTemplate, Tokenizer
from quicksilver.models.reasoner_tiny import corpus
from quicksilver.models.reasoner_tiny.normalise import normalise_spoken
from quicksilver.models.reasoner_tiny.slots import (
    FRAME_WORDS,
    LETTER_LABEL_WORDS,
    asked_letter,
    operand_slots,
    padded,
    without_letter_label,
)

WORDS = ["what", " is", " plus", " do", " you", " get", " if", " take", " from", " spell", " to"]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    template = ChatTemplate(preparation="reasoner-tiny")
    return Tokenizer.word_level(WORDS, template=template)


def test_numbers_are_right_aligned_in_question_order():
    block = operand_slots("add 2 to 94", lambda word: False)
    assert block == "| 002 094 ___ ___ | ____________ ____________"


def test_a_decimal_gives_every_number_two_decimal_places():
    block = operand_slots("which is bigger 9.11 or 9.9 or 12", lambda word: False)
    assert block.startswith("| 009.11 009.90 012.00 ___.__ |")


def test_words_spelled_out_fill_the_word_fields_and_extra_values_are_dropped():
    spelled = {"theater", "mississippi", "kitten"}.__contains__
    block = operand_slots("spell theater 1 2 3 4 5 mississippi kitten", spelled)
    assert block == "| 001 002 003 004 | theater_____ mississippi_"


def test_a_word_that_names_the_next_one_takes_no_field():
    """In "the word forest" the operand is forest; only a last "word" is one itself."""
    spelled = {"word", "forest", "words"}.__contains__
    assert operand_slots("spell the word forest", spelled).endswith("| forest______ ____________")
    assert operand_slots("spell word", spelled).endswith("| word________ ____________")
    assert operand_slots("spell words", spelled).endswith("| words_______ ____________")


def test_a_value_too_wide_for_its_field_keeps_every_digit():
    assert padded(1234) == "1234" and padded(7) == "007" and padded("4.5", True) == "004.50"


def test_the_fields_sit_at_the_same_distance_from_the_reply_whatever_the_phrasing(tok):
    """What the slots are for: each digit of each number is always the same number of
    tokens before the reply canvas, so the model can copy it by position."""
    questions = ["add 2 to 94", "What do you get if you take seventeen from 255?", "um 3 plus 4"]
    block_lengths = set()
    for question in questions:
        block = operand_slots(normalise_spoken(question), tok.spells_out)
        block_ids = tok.encode(" " + block)
        prompt = tok.prompt_ids(question)
        assert prompt[-len(block_ids) - 3 : -3] == block_ids  # then <|end|>, the opening
        block_lengths.add(len(block_ids))
    assert len(block_lengths) == 1


def test_only_the_question_being_answered_gets_slots(tok):
    conversation = [
        {"role": "user", "content": "what is 5 plus 6"},
        {"role": "assistant", "content": "5 plus 6 is 11."},
        {"role": "user", "content": "spell theater"},
    ]
    prompt = tok.hf.decode(tok.prompt_ids(conversation), skip_special_tokens=False)
    assert prompt.count("|") - prompt.count("<|") * 2 == 2  # one block, two separators
    assert "what is 5 plus 6<|end|>" in prompt
    assert "spell theater | ___ ___ ___ ___ | theater_____ ____________<|end|>" in prompt


def test_the_second_preparation_keeps_the_asked_word_after_unfamiliar_phrasing():
    """Phrasing words the tokenizer spells out ("give", "number") come before the word asked
    about; the first preparation filled the fields with them, the second keeps the last."""
    spelled = {"give", "number", "penguin", "gonna"}.__contains__
    question = "give me the number of u's in penguin"
    assert operand_slots(question, spelled).endswith("| give________ number______")
    assert operand_slots(question, spelled, last_words=True).endswith("| number______ penguin_____")
    # with two or fewer spelled-out words both preparations agree
    assert operand_slots("spell penguin", spelled, last_words=True) == operand_slots(
        "spell penguin", spelled
    )


def test_fresh_runs_train_with_the_second_preparation():
    from quicksilver.models.reasoner_tiny.prompt import REASONER_TINY_2
    from quicksilver.models.reasoner_tiny.train import PREPARATION, build_engine

    engine = build_engine(0, d_model=32, n_layers=1, n_heads=2)
    assert engine.tokenizer.template.preparation == PREPARATION == "reasoner-tiny-2"
    assert engine.tokenizer.preparation is REASONER_TINY_2
    prompt = engine.tokenizer.decode(
        engine.tokenizer.prompt_ids("how many b's gonna nice are in brean")
    )
    assert prompt.endswith("| nice________ brean_______")  # not "gonna", "nice"


@pytest.mark.parametrize(
    ("question", "letter"),
    [
        ("how many r's are in strawberry", "r"),
        ("how many rs are in strawberry", "r"),  # as Whisper may write it
        ("count the letter x in library", "x"),
        ("how many times does the letter i appear in mississippi", "i"),
        ("how many a's are in banana", "a"),
        ("is there an e in apple", "e"),
        ("what is the first letter of apple", None),
        ("what is 7 times 3", None),
        ("is 9 bigger than 3", None),  # "is" is not an i
    ],
)
def test_the_asked_letter_is_found_whatever_the_phrasing(question, letter):
    assert asked_letter(question) == letter


def test_the_letters_preparation_holds_the_letter_in_a_field_and_letter_names_the_word():
    """Two phrasings of one count end with the same block; a question without a letter
    leaves the field empty, so every field stays where it was."""
    spelled = {"letter", "library", "penguin", "rs"}.__contains__
    first = operand_slots("count the letter x in library", spelled, last_words=True, letter=True)
    second = operand_slots("how many x's are in library", spelled, last_words=True, letter=True)
    assert first == second == "| ___ ___ ___ ___ | x | library_____ ____________"
    assert operand_slots("spell penguin", spelled, True, True) == (
        "| ___ ___ ___ ___ | _ | penguin_____ ____________"
    )
    # without the field, "letter" is an operand as before (the shipped model's prompts)
    assert operand_slots("count the letter x in library", spelled, last_words=True).endswith(
        "| letter______ library_____"
    )


def test_a_run_can_learn_the_letters_preparation_from_the_shipped_weights():
    from quicksilver.models import path
    from quicksilver.models.reasoner_tiny.prompt import REASONER_TINY_LETTERS
    from quicksilver.models.reasoner_tiny.train import main, start_from

    engine = start_from(path("reasoner-tiny"), preparation="reasoner-tiny-letters")
    assert engine.tokenizer.preparation is REASONER_TINY_LETTERS
    prompt = engine.tokenizer.decode(engine.tokenizer.prompt_ids("Count the letter X in jumbo?"))
    assert "count the letter x in jumbo | ___ ___ ___ ___ | x | jumbo" in prompt
    with pytest.raises(SystemExit):  # a fresh run reads the recipe's preparation
        main(["--preparation", "reasoner-tiny-letters", "--out", "unused"])


LETTER_SKILL_PHRASES = [
    corpus.COUNT_PHRASES,
    corpus.LENGTH_PHRASES,
    corpus.SPELL_PHRASES,
    corpus.BACKWARDS_PHRASES,
    corpus.FIRST_PHRASES,
    corpus.LAST_PHRASES,
]


@pytest.fixture(scope="module")
def shipped_spelled():
    from quicksilver.engine import Engine
    from quicksilver.models import path

    return Engine.load(path("reasoner-tiny")).tokenizer.spells_out


def test_frame_words_are_the_spelled_out_words_of_the_letter_skills_training_phrasings(
    shipped_spelled,
):
    """The list is neither short of a training frame word nor holds a word that only a
    held-out phrasing says (that would tell the slots about phrasings never trained)."""
    trained = corpus.words_in(
        text.replace("{w}", "").replace("{l}", "") for phrases in LETTER_SKILL_PHRASES
        for text in phrases[0]
    )  # fmt: skip
    spelled = {word for word in trained if len(word) > 1 and shipped_spelled(word)}
    assert spelled - LETTER_LABEL_WORDS == FRAME_WORDS


@pytest.mark.parametrize("word", ["kitten", "plicker", "strawberry"])
def test_with_frames_the_asked_word_holds_the_first_field_in_every_letter_phrasing(
    word, shipped_spelled
):
    """Trained and held-out phrasings alike: "how long is kitten", "kitten has how many
    letters", "which letter does kitten begin with" all end with the word in field one."""
    for phrases in LETTER_SKILL_PHRASES:
        for text in [*phrases[0], *phrases[1]]:
            question = normalise_spoken(text.format(w=word, l="e"))
            block = operand_slots(question, shipped_spelled, True, True, frames=True)
            assert block.endswith(f"| {word.ljust(12, '_')} ____________"), question


def test_a_word_asked_about_that_is_a_frame_word_still_takes_a_field():
    spelled = {"number", "long", "plicker"}.__contains__
    assert operand_slots("spell number", spelled, True, True, frames=True).endswith(
        "| number______ ____________"
    )
    assert operand_slots("how long is plicker", spelled, True, True, frames=True).endswith(
        "| plicker_____ ____________"
    )
    # without frames the frame word takes the first field, as the shipped expert reads it
    assert operand_slots("how long is plicker", spelled, True, True).endswith(
        "| long________ plicker_____"
    )


@pytest.mark.parametrize(
    ("question", "without"),
    [
        ("count the letter r in spider", "count the r in spider"),
        ("how many letter r's are there in spider", "how many r's are there in spider"),
        ("does the letter a appear in banana", "does the a appear in banana"),
        ("how many letters are in spider", "how many letters are in spider"),
        ("what letter does spider start with", "what letter does spider start with"),
        ("what is the first letter of spider", "what is the first letter of spider"),
    ],
)  # fmt: skip
def test_letter_is_dropped_only_before_the_letter_it_names(question, without):
    assert without_letter_label(question) == without


def test_the_second_letters_preparation_reads_the_letter_before_dropping_its_label():
    """ "count the letter a in banana": the field holds "a" (found after "letter"), and
    the question no longer shares "letter" with "how many letters are in banana"."""
    from quicksilver.models import path
    from quicksilver.models.reasoner_tiny.prompt import REASONER_TINY_LETTERS_2
    from quicksilver.models.reasoner_tiny.train import start_from

    engine = start_from(path("reasoner-tiny"), preparation="reasoner-tiny-letters-2")
    assert engine.tokenizer.preparation is REASONER_TINY_LETTERS_2
    prompt = engine.tokenizer.decode(engine.tokenizer.prompt_ids("Count the letter A in banana?"))
    assert "count the a in banana | ___ ___ ___ ___ | a | banana______ ____________" in prompt
