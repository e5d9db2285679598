"""Open diffusion checkpoints in Hugging Face's layout, read into the engine's model.

A folder as the hub ships it (``config.json`` with a ``model_type``, one or several
``*.safetensors`` shards, ``tokenizer.json``) loads without a conversion step: its
settings become a :class:`~engine.model.ModelConfig`, its tensor names are mapped onto
the engine's, and the family's own mask token, end token and chat template come with it.

Families:

* **LLaDA** (``model_type: llada``, e.g. ``GSAI-ML/LLaDA-8B-Instruct``): OLMo-style names
  under ``model.transformer.``, Llama-3 chat headers, mask ``<|mdm_mask|>``.
* **Qwen-layout masked diffusion models** (``qwen2``, ``qwen3``, e.g. the dllm-hub MDLM
  fine-tunes): standard Qwen names under ``model.``, ChatML, mask ``<|mask|>``.

* **Dream** (``model_type: Dream``, ``Dream-org/Dream-v0-Instruct-7B``): the Qwen2
  layout and names, ChatML, mask ``<|mask|>``, padding ``<|endoftext|>``; it predicts
  each position from the one before it, so its model has ``shift_logits``.

A hub id (``owner/name``) is fetched with ``huggingface_hub`` into its usual cache
first (only the files above), or read from that cache when offline.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from .model import ModelConfig
from .tokenizer import ChatTemplate, SpecialTokens

HUB_FILES = ["config.json", "*.safetensors", "tokenizer.json"]  # what read_hub_checkpoint reads
HUB_ID = re.compile(r"[\w.-]+/[\w.-]+")


@dataclass(frozen=True)
class Family:
    """How one model family's hub checkpoints map onto the engine."""

    name: str
    model_config: Callable[[dict], ModelConfig]
    tensor_names: tuple[tuple[str, str], ...]  # (hub pattern, engine name); {i} = layer
    specials: SpecialTokens
    template: ChatTemplate


def _llada_config(c: dict) -> ModelConfig:
    return ModelConfig(
        vocab_size=c.get("embedding_size") or c["vocab_size"],
        d_model=c["d_model"],
        n_layers=c["n_layers"],
        n_heads=c["n_heads"],
        n_kv_heads=c.get("n_kv_heads") or c["n_heads"],
        mlp_hidden=c["mlp_hidden_size"],
        max_seq_len=c.get("max_sequence_length", 4096),
        rope_theta=c.get("rope_theta", 10_000.0),
        norm_eps=c.get("rms_norm_eps", 1e-5),
        qkv_bias=bool(c.get("include_bias") or c.get("include_qkv_bias")),
        tie_embeddings=bool(c.get("weight_tying")),
    )


def _qwen_config(c: dict) -> ModelConfig:
    heads = c["num_attention_heads"]
    qwen3 = c["model_type"] == "qwen3"
    return ModelConfig(
        vocab_size=c["vocab_size"],
        d_model=c["hidden_size"],
        n_layers=c["num_hidden_layers"],
        n_heads=heads,
        head_size=c.get("head_dim"),  # Qwen3's heads may be wider than hidden_size / heads
        n_kv_heads=c.get("num_key_value_heads") or heads,
        mlp_hidden=c["intermediate_size"],
        max_seq_len=c.get("max_position_embeddings", 4096),
        rope_theta=c.get("rope_theta", 10_000.0),
        norm_eps=c.get("rms_norm_eps", 1e-6),
        qkv_bias=c.get("attention_bias", not qwen3),  # Qwen2 always has q/k/v biases
        qk_norm=qwen3,
        tie_embeddings=bool(c.get("tie_word_embeddings")),
    )


def _llama3_turn(role: str) -> str:
    return f"<|start_header_id|>{role}<|end_header_id|>\n\n{{content}}<|eot_id|>"


def _chatml_turn(role: str) -> str:
    return f"<|im_start|>{role}\n{{content}}<|im_end|>\n"


