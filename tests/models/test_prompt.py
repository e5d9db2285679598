"""Reasoner-tiny's prompt preparation: the prompts and the date sentence it was trained on."""

from __future__ import annotations

import datetime
import json
import random
import shutil
from pathlib import Path

import pytest
from quicksilver.engine import Engine
from quicksilver.engine.checkpoints import load_checkpoint
from quicksilver.models import reasoner_tiny_folder
from quicksilver.models.reasoner_tiny import corpus
from quicksilver.models.reasoner_tiny.normalise import normalise_spoken
from quicksilver.models.reasoner_tiny.prompt import BEFORE_SLOTS, REASONER_TINY, date_context
from quicksilver.models.reasoner_tiny.slots import operand_slots

# Prompt ids the shipped model saw before its preparation moved out of the engine
# (engine.normalise and engine.slots behind two chat-template switches), recorded then;
# "spell the word forest" re-recorded when the normaliser began dropping the label "the
# word" (it now reads as "spell forest": no training question carries the label).
RECORDED = json.loads((Path(__file__).parent / "reasoner_tiny_prompts.json").read_text())
WEDNESDAY = datetime.date(2026, 12, 2)


@pytest.fixture(scope="module")
def shipped() -> Engine:
    return Engine.load("reasoner-tiny", device="cpu")


def test_the_shipped_model_sees_the_prompts_it_was_trained_on(shipped, reasoner):
    routed = reasoner  # the bundled build, loaded once for the run
    assert shipped.tokenizer.preparation is REASONER_TINY
    assert routed.tokenizer.preparation is REASONER_TINY  # its default model's
    for case in RECORDED:
        assert shipped.tokenizer.prompt_ids(case["conversation"]) == case["prompt_ids"], case
        assert routed.tokenizer.prompt_ids(case["conversation"]) == case["prompt_ids"], case
        assert shipped.count_prompt_tokens(case["conversation"]) == len(case["prompt_ids"])
        # the routed build counts the longest prompt any of its models reads
        assert routed.count_prompt_tokens(case["conversation"]) >= len(case["prompt_ids"])


def test_a_label_before_the_operand_is_read_as_the_operand_alone(shipped):
    tokenizer = shipped.tokenizer
    assert tokenizer.prompt_ids("spell the word forest") == tokenizer.prompt_ids("spell forest")
    assert tokenizer.prompt_ids("what is the word for dog") != tokenizer.prompt_ids(
        "what is for dog"
    )


def test_the_date_sentence_is_the_corpus_one(shipped):
    assert shipped.date_context(WEDNESDAY) == "Today is Wednesday, December 2, 2026."
    assert date_context(WEDNESDAY) == "Today is Wednesday, December 2, 2026."
    rng = random.Random(3)
    contexts = {corpus.calendar_item(rng, held_out=False).context for _ in range(50)}
    assert all(c.startswith("Today is ") and c.endswith(".") for c in contexts)
    for context in contexts:  # every training date reads back as date_context writes it
        day = datetime.datetime.strptime(context, "Today is %A, %B %d, %Y.").date()
        assert date_context(day) == context


def test_counting_includes_normalisation_and_the_operand_slots(shipped):
    """A caller's budget counts what the model sees, not the text it was given."""
    question = "What's seventeen times three?"
    normalised = normalise_spoken(question)
    block = operand_slots(normalised, shipped.tokenizer.spells_out)
    seen = shipped.tokenizer.encode(f"{normalised} {block}")
    markup = ["<|user|>", "<|end|>", "<|assistant|>", "<|think|>"]
    assert shipped.count_prompt_tokens(question) == len(seen) + len(markup)
    assert len(seen) > 3 * len(shipped.tokenizer.encode(question)) / 2


@pytest.mark.parametrize(
    ("switches", "preparation"),
    [
        ({"normalise_user_text": True, "operand_slots": True}, REASONER_TINY),
        ({"normalise_user_text": True}, BEFORE_SLOTS),
    ],
)
def test_a_build_folder_written_before_preparations_had_names_keeps_its_prompts(
    tmp_path, switches, preparation
):
    folder = tmp_path / "old-build"
    shutil.copytree(reasoner_tiny_folder(), folder)
    config = json.loads((folder / "config.json").read_text())
    del config["chat_template"]["preparation"]
    config["chat_template"].update(switches)
    (folder / "config.json").write_text(json.dumps(config))
    _, _, tokenizer = load_checkpoint(folder)
    assert tokenizer.preparation is preparation
    question = RECORDED[0]["conversation"]
    ids = tokenizer.prompt_ids(question)
    if preparation is REASONER_TINY:
        assert ids == RECORDED[0]["prompt_ids"]
    else:  # normalised, without the slot block
        assert tokenizer.decode(ids) == "what is 17 times 3"
