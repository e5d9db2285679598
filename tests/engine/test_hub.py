"""Open checkpoints in Hugging Face's layout (LLaDA, Qwen-layout MDLMs), on small local copies.

Each copy is written the way the hub ships the family: its config keys, its tensor names
(spelled out here from the published checkpoints, not taken from the engine's map),
sharded safetensors and a tokenizer.json with the family's special tokens. The random
weights differ everywhere, so equal logits mean every tensor landed in its place.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from quicksilver.engine import Engine, ModelConfig, SpecialTokens
from quicksilver.engine.tokenizer import byte_level_tokenizer
from safetensors.torch import load_file, save_file

LLADA_SPECIALS = ["<|mdm_mask|>", "<|eot_id|>", "<|startoftext|>", "<|endoftext|>"]
LLADA_SPECIALS += ["<|start_header_id|>", "<|end_header_id|>"]
CHATML_SPECIALS = ["<|mask|>", "<|im_end|>", "<|im_start|>", "<|endoftext|>"]

LLADA_LAYER = {  # ours → LLaDA's, per layer
    "attn_norm.weight": "attn_norm.weight",
    "mlp_norm.weight": "ff_norm.weight",
    "attn.q_proj.weight": "q_proj.weight",
    "attn.k_proj.weight": "k_proj.weight",
    "attn.v_proj.weight": "v_proj.weight",
    "attn.o_proj.weight": "attn_out.weight",
    "mlp.gate_proj.weight": "ff_proj.weight",
    "mlp.up_proj.weight": "up_proj.weight",
    "mlp.down_proj.weight": "ff_out.weight",
}
QWEN_LAYER = {
    "attn_norm.weight": "input_layernorm.weight",
    "mlp_norm.weight": "post_attention_layernorm.weight",
    **{f"attn.{p}_proj.{k}": f"self_attn.{p}_proj.{k}" for p in "qkv" for k in ("weight", "bias")},
    "attn.o_proj.weight": "self_attn.o_proj.weight",
    "attn.q_norm.weight": "self_attn.q_norm.weight",
    "attn.k_norm.weight": "self_attn.k_norm.weight",
    **{f"mlp.{p}_proj.weight": f"mlp.{p}_proj.weight" for p in ("gate", "up", "down")},
}


def hub_names(state: dict, top: dict[str, str], layer: dict[str, str], prefix: str) -> dict:
    renamed = {}
    for name, tensor in state.items():
        if name in top:
            renamed[top[name]] = tensor
        else:
            _, i, rest = name.split(".", 2)
            renamed[f"{prefix}{i}.{layer[rest]}"] = tensor
    return renamed


def hub_tokenizer(specials: list[str]):
    """A byte-level tokenizer.json holding the family's special tokens (``specials``:
    mask, end, then the rest)."""
    return byte_level_tokenizer(SpecialTokens(mask=specials[0], end=specials[1]), specials)


def write_folder(folder: Path, config: dict, state: dict, specials: list[str]) -> None:
    """config.json, two safetensors shards and a tokenizer.json, as the hub lays them out."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    names = sorted(state)
    half = len(names) // 2
    for n, part in enumerate((names[:half], names[half:]), start=1):
        shard = {name: state[name].contiguous() for name in part}
        save_file(shard, str(folder / f"model-0000{n}-of-00002.safetensors"))
    hub_tokenizer(specials).save(str(folder / "tokenizer.json"))


def vocab(specials: list[str]) -> int:
    """The embedding rows: the tokenizer's, padded as LLaDA's embedding is."""
    return hub_tokenizer(specials).get_vocab_size(with_added_tokens=True) + 8


def logits(engine: Engine) -> torch.Tensor:
    ids = torch.arange(10, 50).unsqueeze(0)
    with torch.inference_mode():
        return engine.model(ids, prompt_len=30)