LLADA = Family(
    name="LLaDA",
    model_config=_llada_config,
    tensor_names=(
        ("model.transformer.wte.weight", "embed.weight"),
        ("model.transformer.blocks.{i}.attn_norm.weight", "blocks.{i}.attn_norm.weight"),
        ("model.transformer.blocks.{i}.ff_norm.weight", "blocks.{i}.mlp_norm.weight"),
        ("model.transformer.blocks.{i}.q_proj.{p}", "blocks.{i}.attn.q_proj.{p}"),
        ("model.transformer.blocks.{i}.k_proj.{p}", "blocks.{i}.attn.k_proj.{p}"),
        ("model.transformer.blocks.{i}.v_proj.{p}", "blocks.{i}.attn.v_proj.{p}"),
        ("model.transformer.blocks.{i}.attn_out.weight", "blocks.{i}.attn.o_proj.weight"),
        ("model.transformer.blocks.{i}.ff_proj.weight", "blocks.{i}.mlp.gate_proj.weight"),
        ("model.transformer.blocks.{i}.up_proj.weight", "blocks.{i}.mlp.up_proj.weight"),
        ("model.transformer.blocks.{i}.ff_out.weight", "blocks.{i}.mlp.down_proj.weight"),
        ("model.transformer.ln_f.weight", "norm.weight"),
        ("model.transformer.ff_out.weight", "lm_head.weight"),
    ),
    specials=SpecialTokens(mask="<|mdm_mask|>", end="<|eot_id|>", think=None, answer=None),
    template=ChatTemplate(
        bos="<|startoftext|>",
        system=_llama3_turn("system"),
        user=_llama3_turn("user"),
        assistant=_llama3_turn("assistant"),
        generation_prompt="<|start_header_id|>assistant<|end_header_id|>\n\n",
    ),
)

QWEN = Family(
    name="Qwen-layout",
    model_config=_qwen_config,
    tensor_names=(
        ("model.embed_tokens.weight", "embed.weight"),
        ("model.layers.{i}.input_layernorm.weight", "blocks.{i}.attn_norm.weight"),
        ("model.layers.{i}.post_attention_layernorm.weight", "blocks.{i}.mlp_norm.weight"),
        ("model.layers.{i}.self_attn.q_proj.{p}", "blocks.{i}.attn.q_proj.{p}"),
        ("model.layers.{i}.self_attn.k_proj.{p}", "blocks.{i}.attn.k_proj.{p}"),
        ("model.layers.{i}.self_attn.v_proj.{p}", "blocks.{i}.attn.v_proj.{p}"),
        ("model.layers.{i}.self_attn.o_proj.weight", "blocks.{i}.attn.o_proj.weight"),
        ("model.layers.{i}.self_attn.q_norm.weight", "blocks.{i}.attn.q_norm.weight"),
        ("model.layers.{i}.self_attn.k_norm.weight", "blocks.{i}.attn.k_norm.weight"),
        ("model.layers.{i}.mlp.gate_proj.weight", "blocks.{i}.mlp.gate_proj.weight"),
        ("model.layers.{i}.mlp.up_proj.weight", "blocks.{i}.mlp.up_proj.weight"),
        ("model.layers.{i}.mlp.down_proj.weight", "blocks.{i}.mlp.down_proj.weight"),
        ("model.norm.weight", "norm.weight"),
        ("lm_head.weight", "lm_head.weight"),
    ),
    specials=SpecialTokens(mask="<|mask|>", end="<|im_end|>", think=None, answer=None),
    template=ChatTemplate(
        system=_chatml_turn("system"),
        user=_chatml_turn("user"),
        assistant=_chatml_turn("assistant"),
        generation_prompt="<|im_start|>assistant\n",
    ),
)


def _dream_config(c: dict) -> ModelConfig:
    return dataclasses.replace(_qwen_config(c), shift_logits=True)


DREAM = Family(
    name="Dream",
    model_config=_dream_config,
    tensor_names=QWEN.tensor_names,
    # Dream-Instruct ends its reply with <|im_end|> and pads the canvas with <|endoftext|>.
    specials=SpecialTokens(mask="<|mask|>", end="<|endoftext|>", think=None, answer=None),
    template=QWEN.template,
)

