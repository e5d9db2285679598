"""The assistant says it is not sure instead of an answer the model doubted (issue 27)."""

from __future__ import annotations

import pytest
from quicksilver.assistant.commands import UpdateSettings
from quicksilver.assistant.config import Settings, load_settings
from quicksilver.assistant.events import AnswerReady
from quicksilver.assistant.stages import UNSURE
from quicksilver.assistant.transcript import TranscriptLog

from tests.assistant.sessions import ask_all, logged, typed_session

SURE, DOUBTED = "what is 2 plus 2", "what is 78 times 59"  # the shipped model's


@pytest.mark.asyncio
async def test_a_doubted_answer_is_not_said_and_the_log_keeps_it(reasoner, tmp_path):
    log = TranscriptLog(tmp_path / "history.jsonl")
    session = typed_session(reasoner, Settings(log_path=log.path))
    recorder = await ask_all(session, [SURE, DOUBTED])

    sure, doubted = recorder.of(AnswerReady)
    assert sure.text == "2 plus 2 is 4." and sure.withheld == ""
    assert sure.confidence >= reasoner.unsure_below
    assert doubted.text == UNSURE and doubted.withheld.startswith("78 times 59 is")
    assert doubted.withheld != "78 times 59 is 4602."  # the product it doubted was wrong
    assert doubted.confidence < reasoner.unsure_below
    records = await logged(log, 2)
    assert [(r.answer, r.withheld) for r in records] == [
        (sure.text, ""),
        (UNSURE, doubted.withheld),
    ]
    assert [r.confidence for r in records] == [sure.confidence, doubted.confidence]


@pytest.mark.asyncio
async def test_the_setting_turns_it_off_or_moves_the_threshold(reasoner):
    off = await ask_all(typed_session(reasoner, Settings(unsure_below=0)), [DOUBTED])
    (said,) = off.of(AnswerReady)
    assert said.text.startswith("78 times 59 is") and said.withheld == ""

    strict = typed_session(reasoner, Settings(unsure_below=1))
    (hidden,) = (await ask_all(strict, [SURE])).of(AnswerReady)
    assert hidden.text == UNSURE and hidden.withheld == "2 plus 2 is 4."

    live = typed_session(reasoner, Settings(unsure_below=1))
    live.send(UpdateSettings({"unsure_below": "0"}))  # live, checked as a flag's value
    (said,) = (await ask_all(live, [SURE])).of(AnswerReady)
    assert said.text == "2 plus 2 is 4."


def test_the_setting_is_a_number_from_0_to_1(tmp_path):
    env = {"HOME": str(tmp_path)}
    assert load_settings({}, env=env)[0].unsure_below is None  # the model's own
    assert load_settings({"unsure_below": "0.5"}, env=env)[0].unsure_below == 0.5
    settings, sources = load_settings({}, env={**env, "QUICKSILVER_UNSURE_BELOW": "0"})
    assert settings.unsure_below == 0.0 and sources["unsure_below"].startswith("environment")
    for bad in ("1.5", "-0.1", "often", "nan"):
        with pytest.raises(ValueError, match="unsure_below must be a number from 0 to 1"):
            load_settings({"unsure_below": bad}, env=env)
