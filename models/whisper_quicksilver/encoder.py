"""Whisper's audio encoder in PyTorch, read from a CTranslate2 model, its top layers
with LoRA adapters.

The decoder's adapter learns the domain's phrasings as well as the voices, and comes to
prefer them ("what date is it" heard as the trained "what day is it"). Adapting the
encoder's last layers changes what the decoder is told the audio says, not which
sentences it expects. The layers below stay frozen, so a clip's input to the adapted
layers is computed once (:meth:`WhisperEncoder.frozen`) and training runs only the top.
"""

from __future__ import annotations

import re

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .ct2_format import Ct2Model
from .decoder import LoraConfig, _linear, _norm

# An encoder block's linear layers: attribute -> variable name in CTranslate2's model.bin
ENCODER_LINEARS = {
    "self_qkv": "self_attention/linear_0", "self_out": "self_attention/linear_1",
    "ffn_in": "ffn/linear_0", "ffn_out": "ffn/linear_1",
}  # fmt: skip


class EncoderBlock(nn.Module):
    """Self-attention over the audio frames, then a feed-forward layer (pre-norm)."""

    def __init__(self, model: Ct2Model, prefix: str, heads: int, lora: LoraConfig | None) -> None:
        super().__init__()
        self.heads = heads
        self.self_norm = _norm(model, f"{prefix}/self_attention/layer_norm")
        self.ffn_norm = _norm(model, f"{prefix}/ffn/layer_norm")
        for attribute, name in ENCODER_LINEARS.items():
            setattr(self, attribute, _linear(model, f"{prefix}/{name}", lora))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = (
            part.view(batch, length, self.heads, width // self.heads).transpose(1, 2)
            for part in self.self_qkv(self.self_norm(x)).chunk(3, dim=-1)
        )
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.self_out(attended.transpose(1, 2).reshape(batch, length, width))
        return x + self.ffn_out(F.gelu(self.ffn_in(self.ffn_norm(x))))


class WhisperEncoder(nn.Module):
    """The encoder of a CTranslate2 Whisper model; its top ``adapted`` blocks carry LoRA."""

    def __init__(self, model: Ct2Model, lora: LoraConfig, adapted: int) -> None:
        super().__init__()
        variables = model.variables
        heads = int(variables["encoder/num_heads"])
        names = sorted({m.group(1) for name in variables
                        if (m := re.match(r"encoder/(layer_\d+)/", name))},
                       key=lambda n: int(n[6:]))  # fmt: skip
        if not 0 < adapted <= len(names):
            raise ValueError(f"adapted must be 1 to {len(names)} layers, got {adapted}")
        self.cut = len(names) - adapted
        self.layer_names = names
        self.conv1 = _conv(variables, "encoder/conv1", stride=1)
        self.conv2 = _conv(variables, "encoder/conv2", stride=2)
        self.positions = _tensor(variables["encoder/position_encodings/encodings"])
        self.blocks = nn.ModuleList(
            EncoderBlock(model, f"encoder/{n}", heads, lora if i >= self.cut else None)
            for i, n in enumerate(names)
        )
        self.final_norm = _norm(model, "encoder/layer_norm")

    @torch.no_grad()
    def frozen(self, features: np.ndarray) -> np.ndarray:
        """A clip's log-Mel features (80, frames) → the input of the first adapted block,
        (frames / 2, width): what a training clip stores."""
        x = torch.from_numpy(np.asarray(features, np.float32))[None]
        x = F.gelu(self.conv2(F.gelu(self.conv1(x)))).transpose(1, 2)
        x = x + self.positions[: x.shape[1]]
        for block in self.blocks[: self.cut]:
            x = block(x, None)
        return x[0].numpy()

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The encoder's output from :meth:`frozen`'s (batch, frames, width); ``mask``
        (batch, 1, 1, frames) is False where a clip is padded."""
        for block in self.blocks[self.cut :]:
            hidden = block(hidden, mask)
        return self.final_norm(hidden)

    def adapter_state(self) -> dict[str, torch.Tensor]:
        """The LoRA tensors, named by the CTranslate2 weights they update."""
        state = {}
        for name, p in self.named_parameters():
            if "lora_" in name:
                _, index, attribute, part = name.split(".")
                layer = self.layer_names[int(index)]
                state[f"encoder/{layer}/{ENCODER_LINEARS[attribute]}/{part}"] = p.detach()
        return state


def _tensor(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.asarray(array, np.float32))


def _conv(variables: dict[str, np.ndarray], prefix: str, stride: int) -> nn.Conv1d:
    out_channels, in_channels, width = variables[f"{prefix}/weight"].shape
    conv = nn.Conv1d(in_channels, out_channels, width, stride=stride, padding=width // 2)
    conv.weight.data = _tensor(variables[f"{prefix}/weight"])
    conv.bias.data = _tensor(variables[f"{prefix}/bias"])
    return conv.requires_grad_(False)