FAMILIES = {"llada": LLADA, "qwen2": QWEN, "qwen3": QWEN, "dream": DREAM}


def is_hub_folder(folder: Path) -> bool:
    """Whether ``folder`` holds a Hugging Face-layout checkpoint (not the engine's own)."""
    config = folder / "config.json"
    if not config.is_file():
        return False
    try:
        data = json.loads(config.read_text())
    except json.JSONDecodeError:
        return False
    return isinstance(data, dict) and "format" not in data and "model_type" in data


def family_of(config: dict, source: Path) -> Family:
    model_type = str(config.get("model_type", "")).lower()
    if model_type not in FAMILIES:
        raise ValueError(
            f"{source}: model_type {config.get('model_type')!r} is not a family the engine "
            f"reads ({', '.join(sorted(FAMILIES))}); convert it to the engine's format"
        )
    return FAMILIES[model_type]


def read_hub_checkpoint(
    folder: Path,
) -> tuple[ModelConfig, SpecialTokens, ChatTemplate, dict[str, torch.Tensor]]:
    """The model shape, tokens, chat template and engine-named weights of a hub folder."""
    config = json.loads((folder / "config.json").read_text())
    family = family_of(config, folder)
    try:
        model_config = family.model_config(config)
    except KeyError as missing:
        raise ValueError(
            f"{folder / 'config.json'} lacks {missing}, which a {family.name} config has; "
            "is its model_type right?"
        ) from None
    shards = sorted(folder.glob("*.safetensors"))
    if not shards:
        raise FileNotFoundError(f"{folder} holds no *.safetensors weights; download them too")
    hub_state: dict[str, torch.Tensor] = {}
    for shard in shards:
        try:
            hub_state.update(load_file(str(shard)))
        except (SafetensorError, OSError) as error:
            raise ValueError(
                f"{shard} cannot be read ({error}); the file is cut short or damaged, as an "
                "interrupted download leaves it: delete it and download it again (for a hub "
                "id, `huggingface-cli download OWNER/NAME --force-download`)"
            ) from None
    state = rename(hub_state, family, model_config.n_layers, folder)
    if model_config.tie_embeddings:
        state.pop("lm_head.weight", None)
    return model_config, family.specials, family.template, state


def rename(
    hub_state: dict[str, torch.Tensor], family: Family, n_layers: int, source: Path
) -> dict[str, torch.Tensor]:
    """Hub tensor names → the engine's; a tensor the map does not know is an error."""
    names = {}
    for hub, ours in family.tensor_names:
        for i in range(n_layers) if "{i}" in hub else [None]:
            for p in ("weight", "bias") if "{p}" in hub else [None]:
                names[hub.format(i=i, p=p)] = ours.format(i=i, p=p)
    unknown = sorted(set(hub_state) - set(names))
    if unknown:
        raise ValueError(
            f"{source} has tensors a {family.name} checkpoint does not: {unknown[:3]}"
            f"{' …' if len(unknown) > 3 else ''}; is its model_type right?"
        )
    return {names[name]: tensor for name, tensor in hub_state.items()}


def download(repo_id: str) -> Path:
    """A hub model's folder in the Hugging Face cache: fetched once, then read offline."""
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError
    except ImportError:
        raise FileNotFoundError(
            f"{repo_id} looks like a Hugging Face id, but huggingface_hub is not installed; "
            "`pip install huggingface_hub`, or pass a checkpoint folder"
        ) from None
    try:
        return Path(snapshot_download(repo_id, allow_patterns=HUB_FILES))
    except LocalEntryNotFoundError:
        raise FileNotFoundError(
            f"{repo_id} is not in the Hugging Face cache and cannot be downloaded now "
            "(offline?); connect once, or download it elsewhere and pass its folder"
        ) from None
    except RepositoryNotFoundError:
        raise FileNotFoundError(
            f"the Hugging Face hub has no model {repo_id} (or it is private); check the id"
        ) from None
