"""Whisper's text decoder in PyTorch, read from a CTranslate2 model, with LoRA adapters.

Only the decoder is trained: the encoder's output for each clip is computed once by
CTranslate2 itself (the int8 encoder the assistant runs), so a training step costs a few
small matrix products instead of a 30 s audio encoder pass. Every linear layer of the
decoder's blocks carries a low-rank adapter (LoRA: ``W + B A · alpha/rank``, B starting at
zero, so the untrained adapter is the original model); merged back, the weights are
written as the same CTranslate2 variables, and the model runs in faster-whisper as before.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .ct2_format import Ct2Model

LAYER_NORM_EPS = 1e-5
# Each block's linear layers: attribute here -> variable name in CTranslate2's model.bin
# (the self-attention's query, key and value are one fused matrix, as are the
# cross-attention's key and value).
LINEARS = {
    "self_qkv": "self_attention/linear_0", "self_out": "self_attention/linear_1",
    "cross_q": "attention/linear_0", "cross_kv": "attention/linear_1",
    "cross_out": "attention/linear_2", "ffn_in": "ffn/linear_0", "ffn_out": "ffn/linear_1",
}  # fmt: skip


@dataclass(frozen=True)
class LoraConfig:
    rank: int = 16
    alpha: float = 32.0
    dropout: float = 0.05
    # which of each block's linear layers (``LINEARS``) get an adapter: all, or only the
    # attention to the audio, which leaves the decoder's own language model as it was
    layers: tuple[str, ...] = ("self_qkv", "self_out", "cross_q", "cross_kv", "cross_out",
                               "ffn_in", "ffn_out")  # fmt: skip


class LoraLinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update."""

    def __init__(self, weight: np.ndarray, bias: np.ndarray, lora: LoraConfig | None) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.from_numpy(weight.astype(np.float32)), requires_grad=False)
        self.bias = nn.Parameter(torch.from_numpy(bias.astype(np.float32)), requires_grad=False)
        self.lora = lora
        if lora is not None:
            out_features, in_features = weight.shape
            self.lora_a = nn.Parameter(torch.randn(lora.rank, in_features) / math.sqrt(in_features))
            self.lora_b = nn.Parameter(torch.zeros(out_features, lora.rank))
            self.scale = lora.alpha / lora.rank

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.linear(x, self.weight, self.bias)
        if self.lora is not None:
            low = F.dropout(x, self.lora.dropout, self.training) @ self.lora_a.T
            out = out + (low @ self.lora_b.T) * self.scale
        return out


def _norm(model: Ct2Model, prefix: str) -> nn.LayerNorm:
    norm = nn.LayerNorm(model.variables[f"{prefix}/gamma"].shape[0], eps=LAYER_NORM_EPS)
    norm.weight.data = torch.from_numpy(model.variables[f"{prefix}/gamma"].astype(np.float32))
    norm.bias.data = torch.from_numpy(model.variables[f"{prefix}/beta"].astype(np.float32))
    norm.requires_grad_(False)
    return norm


def _linear(model: Ct2Model, prefix: str, lora: LoraConfig | None) -> LoraLinear:
    variables = model.variables
    return LoraLinear(variables[f"{prefix}/weight"], variables[f"{prefix}/bias"], lora)