def tiny_llada(folder: Path) -> Engine:
    shape = ModelConfig(
        vocab_size=vocab(LLADA_SPECIALS), d_model=64, n_layers=2, n_heads=4, mlp_hidden=128,
        max_seq_len=256, rope_theta=500_000.0,
    )  # fmt: skip
    source = Engine.random(shape, seed=3)
    top = {
        "embed.weight": "model.transformer.wte.weight",
        "norm.weight": "model.transformer.ln_f.weight",
        "lm_head.weight": "model.transformer.ff_out.weight",
    }
    state = hub_names(source.model.state_dict(), top, LLADA_LAYER, "model.transformer.blocks.")
    config = {
        "model_type": "llada", "d_model": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 4,
        "mlp_hidden_size": 128, "embedding_size": shape.vocab_size,
        "vocab_size": shape.vocab_size - 8,
        "max_sequence_length": 256, "rope_theta": 500_000.0, "rms_norm_eps": 1e-5,
        "weight_tying": False, "include_bias": False, "block_type": "llama",
    }  # fmt: skip
    write_folder(folder, config, state, LLADA_SPECIALS)
    return source


def test_a_llada_checkpoint_loads_with_its_weights_tokens_and_chat_template(tmp_path):
    source = tiny_llada(tmp_path / "llada")
    engine = Engine.load(tmp_path / "llada", device="cpu")
    assert engine.model.config.vocab_size == source.model.config.vocab_size
    torch.testing.assert_close(logits(engine), logits(source), rtol=0, atol=0)

    tok = engine.tokenizer
    assert tok.mask_id == tok.hf.token_to_id("<|mdm_mask|>")
    assert tok.end_id == tok.hf.token_to_id("<|eot_id|>")
    prompt = tok.hf.decode(tok.prompt_ids("hello"), skip_special_tokens=False)
    assert prompt == (
        "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    answer = engine.answer("hello", steps=4, max_new_tokens=12)
    assert answer.forward_passes == 4 and answer.thinking == ""  # no reasoning region


def test_a_qwen3_mdlm_with_wide_tied_grouped_normed_heads_loads(tmp_path):
    """Qwen3-0.6B's heads are wider than hidden_size / heads (128 against 64): so here."""
    options = dict(n_kv_heads=2, qk_norm=True, tie_embeddings=True, head_size=32)
    shape = ModelConfig(
        vocab_size=vocab(CHATML_SPECIALS), d_model=64, n_layers=2, n_heads=4, mlp_hidden=96,
        max_seq_len=256, rope_theta=1_000_000.0, norm_eps=1e-6, **options,
    )  # fmt: skip
    source = Engine.random(shape, seed=5)
    state = {k: v for k, v in source.model.state_dict().items() if k != "lm_head.weight"}
    top = {"embed.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight"}
    state = hub_names(state, top, QWEN_LAYER, "model.layers.")
    config = {
        "model_type": "qwen3", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
        "intermediate_size": 96, "vocab_size": shape.vocab_size, "max_position_embeddings": 256,
        "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
        "attention_bias": False,
    }  # fmt: skip
    write_folder(tmp_path / "qwen3", config, state, CHATML_SPECIALS)
    engine = Engine.load(tmp_path / "qwen3", device="cpu")
    torch.testing.assert_close(logits(engine), logits(source), rtol=0, atol=0)
    prompt = engine.tokenizer.hf.decode(
        engine.tokenizer.prompt_ids("hi"), skip_special_tokens=False
    )
    assert prompt == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert engine.tokenizer.mask_id == engine.tokenizer.hf.token_to_id("<|mask|>")


def test_unreadable_families_and_foreign_tensors_are_refused_with_the_reason(tmp_path):
    tiny_llada(tmp_path / "llada")
    config = json.loads((tmp_path / "llada" / "config.json").read_text())
    (tmp_path / "llada" / "config.json").write_text(json.dumps({**config, "model_type": "t5"}))
    with pytest.raises(ValueError, match="'t5' is not a family the engine reads"):
        Engine.load(tmp_path / "llada")
    (tmp_path / "llada" / "config.json").write_text(json.dumps({**config, "model_type": "qwen2"}))
    with pytest.raises(
        ValueError, match="lacks 'num_attention_heads', which a Qwen-layout config has"
    ):
        Engine.load(tmp_path / "llada")
    (tmp_path / "llada" / "config.json").write_text(json.dumps(config))
    save_file(
        {"model.transformer.extra.weight": torch.zeros(2)},
        str(tmp_path / "llada" / "x.safetensors"),
    )
    with pytest.raises(ValueError, match=re.escape("model.transformer.extra.weight")):
        Engine.load(tmp_path / "llada")


def test_a_shard_cut_short_names_the_file_and_says_to_download_it_again(tmp_path):
    tiny_llada(tmp_path / "llada")
    shard = tmp_path / "llada" / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    with pytest.raises(
        ValueError, match=rf"{re.escape(str(shard))} cannot be read .* download it again"
    ):
        Engine.load(tmp_path / "llada")


def cached_hub_model(hf_home: Path, repo_id: str) -> None:
    """A tiny LLaDA in the cache as huggingface_hub leaves it after a download."""
    owner, name = repo_id.split("/")
    repo = hf_home / "hub" / f"models--{owner}--{name}"
    commit = "0123456789abcdef0123456789abcdef01234567"
    tiny_llada(repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)


def load_in_a_fresh_process(spec: str, hf_home: Path) -> subprocess.CompletedProcess:
    """Engine.load(spec) offline with that cache (huggingface_hub reads both settings when
    it is first imported); prints the model's width."""
    env = {**os.environ, "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"}
    code = (
        "import sys; from engine import Engine; "
        "e = Engine.load(sys.argv[1], device='cpu'); print(e.model.config.d_model)"
    )
    return subprocess.run(
        [sys.executable, "-c", code, spec], env=env, capture_output=True, text=True, timeout=120
    )


def test_a_hub_id_is_read_from_the_hugging_face_cache_offline(tmp_path):
    """Offline, so that nothing is fetched and an id that is not cached says so."""
    cached_hub_model(tmp_path / "hf", "quicksilver-test/tiny-llada")
    loaded = load_in_a_fresh_process("quicksilver-test/tiny-llada", tmp_path / "hf")
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.split() == ["64"]
    missing = load_in_a_fresh_process("quicksilver-test/not-there", tmp_path / "hf")
    assert missing.returncode != 0
    assert "is not in the Hugging Face cache" in missing.stderr


DREAM_SPECIALS = ["<|mask|>", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def tiny_dream(folder: Path):
    """A Dream checkpoint as Dream-org ships it (its config keys, Qwen2 tensor names, q/k/v
    biases, untied head), its weights drawn by transformers' own Qwen2 model: that model,
    run bidirectionally with the logits shifted as Dream's generation code shifts them,
    is the reference."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    size = vocab(DREAM_SPECIALS)
    shape = dict(
        vocab_size=size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        rms_norm_eps=1e-6, rope_theta=1_000_000.0, tie_word_embeddings=False,
    )  # fmt: skip
    torch.manual_seed(11)
    qwen = Qwen2ForCausalLM(Qwen2Config(**shape, attn_implementation="eager")).eval()
    with torch.no_grad():
        for name, param in qwen.named_parameters():
            if name.endswith(("bias", "norm.weight")):  # not the init's zeros and ones
                param.normal_(0.0 if name.endswith("bias") else 1.0, 0.1)
    tok = hub_tokenizer(DREAM_SPECIALS)
    config = {
        "model_type": "Dream", "architectures": ["DreamModel"], "hidden_act": "silu",
        "auto_map": {"AutoConfig": "configuration_dream.DreamConfig",
                     "AutoModel": "modeling_dream.DreamModel"},
        "mask_token_id": tok.token_to_id("<|mask|>"),
        "pad_token_id": tok.token_to_id("<|endoftext|>"),
        "bos_token_id": tok.token_to_id("<|endoftext|>"),
        "eos_token_id": tok.token_to_id("<|endoftext|>"),
        "torch_dtype": "float32", "use_cache": False, "use_sliding_window": False,
        "sliding_window": None, "max_window_layers": 28, "rope_scaling": None, **shape,
    }  # fmt: skip
    write_folder(folder, config, dict(qwen.state_dict()), DREAM_SPECIALS)
    return qwen


def dream_reference(qwen, ids: torch.Tensor) -> torch.Tensor:
    n = ids.shape[1]
    with torch.no_grad():
        logits = qwen(ids, attention_mask=torch.zeros(1, 1, n, n)).logits  # bidirectional
    return torch.cat([logits[:, :1], logits[:, :-1]], dim=1)


def test_a_dream_checkpoint_matches_its_reference_forward(tmp_path):
    qwen = tiny_dream(tmp_path / "dream")
    engine = Engine.load(tmp_path / "dream", device="cpu", dtype=torch.float32)
    assert engine.model.config.shift_logits and engine.model.config.qkv_bias
    ids = torch.arange(10, 60).unsqueeze(0)
    with torch.inference_mode():
        ours = engine.model(ids)
    torch.testing.assert_close(ours, dream_reference(qwen, ids), rtol=0, atol=1e-4)

    tok = engine.tokenizer
    assert tok.mask_id == tok.hf.token_to_id("<|mask|>")
    assert tok.end_id == tok.hf.token_to_id("<|endoftext|>")
    prompt = tok.hf.decode(tok.prompt_ids("hi"), skip_special_tokens=False)
    assert prompt == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


@pytest.mark.parametrize(
    "options", [{}, {"block_length": 8, "prompt_cache": "approximate"}], ids=["plain", "blocks"]
)
def test_dream_denoises_with_the_one_sampler_reading_shifted_logits(tmp_path, options):
    """The first greedy pass commits the canvas position whose shifted reference
    prediction is the most confident, with that prediction."""
    qwen = tiny_dream(tmp_path / "dream")
    engine = Engine.load(tmp_path / "dream", device="cpu", dtype=torch.float32)
    tok = engine.tokenizer
    prompt = tok.prompt_ids("hi")
    frames = list(engine.stream("hi", steps=16, max_new_tokens=16, **options))
    assert len(frames) == 16 and frames[-1].answer.forward_passes == 16
    first = next(iter(engine.stream("hi", steps=16, max_new_tokens=16, **options)))
    assert first.committed == 1
    ids = torch.tensor([prompt + [tok.mask_id] * 16])
    logits = dream_reference(qwen, ids)[0, len(prompt) : len(prompt) + (8 if options else 16)]
    logits[:, tok.mask_id] = -float("inf")
    probs = logits.softmax(-1)
    position = int(probs.max(-1).values.argmax())
    token = int(probs[position].argmax())
    with torch.inference_mode():
        canvases = engine.canvases(engine.sampler_config(steps=16, max_new_tokens=16, **options))
        canvases.add(0, torch.tensor(prompt))
        (after,) = canvases.step()
    assert (~after.masked).nonzero().flatten().tolist() == [position]
    assert int(after.canvas[position]) == token


def test_dream_refuses_the_scattered_canvas_cache_and_a_missing_tensor(tmp_path):
    tiny_dream(tmp_path / "dream")
    engine = Engine.load(tmp_path / "dream", device="cpu")
    with pytest.raises(ValueError, match=r"shifted logits.*canvas_cache='off'"):
        engine.answer("hi", steps=4, max_new_tokens=8, canvas_cache="delayed")
    for shard in (tmp_path / "dream").glob("*.safetensors"):
        tensors = load_file(shard)
        tensors.pop("model.layers.1.self_attn.k_proj.bias", None)
        save_file(tensors, str(shard))
    with pytest.raises(ValueError, match=r"missing blocks\.1\.attn\.k_proj\.bias"):
        Engine.load(tmp_path / "dream", device="cpu")
