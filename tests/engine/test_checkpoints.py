"""Saving and loading checkpoint folders, and what happens when one is broken."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import torch
from quicksilver.engine import Engine, SamplerConfig, Tokenizer
from safetensors.torch import load_file, save_file

from .conftest import tiny_config

QUESTION = "what is 17 times 3"


def logits(engine: Engine) -> torch.Tensor:
    ids = torch.tensor([engine.tokenizer.prompt_ids(QUESTION)])
    with torch.inference_mode():
        return engine.model(ids, prompt_len=ids.shape[1] - 4)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"tie_embeddings": True, "n_kv_heads": 2, "qk_norm": True, "qkv_bias": True},
        {"head_size": 32},  # heads wider than d_model / n_heads
    ],
)
def test_round_trip_gives_identical_logits_and_answers(tmp_path, options):
    sampler = SamplerConfig(steps=8, max_new_tokens=40, confidence="margin")
    engine = Engine.random(tiny_config(**options), seed=4, sampler=sampler)
    engine.save(tmp_path / "ckpt")
    loaded = Engine.load(tmp_path / "ckpt", device="cpu")
    assert torch.equal(logits(engine), logits(loaded))
    assert loaded.sampler == sampler
    assert loaded.model.config == engine.model.config
    assert loaded.answer(QUESTION).tokens == engine.answer(QUESTION).tokens


def test_half_precision_checkpoint_is_half_the_size_and_close(tmp_path):
    engine = Engine.random(tiny_config(), seed=4)
    engine.save(tmp_path / "fp32")
    engine.save(tmp_path / "fp16", dtype=torch.float16)
    size = {
        name: (tmp_path / name / "model.safetensors").stat().st_size for name in ("fp32", "fp16")
    }
    assert size["fp16"] < 0.55 * size["fp32"]
    loaded = Engine.load(tmp_path / "fp16", device="cpu")
    assert next(loaded.model.parameters()).dtype == torch.float32  # runtime dtype on a CPU
    torch.testing.assert_close(logits(loaded), logits(engine), atol=2e-2, rtol=2e-2)


@pytest.fixture
def saved(tmp_path):
    folder = tmp_path / "ckpt"
    Engine.random(tiny_config(), seed=0).save(folder)
    return folder


@pytest.mark.parametrize("missing", ["config.json", "model.safetensors", "tokenizer.json"])
def test_missing_file_is_named(saved, missing):
    (saved / missing).unlink()
    with pytest.raises(FileNotFoundError, match=f"lacks {re.escape(missing)}"):
        Engine.load(saved)


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no checkpoint folder at .*nowhere"):
        Engine.load(tmp_path / "nowhere")


def test_mismatched_shapes_name_the_tensor(saved):
    config = json.loads((saved / "config.json").read_text())
    config["model"]["d_model"] = 128
    (saved / "config.json").write_text(json.dumps(config))
    with pytest.raises(
        ValueError, match=r"embed.weight has shape \(272, 64\), config.json implies \(272, 128\)"
    ):
        Engine.load(saved)


def test_missing_tensor_is_named(saved):
    state = load_file(str(saved / "model.safetensors"))
    del state["blocks.1.mlp.up_proj.weight"]
    save_file(state, str(saved / "model.safetensors"))
    with pytest.raises(ValueError, match=re.escape("missing blocks.1.mlp.up_proj.weight")):
        Engine.load(saved)


@pytest.mark.parametrize(
    ("file", "content", "message"),
    [
        ("config.json", "{not json", "not valid JSON"),
        ("config.json", json.dumps({"format": "gguf"}), "not a Quicksilver checkpoint"),
        ("model.safetensors", "garbage", "cannot be read"),
        ("tokenizer.json", "{}", "cannot be read"),
    ],
)
def test_corrupt_files_are_clear_errors(saved, file, content, message):
    (saved / file).write_text(content)
    with pytest.raises(ValueError, match=message):
        Engine.load(saved)


def test_unknown_settings_are_refused(saved):
    config = json.loads((saved / "config.json").read_text())
    config["model"]["n_experts"] = 8
    (saved / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"unknown model settings \['n_experts'\]"):
        Engine.load(saved)


def test_tokenizer_larger_than_the_model_is_refused(tmp_path):
    with pytest.raises(ValueError, match=re.escape("raise ModelConfig.vocab_size")):
        Engine.random(tiny_config(vocab_size=200), seed=0)


def test_asking_for_cuda_without_a_gpu_is_a_clear_error(saved):
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    with pytest.raises(ValueError, match="PyTorch sees no CUDA GPU"):
        Engine.load(saved, device="cuda")


@pytest.mark.parametrize("tied", [False, True])
def test_an_engine_grown_by_new_words_keeps_what_it_knew(tmp_path, tied):
    tokenizer = Tokenizer.word_level(["Hello", " times", " is", " what"])
    config = tiny_config(vocab_size=tokenizer.vocab_size, tie_embeddings=tied)
    engine = Engine.random(config, seed=5, tokenizer=tokenizer)
    before, embed = logits(engine), engine.model.embed.weight.detach().clone()
    spelled = tokenizer.encode(" penguins")

    grown = engine.with_words([" penguins", " times"])
    (new_id,) = grown.tokenizer.encode(" penguins")
    assert new_id == config.vocab_size and grown.model.config.vocab_size == new_id + 1
    assert torch.equal(grown.model.embed.weight[:new_id], embed)
    assert torch.allclose(grown.model.embed.weight[new_id], embed[spelled].mean(0))
    after = logits(grown)
    assert torch.equal(after[..., :new_id], before)  # the same question, the same logits
    if not tied:  # the new word scores as byte 0, which no text holds
        (byte0,) = tokenizer.encode("\x00")
        assert torch.equal(after[..., new_id], after[..., byte0])

    grown.save(tmp_path / "grown")
    loaded = Engine.load(tmp_path / "grown", device="cpu")
    assert loaded.model.config == grown.model.config
    assert torch.equal(logits(loaded), after)


def test_only_an_engine_sized_to_its_tokenizer_grows():
    tokenizer = Tokenizer.word_level(["Hello", " times"])
    engine = Engine.random(tiny_config(vocab_size=tokenizer.vocab_size + 8), tokenizer=tokenizer)
    with pytest.raises(ValueError, match="only a model sized to its tokenizer can grow"):
        engine.with_words([" penguins"])


def test_loading_a_local_folder_imports_only_what_answering_needs(saved):
    """Start-up time: the hub client and torch's compiler stack (a second to import, which
    building the model on the meta device used to pull in) stay out of a local load."""
    heavy = ("torch._dynamo", "sympy", "huggingface_hub")
    code = (
        "import sys; from quicksilver.engine import Engine; "
        "Engine.load(sys.argv[1]).answer('hi', steps=2, max_new_tokens=4); "
        f"print([m for m in {heavy!r} if m in sys.modules])"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code, str(saved)], capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]"
