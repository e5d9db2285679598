"""Each answer's confidence, taken from the denoising itself (issue 27)."""

from __future__ import annotations

import json
import math

import pytest
import torch
from quicksilver.engine import Engine, Scheduler
from quicksilver.engine.checkpoints import AnswerSettings

from .conftest import MEMORISED, MEMORISED_REPLY_TOKENS, PLAIN_SCHEDULES, tiny_config

PROMPTS = ["hi", "what is 17 times 3", "please name three colours of the rainbow, and why"]
OPTIONS = {
    **PLAIN_SCHEDULES,
    "settled": {"steps": 8, "max_new_tokens": 32, "padding_threshold": 0.5, "stop_at_end": True},
}


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.random(tiny_config(prompt_sees_reply=False), seed=2)


@pytest.mark.parametrize("options", OPTIONS.values(), ids=OPTIONS)
def test_each_committed_token_keeps_its_probability_and_batches_keep_it_too(engine, options):
    """Every committed position has a probability in (0, 1]; the confidence is the
    product over the answer span, and a batch row's equal its single answer's."""
    alone = [engine.answer(prompt, **options) for prompt in PROMPTS]
    together = engine.answer_batch(PROMPTS, **options)
    for single, batched in zip(alone, together, strict=True):
        assert len(single.probabilities) == len(single.tokens)
        span = engine.tokenizer.answer_span(single.tokens)
        values = single.probabilities[span]
        assert values and all(0.0 < p <= 1.0 for p in values)
        assert single.confidence == pytest.approx(math.prod(values))
        assert 0.0 <= single.confidence <= 1.0
        assert batched.tokens == single.tokens
        assert batched.probabilities == pytest.approx(single.probabilities, rel=1e-4, nan_ok=True)
        assert batched.confidence == pytest.approx(single.confidence, rel=1e-4)


def test_the_scheduler_gives_the_same_confidence(engine):
    options = PLAIN_SCHEDULES["plain"]
    expected = [engine.answer(prompt, **options).confidence for prompt in PROMPTS]
    with Scheduler(engine, max_batch=2) as scheduler:
        handles = [scheduler.submit(prompt, **options) for prompt in PROMPTS]
        got = [handle.result(timeout=60).confidence for handle in handles]
    assert got == pytest.approx(expected, rel=1e-4)


def test_the_first_pass_s_probabilities_are_the_model_s(engine):
    """At one step every position is committed by the first pass: its recorded
    probability is the model's softmax of the committed token (the mask token left out)."""
    prompt = engine.tokenizer.prompt_ids("hi")
    answer = engine.answer("hi", steps=1, max_new_tokens=16)
    tok = engine.tokenizer
    sequence = torch.tensor([prompt + [tok.mask_id] * 16])
    with torch.inference_mode():
        logits = engine.model(sequence, prompt_len=len(prompt))[0, len(prompt) :].float()
        logits[:, tok.mask_id] = -math.inf
        probs = logits.softmax(-1).gather(1, torch.tensor(answer.tokens).view(-1, 1)).view(-1)
    assert answer.probabilities == pytest.approx(probs.tolist(), rel=1e-4)


def test_a_memorised_answer_is_confident(trained_engine):
    """A model that knows its answers by heart commits them with near certainty."""
    for example in MEMORISED:
        answer = trained_engine.answer(
            example.conversation, steps=8, max_new_tokens=MEMORISED_REPLY_TOKENS
        )
        assert answer.text == example.answer
        assert answer.confidence > 0.5


def test_the_answer_span_is_after_the_marker_up_to_its_end(engine):
    tok = engine.tokenizer
    words = tok.encode("think")
    spoken = tok.encode("Four.")
    canvas = [*words, tok.answer_id, *spoken, tok.end_id, tok.end_id]
    span = tok.answer_span(canvas)
    assert canvas[span] == [*spoken, tok.end_id]
    assert tok.answer_span([*spoken, tok.end_id, tok.end_id]) == slice(0, len(spoken) + 1)
    assert tok.answer_span(spoken) == slice(0, len(spoken))


def test_the_unsure_threshold_travels_with_the_checkpoint(engine, tmp_path):
    assert engine.unsure_below is None  # never measured: never unsure
    measured = Engine(engine.model, engine.tokenizer, engine.sampler, unsure_below=0.42)
    folder = measured.save(tmp_path / "measured")
    assert json.loads((folder / "config.json").read_text())["answer"] == {"unsure_below": 0.42}
    assert Engine.load(folder, device="cpu").unsure_below == 0.42
    assert Engine.load(engine.save(tmp_path / "plain"), device="cpu").unsure_below is None
    with pytest.raises(ValueError, match="unsure_below must lie in"):
        AnswerSettings(1.5)