class Block(nn.Module):
    """Self-attention over the text, attention to the audio, a feed-forward layer."""

    def __init__(self, model: Ct2Model, prefix: str, heads: int, lora: LoraConfig | None) -> None:
        super().__init__()
        self.heads = heads
        self.self_norm = _norm(model, f"{prefix}/self_attention/layer_norm")
        self.cross_norm = _norm(model, f"{prefix}/attention/layer_norm")
        self.ffn_norm = _norm(model, f"{prefix}/ffn/layer_norm")
        for attribute, name in LINEARS.items():
            adapted = lora if lora is not None and attribute in lora.layers else None
            setattr(self, attribute, _linear(model, f"{prefix}/{name}", adapted))

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        return x.view(batch, length, self.heads, width // self.heads).transpose(1, 2)

    def _merge(self, x: torch.Tensor) -> torch.Tensor:
        batch, heads, length, width = x.shape
        return x.transpose(1, 2).reshape(batch, length, heads * width)

    def forward(
        self, x: torch.Tensor, audio: torch.Tensor, audio_mask: torch.Tensor | None
    ) -> torch.Tensor:
        q, k, v = self.self_qkv(self.self_norm(x)).chunk(3, dim=-1)
        attended = F.scaled_dot_product_attention(
            self._split(q), self._split(k), self._split(v), is_causal=True
        )
        x = x + self.self_out(self._merge(attended))
        k, v = self.cross_kv(audio).chunk(2, dim=-1)
        attended = F.scaled_dot_product_attention(
            self._split(self.cross_q(self.cross_norm(x))), self._split(k), self._split(v),
            attn_mask=audio_mask,
        )  # fmt: skip
        x = x + self.cross_out(self._merge(attended))
        return x + self.ffn_out(F.gelu(self.ffn_in(self.ffn_norm(x))))


class WhisperDecoder(nn.Module):
    """The decoder of a CTranslate2 Whisper model; logits over the vocabulary."""

    def __init__(self, model: Ct2Model, lora: LoraConfig | None = None) -> None:
        super().__init__()
        if model.spec != "WhisperSpec":
            raise ValueError(f"expected a Whisper model, got a {model.spec}")
        variables = model.variables
        heads = int(variables["decoder/num_heads"])
        layers = sorted({m.group(1) for name in variables
                         if (m := re.match(r"decoder/(layer_\d+)/", name))},
                        key=lambda n: int(n[6:]))  # fmt: skip
        self.embeddings = nn.Parameter(
            torch.from_numpy(variables["decoder/embeddings/weight"].astype(np.float32)),
            requires_grad=False,
        )
        self.positions = nn.Parameter(
            torch.from_numpy(variables["decoder/position_encodings/encodings"].astype(np.float32)),
            requires_grad=False,
        )
        self.layer_names = layers
        self.blocks = nn.ModuleList(Block(model, f"decoder/{n}", heads, lora) for n in layers)
        self.final_norm = _norm(model, "decoder/layer_norm")

    def hidden(
        self, tokens: torch.Tensor, audio: torch.Tensor, audio_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """The last layer's output for each position. ``audio``: the encoder's output,
        (batch, frames, width); ``audio_mask``: (batch, 1, 1, frames), False where a clip
        is padded."""
        x = self.embeddings[tokens] + self.positions[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x, audio, audio_mask)
        return self.final_norm(x)

    def forward(
        self, tokens: torch.Tensor, audio: torch.Tensor, audio_mask: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Logits for each next token (the output projection is the embeddings')."""
        return self.hidden(tokens, audio, audio_mask) @ self.embeddings.T

    def load_adapter(self, adapter: dict[str, np.ndarray]) -> None:
        """Set the LoRA tensors from an adapter (named as :meth:`adapter_state` names them)."""
        own = dict(zip(self.adapter_state(), self._lora_parameters(), strict=True))
        if set(adapter) != set(own):
            raise ValueError("the adapter does not fit this decoder (other layers or rank)")
        for name, value in adapter.items():
            own[name].data = torch.from_numpy(np.asarray(value, np.float32)).clone()

    def _lora_parameters(self) -> list[nn.Parameter]:
        return [p for name, p in self.named_parameters() if "lora_" in name]

    def adapter_state(self) -> dict[str, torch.Tensor]:
        """The trainable (LoRA) tensors only: what a fine-tune ships."""
        return {
            f"decoder/{self.layer_names[int(index)]}/{LINEARS[attribute]}/{part}": p.detach()
            for name, p in self.named_parameters()
            if "lora_" in name
            for _, index, attribute, part in [name.split(".")]
        }
