"""Comparing candidate runs with the shipped build on the validation draws."""

from __future__ import annotations

import dataclasses
import shutil

import pytest
from quicksilver.models import reasoner_tiny_folder
from quicksilver.models.reasoner_tiny.blend import load
from quicksilver.models.reasoner_tiny.compare import Candidate, candidates, main, measure
from quicksilver.models.reasoner_tiny.corpus import SKILLS
from quicksilver.models.reasoner_tiny.evaluate import evaluate
from quicksilver.models.reasoner_tiny.train import build_engine

SHAPE = {"d_model": 32, "n_layers": 1, "n_heads": 2}


def test_every_candidate_and_blend_runs_with_the_baselines_sampler():
    baseline, run = build_engine(seed=0, **SHAPE), build_engine(seed=1, **SHAPE)
    baseline.sampler = dataclasses.replace(baseline.sampler, steps=12, padding_threshold=0.9)
    engines = candidates(baseline, {"run": run}, shares=[0.5, 0.7])
    assert list(engines) == ["run", "0.5 × run", "0.7 × run"]
    assert all(engine.sampler == baseline.sampler for engine in engines.values())
    assert engines["run"].model is run.model  # the run itself is not copied
    with pytest.raises(ValueError, match="shapes differ"):
        candidates(
            baseline, {"wider": build_engine(seed=1, d_model=64, n_layers=1, n_heads=2)}, [0.5]
        )


def test_a_met_target_that_a_candidate_falls_below_is_named():
    baseline = Candidate("baseline", {"addition": 0.98, "spelling": 0.5, "calendar": 0.95})
    worse = Candidate("worse", {"addition": 0.9, "spelling": 0.97, "calendar": 0.96})
    assert worse.lost_targets(baseline) == ["addition"]
    assert baseline.lost_targets(worse) == ["spelling"]
    assert worse.mean == pytest.approx((0.9 + 0.97 + 0.96) / 3)


def test_the_shipped_build_is_measured_on_every_skill():
    shipped = measure("shipped", load(reasoner_tiny_folder()), per_skill=2, seeds=[7])
    assert set(shipped.accuracy) == set(SKILLS)
    assert shipped.mean > 0.3  # an untrained model answers none of them (test_reasoner)


def test_trained_phrasings_are_measured_as_the_cards_column_asks_them():
    """A router or corpus change that teaches a phrasing shows in training's phrasings
    alone: ``measure`` asks those when told, the same questions ``evaluate`` asks."""
    engine = load(reasoner_tiny_folder())
    for trained in (False, True):
        measured = measure("shipped", engine, per_skill=3, seeds=[7], trained_phrasings=trained)
        direct = evaluate(engine, 3, steps=16, seed=7, trained_phrasings=trained)
        assert measured.accuracy == {score.skill: score.accuracy for score in direct.scores}


def test_the_command_prints_one_column_per_candidate(tmp_path, capsys):
    """A copy of the shipped build and its blend with the build are the build itself: they
    lose no met target."""
    copy = tmp_path / "copy"
    shutil.copytree(reasoner_tiny_folder(), copy)
    assert (
        main(
            [
                str(reasoner_tiny_folder()),
                str(copy),
                "--shares",
                "0.5",
                "--per-skill",
                "1",
                "--seeds",
                "7",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("| skill |"))
    assert header.count("|") == 5  # skill, baseline, the copy, its blend
    lost = next(line for line in lines if line.startswith("| met targets lost |"))
    assert lost.split("|")[3:5] == [" none ", " none "]
