"""The left-to-right score: each reply token predicted from the right tokens before it."""

from __future__ import annotations

import pytest
import torch
from quicksilver.engine import Engine
from quicksilver.models.reasoner_tiny.corpus import held_out_set
from quicksilver.models.reasoner_tiny.evaluate import _predicted_left_to_right, left_to_right
from quicksilver.models.reasoner_tiny.train import build_engine


def _one_canvas_at_a_time(engine: Engine, prompt: list[int], reply: list[int]) -> list[int]:
    """The definition, spelled out: a full pass per reply token, no cache."""
    tok, canvas = engine.tokenizer, engine.sampler.max_new_tokens
    predicted = []
    for j in range(len(reply)):
        masked = reply[:j] + [tok.mask_id] * (len(reply) - j)
        row = torch.tensor([prompt + masked + [tok.end_id] * (canvas - len(reply))])
        with torch.inference_mode():
            logits = engine.model(row, prompt_len=len(prompt))
        predicted.append(int(logits[0, len(prompt) + j].argmax()))
    return predicted


@pytest.mark.parametrize("prompt_sees_reply", [False, True])
def test_batched_prediction_matches_the_definition(prompt_sees_reply):
    engine = build_engine(
        seed=0, d_model=32, n_layers=2, n_heads=2, prompt_sees_reply=prompt_sees_reply
    )
    item = held_out_set(1, seed=3, skills=["addition"])["addition"][0]
    prompt = engine.tokenizer.prompt_ids(item.messages())
    reply = engine.tokenizer.reply_ids(item.thinking, item.answer)
    engine.sampler = engine.sampler_config(max_new_tokens=len(reply) + 5)
    assert _predicted_left_to_right(engine, prompt, reply) == _one_canvas_at_a_time(
        engine, prompt, reply
    )


def test_the_shipped_model_writes_some_sentences_in_order_and_an_untrained_one_none():
    shipped = left_to_right(Engine.load("bundled", device="cpu"), 6, skills=["conversation"])
    untrained = left_to_right(build_engine(seed=0), 6, skills=["conversation"])
    assert shipped["conversation"] > 0
    assert untrained["conversation"] == 0


def test_a_routed_expert_is_scored_on_the_prompt_it_reads(monkeypatch):
    """A letters expert that reads its own prompt form (the asked letter in a field) is
    scored on that prompt, not on the default model's."""
    from quicksilver.engine import RoutedEngine
    from quicksilver.models import path
    from quicksilver.models.reasoner_tiny import evaluate
    from quicksilver.models.reasoner_tiny.train import start_from

    routed_folder = path("reasoner-tiny-routed")
    router = Engine.load(routed_folder / "router", device="cpu")
    letters = start_from(path("reasoner-tiny"), preparation="reasoner-tiny-letters")
    default = Engine.load(path("reasoner-tiny"), device="cpu")
    routed = RoutedEngine(router, {"letters": letters}, default, route_above=0.7)
    scored = []

    def recording(engine, prompt, reply):
        scored.append((engine, engine.tokenizer.decode(prompt)))
        return _predicted_left_to_right(engine, prompt, reply)

    monkeypatch.setattr(evaluate, "_predicted_left_to_right", recording)
    left_to_right(routed, per_skill=4, skills=["letter count"])
    by_letters = [prompt for engine, prompt in scored if engine is letters]
    assert len(scored) == 4 and len(by_letters) >= 3  # the router sends counts to letters
    assert all(" | ___ ___ ___ ___ | " in p and p.count(" | ") >= 3 for p in by_letters)
    for prompt in by_letters:  # the letter field holds the asked letter, if one is asked
        question, block = prompt.split(" | ___ ___ ___ ___ | ")
        if " letters " in question:  # a word's length asks no letter
            assert block[0] == "_", prompt
        else:
            assert block[0].isalpha(), prompt
        assert block[1:4] == " | ", prompt
