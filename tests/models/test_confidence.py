"""The shipped model's confidence and the unsure threshold chosen for it (issue 27)."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from quicksilver.engine import Engine
from quicksilver.models.reasoner_tiny import confidence
from quicksilver.models.reasoner_tiny.confidence import Catches, choose_threshold

FOLDER = confidence.HERE
RIGHT = {"what is 2 plus 2": "2 plus 2 is 4.", "thank you": "You're welcome!"}
# Held-out phrasings it answers wrong ("There is 1 L in committee."), with the right answer
WRONG = {
    "count the letter e in committee": "Committee has 2 E's.",
    "is 19.2 greater than 20.3": "No, 19.2 is smaller than 20.3.",
}


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.load("reasoner-tiny", device="cpu")


def test_the_shipped_threshold_is_read_from_its_config(engine):
    stored = json.loads((FOLDER / "config.json").read_text())["answer"]["unsure_below"]
    assert engine.unsure_below == stored and 0 < stored < 1


def test_right_answers_are_confident_and_wrong_ones_are_not(engine):
    for question, wanted in RIGHT.items():
        answer = engine.answer(question)
        assert answer.text == wanted
        assert answer.confidence >= engine.unsure_below, question
    for question, right in WRONG.items():
        answer = engine.answer(question)
        assert answer.text != right  # wrong
        assert answer.confidence < engine.unsure_below, (question, answer.text)


def test_batched_answers_keep_their_single_confidence(engine):
    questions = [*RIGHT, *WRONG]
    alone = [engine.answer(question) for question in questions]
    together = engine.answer_batch(questions)
    assert [a.tokens for a in together] == [a.tokens for a in alone]
    assert [a.confidence for a in together] == pytest.approx([a.confidence for a in alone], 1e-4)


def test_the_threshold_catches_most_wrong_net_of_right_hidden():
    judged = [(0.1, False), (0.2, False), (0.3, True), (0.4, False), (0.9, True), (0.95, True)]
    assert choose_threshold(judged) == 0.25  # a tie (net 2) goes to hiding fewer right
    judged.append((0.5, False))
    assert choose_threshold(judged) == 0.7  # catches 4 wrong, hides 1 right
    counts = Catches.of(judged, 0.7)
    assert (counts.caught, counts.wrong, counts.hidden, counts.right) == (4, 4, 1, 3)
    assert counts.said_right == 1.0
    assert choose_threshold([(0.2, True), (0.9, False)]) == 0.0  # nothing worth hiding


def test_the_card_reports_the_stored_threshold_and_the_section_is_replaced():
    card = (FOLDER / "MODEL_CARD.md").read_text()
    stored = json.loads((FOLDER / "config.json").read_text())["answer"]["unsure_below"]
    assert card.count(confidence.HEADING) == 1
    assert f"Below **{stored:.3f}**" in card
    assert re.search(r"\| \*\*all\*\* \| \d+ of \d+ \(\d+%\) \| \d+ of \d+ \(\d+%\) \|", card)
    section = f"{confidence.HEADING}\n\nnew figures\n"
    replaced = confidence.replace_section(card, section)
    assert replaced.count(confidence.HEADING) == 1 and "new figures" in replaced
    assert replaced.index("new figures") < replaced.index("## Limits")
    start = card.index(confidence.HEADING)
    assert replaced[:start] == card[:start]  # the rest of the card stays as it was
    assert replaced[replaced.index("## Limits") :] == card[card.index("## Limits") :]
    fresh = confidence.replace_section("# card\n\n## Limits\n- few\n", section)
    assert fresh == f"# card\n\n{section}\n## Limits\n- few\n"


def test_the_threshold_is_written_where_each_kind_of_checkpoint_reads_it(tmp_path):
    """A plain build reads ``answer.unsure_below`` in config.json, a routed one
    ``unsure_below`` in routing.json; writing one changes nothing else."""
    plain = tmp_path / "plain"
    shutil.copytree(FOLDER, plain, ignore=shutil.ignore_patterns("routed", "*.py", "__pycache__"))
    before = json.loads((plain / "config.json").read_text())
    assert confidence.write_threshold(plain, 0.5) == ("answer.unsure_below", "config.json")
    after = json.loads((plain / "config.json").read_text())
    assert after == {**before, "answer": {**before.get("answer", {}), "unsure_below": 0.5}}
    assert Engine.load(plain, device="cpu").unsure_below == 0.5

    routed = tmp_path / "routed"
    shutil.copytree(FOLDER / "routed", routed)  # its every model inside it
    before = json.loads((routed / "routing.json").read_text())
    assert confidence.write_threshold(routed, 0.25) == ("unsure_below", "routing.json")
    assert json.loads((routed / "routing.json").read_text()) == {**before, "unsure_below": 0.25}
    assert Engine.load(routed, device="cpu").unsure_below == 0.25
