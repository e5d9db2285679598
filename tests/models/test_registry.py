"""Checkpoints by name: the registry and the entry points the engine reads."""

from __future__ import annotations

import pytest
from quicksilver import models
from quicksilver.engine import Engine
from quicksilver.engine.checkpoints import resolve_checkpoint

from ..engine.conftest import tiny_config
from ..engine.test_hub import cached_hub_model, load_in_a_fresh_process


def test_registered_names_resolve_through_entry_points(tmp_path, monkeypatch):
    folder = tmp_path / "tiny"
    Engine.random(tiny_config(), seed=0).save(folder)
    monkeypatch.setitem(models.SHIPPED, models.BUNDLED, folder)
    assert resolve_checkpoint("bundled") == folder
    assert resolve_checkpoint(models.BUNDLED) == folder
    assert Engine.load("bundled").model.config == tiny_config()


def test_a_model_without_weights_says_how_to_build_it(tmp_path, monkeypatch):
    monkeypatch.setitem(models.SHIPPED, models.BUNDLED, tmp_path)
    with pytest.raises(
        FileNotFoundError, match=r"not built .* quicksilver\.models\.reasoner_tiny\.ship"
    ):
        Engine.load("bundled")


def test_unknown_names_list_the_known_ones():
    known = r"bundled, llada-8b-instruct, reasoner-tiny, reasoner-tiny-routed"
    with pytest.raises(FileNotFoundError, match=rf"registered name \({known}\)"):
        Engine.load("no-such-model")
    with pytest.raises(FileNotFoundError, match="no shipped model named 'nope'"):
        models.path("nope")


def test_llada_by_name_is_the_hub_model_read_through_the_cache(tmp_path):
    cached_hub_model(tmp_path / "hf", models.KNOWN_HUB_MODELS["llada-8b-instruct"])
    loaded = load_in_a_fresh_process("llada-8b-instruct", tmp_path / "hf")
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == ["64"]
