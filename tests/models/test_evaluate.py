"""``quicksilver eval`` tells a question read as another from a slip of the reasoning."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from quicksilver.engine.machine import describe_cpu
from quicksilver.models.reasoner_tiny.evaluate import FRAME, VALUE, evaluate, miss_kind
from quicksilver.models.reasoner_tiny.train import build_engine

REFUSAL = "Sorry, I can't answer that yet. I can do arithmetic, spell words, compare numbers."


@pytest.mark.parametrize(
    ("wanted", "got", "kind"),
    [
        ("The first letter of forest is F.", REFUSAL, FRAME),
        ("283 is bigger than 66.", "66 is smaller than 283.", FRAME),
        ("I can do arithmetic, spell words.", "I'm Quicksilver, a voice assistant.", FRAME),
        ("94 times 29 is 2726.", "", FRAME),
        ("The first letter of drum is D.", "The last letter of drum is M.", FRAME),
        ("94 times 29 is 2726.", "94 times 29 is 2616.", VALUE),
        ("Committee has no X's.", "Committe has no X's.", VALUE),  # the word's copy
        ("Forest has 6 letters.", "Forest has 6 E's.", FRAME),  # a length read as a count
        ("Yes, 5 is bigger than 3.", "No, 5 is bigger than 3.", VALUE),
        ("Tomorrow is Tuesday, March 30, 2083.", "Tomorrow is Thursday, March 30, 2083.", VALUE),
    ],
)
def test_a_miss_is_another_frame_or_a_wrong_value(wanted, got, kind):
    assert miss_kind(wanted, got) == kind


def test_every_miss_is_counted_by_kind_not_only_the_few_kept():
    engine = build_engine(seed=0, d_model=32, n_layers=2, n_heads=2)  # untrained: all wrong
    result = evaluate(engine, per_skill=4, steps=2, skills=["addition", "spelling"])
    for score in result.scores:
        assert sum(score.miss_kinds.values()) == score.total - score.correct == 4
        assert len(score.misses) == 3
    assert result.to_dict()["misses"] == {s.skill: dict(s.miss_kinds) for s in result.scores}


def test_show_misses_prints_each_skills_wrong_answers_by_kind():
    result = subprocess.run(
        [sys.executable, "-m", "quicksilver.ui.cli", "eval", "--per-skill", "1", "--steps", "1",
         "--show-misses", "--device", "cpu"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "wrong answers at 1 steps, by kind" in result.stdout
    assert f"measured on         {describe_cpu()}" in result.stdout  # beside the latency
    kinds = re.findall(r"^\[[a-z/ ]+\] 1 of 1: 1 (another frame|wrong value)$", result.stdout, re.M)
    examples = re.findall(r"^    .+: wanted .+, got .+ \((another frame|wrong value)\)$",
                          result.stdout, re.M)  # fmt: skip
    assert kinds and kinds == examples  # one line per skill missed, then its one example
