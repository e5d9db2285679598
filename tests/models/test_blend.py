"""Blending two runs of one lineage: each weight lies on the line between theirs."""

from __future__ import annotations

import json

import pytest
import torch
from quicksilver.engine import Engine, Tokenizer
from quicksilver.models.reasoner_tiny import ship
from quicksilver.models.reasoner_tiny.blend import blend, load, main
from quicksilver.models.reasoner_tiny.train import build_engine

SHAPE = {"d_model": 32, "n_layers": 1, "n_heads": 2}


def two_runs(tmp_path):
    base, tuned = tmp_path / "base", tmp_path / "tuned"
    build_engine(seed=0, **SHAPE).save(base)
    build_engine(seed=1, **SHAPE).save(tuned)
    (tuned / "training.json").write_text(json.dumps({"step": 9, "batch_size": 4, "seed": 3}))
    return base, tuned


def weights(engine: Engine) -> dict[str, torch.Tensor]:
    return {name: tensor.float() for name, tensor in engine.model.state_dict().items()}


def test_a_blend_lies_between_its_runs_and_answers(tmp_path):
    base, tuned = (load(run) for run in two_runs(tmp_path))
    ends = weights(base), weights(tuned)
    assert any(not torch.equal(ends[0][name], ends[1][name]) for name in ends[0])

    for share in (0.0, 0.3, 1.0):
        mixed = weights(blend(base, tuned, share))
        for name, tensor in mixed.items():
            expected = (1 - share) * ends[0][name] + share * ends[1][name]
            torch.testing.assert_close(tensor, expected, msg=f"{name} at share {share}")

    answer = blend(base, tuned, 0.5).answer("what is 2 plus 2", steps=4)
    assert answer.forward_passes == 4


def test_runs_of_different_lineages_do_not_blend(tmp_path):
    base = build_engine(seed=0, **SHAPE)
    other_words = build_engine(seed=0, tokenizer=Tokenizer.word_level(["plus", "minus"]), **SHAPE)
    with pytest.raises(ValueError, match="tokenizers differ"):
        blend(base, other_words, 0.5)
    with pytest.raises(ValueError, match="shapes differ"):
        blend(base, build_engine(seed=0, d_model=64, n_layers=1, n_heads=2), 0.5)
    with pytest.raises(ValueError, match="between 0"):
        blend(base, base, 1.5)


def test_the_command_writes_a_run_that_ships_with_its_lineage(tmp_path, capsys):
    base, tuned = two_runs(tmp_path)
    out = tmp_path / "blend"
    assert main([str(base), str(tuned), "--share", "0.7", "--out", str(out)]) == 0

    mixed = weights(load(out))
    ends = [weights(load(run)) for run in (base, tuned)]
    for name, tensor in mixed.items():
        expected = 0.3 * ends[0][name] + 0.7 * ends[1][name]
        torch.testing.assert_close(tensor, expected, atol=2e-3, rtol=1e-2)  # saved in fp16
    training = json.loads((out / "training.json").read_text())
    assert training["step"] == 9  # the tuned run's record, for the card
    sentence = ship.blend_sentence(training["blend"])
    assert "30% of" in sentence and str(base) in sentence and "70% of" in sentence
    assert ship.blend_sentence(None) == ""
    assert "ship it with" in capsys.readouterr().out


def test_the_command_refuses_runs_that_do_not_blend(tmp_path, capsys):
    base, _ = two_runs(tmp_path)
    wider = tmp_path / "wider"
    build_engine(seed=0, d_model=64, n_layers=1, n_heads=2).save(wider)
    with pytest.raises(SystemExit):
        main([str(base), str(wider), "--share", "0.5", "--out", str(tmp_path / "out")])
    assert "shapes differ" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
