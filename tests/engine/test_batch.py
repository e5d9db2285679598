"""Batched denoising: several conversations in one run, each as it would be alone."""

from __future__ import annotations

import pytest
from quicksilver.engine import Engine

from .conftest import MEMORISED, MEMORISED_REPLY_TOKENS, PLAIN_SCHEDULES, tiny_config

# Prompts of different lengths, so the batch pads and masks.
QUESTIONS = [
    "hi",
    "what is 17 times 3",
    "please name three colours of the rainbow, then say why the sky is blue",
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "and 4 plus 4?"}],
]


@pytest.fixture(scope="module", params=[True, False], ids=["bidirectional", "isolated-prompt"])
def engine(request) -> Engine:
    return Engine.random(tiny_config(prompt_sees_reply=request.param), seed=0)


@pytest.mark.parametrize(
    "options",
    [
        *PLAIN_SCHEDULES.values(),
        {"steps": 8, "max_new_tokens": 32, "canvas_cache": "delayed"},
        {"steps": 16, "max_new_tokens": 32, "block_length": 16, "canvas_cache": "delayed"},
    ],
    ids=[*PLAIN_SCHEDULES, "delayed", "delayed-blocks"],
)
def test_greedy_batch_answers_equal_single_answers(engine, count_passes, options):
    alone = [engine.answer(question, **options) for question in QUESTIONS]
    counter = count_passes(engine)
    together = engine.answer_batch(QUESTIONS, **options)
    assert [a.tokens for a in together] == [a.tokens for a in alone]
    assert len({a.prompt_tokens for a in together}) == len(QUESTIONS)
    # The fixed-step promise holds for every row, with one pass per step for all.
    assert all(a.forward_passes == a.steps == options["steps"] for a in together)
    assert counter.passes == options["steps"]


def test_a_row_never_sees_another_rows_tokens(engine):
    first = engine.answer_batch([QUESTIONS[1], QUESTIONS[0]], steps=8, max_new_tokens=32)
    second = engine.answer_batch([QUESTIONS[1], QUESTIONS[2]], steps=8, max_new_tokens=32)
    assert first[0].tokens == second[0].tokens
    assert first[1].tokens != second[1].tokens


@pytest.mark.parametrize(
    "options",
    [
        {"threshold": 0.5},
        {"padding_threshold": 0.9},
        {"stop_at_end": True},
        {"padding_threshold": 0.9, "canvas_cache": "delayed", "position_decay": -0.003},
        {"threshold": 0.7, "block_length": 8},
    ],
    ids=["threshold", "padding", "stop-at-end", "shipped-like", "threshold-blocks"],
)
def test_rows_that_finish_early_leave_with_their_own_answers(trained_engine, options):
    """Memorised answers finish in different numbers of passes; each row's answer and
    pass count are what it gets alone."""
    conversations = [example.conversation for example in MEMORISED]
    settings = {"steps": 12, "max_new_tokens": MEMORISED_REPLY_TOKENS, **options}
    alone = [trained_engine.answer(c, **settings) for c in conversations]
    together = trained_engine.answer_batch(conversations, **settings)
    assert [a.tokens for a in together] == [a.tokens for a in alone]
    assert [a.forward_passes for a in together] == [a.forward_passes for a in alone]
    assert [a.text for a in together] == [example.answer for example in MEMORISED]
    assert all(a.forward_passes <= 12 for a in together)


def test_sampled_rows_draw_from_their_own_seed(engine):
    options = {"steps": 8, "max_new_tokens": 32, "temperature": 0.9, "seed": 5}
    alone = [engine.answer(question, **options).tokens for question in QUESTIONS]
    together = [a.tokens for a in engine.answer_batch(QUESTIONS, **options)]
    assert together == alone


def test_stream_batch_frames_name_their_conversation(engine):
    frames = list(engine.stream_batch(QUESTIONS[:3], steps=6, max_new_tokens=24))
    assert len(frames) == 3 * 6
    for index in range(3):
        own = [f for f in frames if f.conversation == index]
        assert [f.step for f in own] == list(range(1, 7))
        assert own[-1].answer is not None and all(f.answer is None for f in own[:-1])
        single = engine.answer(QUESTIONS[index], steps=6, max_new_tokens=24)
        assert own[-1].answer.tokens == single.tokens
        assert [f.masked for f in own] == sorted((f.masked for f in own), reverse=True)
        assert own[-1].masked == 0


@pytest.mark.parametrize(
    ("conversations", "options", "message"),
    [
        ([], {}, "no conversations"),
        (["hi", ""], {}, "question is empty"),
        (["hi"], {"steps": 0}, "steps must be at least 1"),
        (["hi", "word " * 1200], {}, "shorten the question"),
    ],
)
def test_bad_batch_input_is_a_clear_value_error(engine, conversations, options, message):
    with pytest.raises(ValueError, match=message):
        engine.answer_batch(conversations, **options)
    with pytest.raises(ValueError, match=message):
        engine.stream_batch(conversations, **options)  # before the first frame
