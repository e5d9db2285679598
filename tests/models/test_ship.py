"""Shipping a trained run: the sampler is chosen, the card is written from measured figures."""

from __future__ import annotations

import dataclasses
import json

import safetensors.torch
import torch
from quicksilver.engine import Engine, SamplerConfig
from quicksilver.models.reasoner_tiny import ship
from quicksilver.models.reasoner_tiny.corpus import SKILLS
from quicksilver.models.reasoner_tiny.train import build_engine


def test_ship_writes_fp16_weights_and_a_card_of_measured_figures(tmp_path, capsys):
    run, target = tmp_path / "run", tmp_path / "shipped"
    engine = build_engine(seed=0, d_model=32, n_layers=1, n_heads=2)
    engine.sampler = dataclasses.replace(engine.sampler, max_new_tokens=48)
    engine.save(run)
    (run / "training.json").write_text(json.dumps({"step": 7, "batch_size": 4, "lr": 1e-3}))

    args = [str(run), "--to", str(target), "--per-skill", "1", "--validation-per-skill", "1"]
    args += ["--in-order-per-skill", "1", "--unsure-per-skill", "1"]
    assert ship.main(args) == 0

    weights = safetensors.torch.load_file(target / "model.safetensors")
    assert {tensor.dtype for tensor in weights.values()} == {torch.float16}
    shipped = Engine.load(target, device="cpu")
    assert shipped.sampler.steps == 16
    assert shipped.unsure_below is not None  # chosen on the validation draws, stored
    card = (target / ship.CARD).read_text()
    assert "{" not in card.replace("{w}", "")  # every placeholder was filled
    assert "7 steps of batch 4" in card
    header = next(line for line in card.splitlines() if line.startswith("| skill |"))
    assert header == (
        "| skill | 8 steps | 16 steps | 32 steps | 16 steps, follow-up "
        "| 16 steps, trained phrasings | in reading order |"
    )
    for skill in SKILLS:
        assert f"| {skill} |" in card
    assert "| latency p50 / p90 (ms) |" in card
    assert "## When it is not sure" in card and "| **all** |" in card
    assert "sampler:" in capsys.readouterr().out


def test_of_samplers_within_one_answer_of_the_best_the_fastest_is_chosen():
    """168 validation answers (12 per skill): one answer moves the mean by 1/168."""
    means = {"plain": 0.5178571428571429, "padding": 0.51785714285714285, "blocks": 0.45}
    p50s = {"plain": 263.0, "padding": 152.0, "blocks": 90.0}
    assert ship.best_candidate(means, p50s, 168) == "padding"
    one_answer_better = means | {"plain": means["padding"] + 1 / 168}
    assert ship.best_candidate(one_answer_better, p50s, 168) == "padding"
    two_answers_better = means | {"plain": means["padding"] + 2 / 168}
    assert ship.best_candidate(two_answers_better, p50s, 168) == "plain"
    assert ship.best_candidate(means, p50s | {"blocks": 9.0}, 168) == "padding"


def test_each_candidate_is_what_its_name_says_whatever_the_run_settled_on():
    """A run that already settles padding and caches its canvas is still tried plain."""
    run = SamplerConfig(
        steps=64,
        max_new_tokens=135,
        padding_threshold=0.5,
        canvas_cache="delayed",
        position_decay=-0.1,
        block_length=8,
    )
    plain = ship.candidate_sampler(run, ship.CANDIDATES["plain"])
    assert plain == SamplerConfig(steps=16, max_new_tokens=135)
    name = "padding settled at p 0.9, position decay -0.003, delayed canvas cache"
    chosen = ship.candidate_sampler(run, ship.CANDIDATES[name])
    assert (chosen.padding_threshold, chosen.position_decay) == (0.9, -0.003)
    assert (chosen.canvas_cache, chosen.block_length, chosen.max_new_tokens) == (
        "delayed",
        None,
        135,
    )
