"""The transformer behind the engine: one bidirectional decoder stack.

RMSNorm, rotary position embeddings, SwiGLU feed-forward and PyTorch's
``scaled_dot_product_attention``; options for grouped-query attention, q/k/v biases,
q/k RMSNorm and tied embeddings cover LLaDA-, Dream- and Qwen-shaped checkpoints.

The same weights run three ways:

* bidirectionally over prompt + canvas (masked diffusion, the engine's normal mode);
* with ``prompt_sees_reply=False`` the prompt attends only to itself, so its keys and
  values do not depend on the canvas and can be cached exactly across denoising steps;
* causally with a KV cache (the autoregressive baseline in ``benchmarks/engine.py``).

A pass may also run only some positions (:class:`Scattered`): those tokens are
computed and attend to keys/values that earlier passes left in the cache, which is how
the sampler skips canvas positions it has already committed.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from copy import deepcopy
from dataclasses import asdict, dataclass, fields, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@dataclass
class ModelConfig:
    """Shape and options of the transformer; stored as ``config.json["model"]``."""

    vocab_size: int = 512
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int | None = None  # None: same as n_heads (no grouped-query attention)
    mlp_hidden: int | None = None  # None: about 8/3 * d_model, rounded up to 64
    max_seq_len: int = 1024
    rope_theta: float = 10_000.0
    norm_eps: float = 1e-5
    qkv_bias: bool = False
    qk_norm: bool = False
    tie_embeddings: bool = False
    prompt_sees_reply: bool = True  # False: prompt attends to itself only (exact prompt cache)
    head_size: int | None = None  # None: d_model / n_heads (Qwen3 checkpoints use wider heads)
    shift_logits: bool = False  # True (Dream): position i's logits come from position i - 1

    def __post_init__(self) -> None:
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        if self.mlp_hidden is None:
            self.mlp_hidden = 64 * math.ceil(8 * self.d_model / 3 / 64)
        problems = []
        if self.head_size is None and self.d_model % self.n_heads:
            problems.append(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            problems.append(
                f"n_heads {self.n_heads} is not divisible by n_kv_heads {self.n_kv_heads}"
            )
        if self.head_dim % 2:
            problems.append(f"the head dimension {self.head_dim} must be even for RoPE")
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "max_seq_len"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1")
        if problems:
            raise ValueError("invalid ModelConfig: " + "; ".join(problems))

    @property
    def head_dim(self) -> int:
        return self.head_size or self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"config.json has unknown model settings {unknown}; "
                "was it written by a newer Quicksilver? Upgrade with `pip install -U quicksilver`."
            )
        return cls(**data)

    @classmethod
    def llada_8b(cls) -> ModelConfig:
        """The shape of LLaDA-8B (GSAI-ML/LLaDA-8B-Instruct)."""
        return cls(
            vocab_size=126_464,
            d_model=4096,
            n_layers=32,
            n_heads=32,
            n_kv_heads=32,
            mlp_hidden=12_288,
            max_seq_len=4096,
            rope_theta=500_000.0,
            norm_eps=1e-5,
        )

    def parameter_count(self) -> int:
        """Number of parameters, without building the model."""
        attn = self.d_model * self.head_dim * (self.n_heads * 2 + self.n_kv_heads * 2)
        if self.qkv_bias:
            attn += self.head_dim * (self.n_heads + 2 * self.n_kv_heads)
        norms = 2 * self.d_model + (2 * self.head_dim if self.qk_norm else 0)
        block = attn + 3 * self.d_model * self.mlp_hidden + norms
        embeddings = self.vocab_size * self.d_model * (1 if self.tie_embeddings else 2)
        return self.n_layers * block + embeddings + self.d_model


@dataclass(frozen=True)
class Scattered:
    """Where a pass's tokens sit when they are not one contiguous run.

    The tokens are at absolute ``positions`` (1-D, any order; or one row of them per
    batch row, shape (batch, n)) and attend to the first ``context`` positions of the KV
    cache, every one of which an earlier pass (or this one) must have written.
    """

    positions: Tensor
    context: int


@dataclass(frozen=True)
class Rows:
    """Rows of a batch laid out in shared columns, each with its own extent.

    Row ``b`` is left-padded: its first token sits at column ``offset[b]`` (its position
    0 for RoPE) and it attends only to keys in columns ``[offset[b], limit[b])`` (``limit``
    None: to the end). So rows of different lengths run together, each seeing exactly
    what it would alone.
    """

    offset: Tensor  # (batch,) long
    limit: Tensor | None = None  # (batch,) long


class KVCache:
    """Keys and values of every layer at absolute positions, preallocated to a length.

    A forward pass over positions ``[start, start + n)`` writes its keys/values there
    and attends to ``[0, start + n)``; a :class:`Scattered` pass writes at its positions
    and attends to its context. Which positions stay valid between passes is the
    caller's knowledge: the sampler keeps the prompt, the autoregressive loop keeps all.
    """

    def __init__(self, config: ModelConfig, batch: int, length: int, device, dtype) -> None:
        shape = (batch, config.n_kv_heads, length, config.head_dim)
        self.keys = [torch.empty(shape, device=device, dtype=dtype) for _ in range(config.n_layers)]
        self.values = [torch.empty_like(k) for k in self.keys]
        self.length = length

    def repeated(self, batch: int) -> KVCache:
        """A copy whose every row holds this cache's first row: one prompt, computed
        once, continued ``batch`` ways (e.g. scoring many canvases after one prompt)."""
        copy = object.__new__(KVCache)
        copy.keys = [k[:1].repeat(batch, 1, 1, 1) for k in self.keys]
        copy.values = [v[:1].repeat(batch, 1, 1, 1) for v in self.values]
        copy.length = self.length
        return copy

    def update(
        self, layer: int, start: int | Scattered, k: Tensor, v: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Write a pass's keys/values; return every key/value the pass attends to."""
        if isinstance(start, Scattered):
            where, end = start.positions, start.context
        else:
            where, end = slice(start, start + k.shape[2]), start + k.shape[2]
        if end > self.length:
            raise ValueError(f"KV cache holds {self.length} positions, pass needs {end}")
        if isinstance(where, Tensor) and where.dim() == 2:  # each row its own positions
            rows = torch.arange(where.shape[0], device=where.device).unsqueeze(1)
            self.keys[layer][rows, :, where] = k.transpose(1, 2)
            self.values[layer][rows, :, where] = v.transpose(1, 2)
        else:
            self.keys[layer][:, :, where] = k
            self.values[layer][:, :, where] = v
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def select(self, rows: Tensor, left: int = 0) -> None:
        """Keep only ``rows`` (indices), in that order, less the first ``left`` columns:
        a batch that retired some rows (and the padding they alone needed)."""
        self.keys = [k[rows, :, left:] for k in self.keys]
        self.values = [v[rows, :, left:] for v in self.values]
        self.length -= left

    def extend(self, rows: int, left: int = 0) -> None:
        """Add ``rows`` empty rows at the end and ``left`` empty columns in front (a
        batch admitting rows, some with longer prompts); what was there keeps its place
        relative to the rows' own tokens."""
        b, h, t, d = self.keys[0].shape
        for cached in (self.keys, self.values):
            for i, old in enumerate(cached):
                new = old.new_empty(b + rows, h, t + left, d)
                new[:b, :, left:] = old
                cached[i] = new
        self.length = t + left


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def rope_tables(config: ModelConfig, device=None) -> tuple[Tensor, Tensor]:
    """cos/sin tables of shape (max_seq_len, head_dim / 2), in float32."""
    half = config.head_dim // 2
    inv_freq = 1.0 / (config.rope_theta ** (torch.arange(half, device=device).float() / half))
    angles = torch.outer(torch.arange(config.max_seq_len, device=device).float(), inv_freq)
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate (batch, heads, seq, head_dim) by position; halves layout as in LLaMA/Qwen.
    ``cos``/``sin`` are (seq, head_dim / 2), or (batch, 1, seq, head_dim / 2) per row."""
    x1, x2 = x.float().chunk(2, dim=-1)
    rotated = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    return rotated.to(x.dtype)


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.layer = layer
        self.n_heads, self.n_kv_heads, self.head_dim = (
            config.n_heads,
            config.n_kv_heads,
            config.head_dim,
        )
        d, hd = config.d_model, config.head_dim
        self.q_proj = nn.Linear(d, config.n_heads * hd, bias=config.qkv_bias)
        self.k_proj = nn.Linear(d, config.n_kv_heads * hd, bias=config.qkv_bias)
        self.v_proj = nn.Linear(d, config.n_kv_heads * hd, bias=config.qkv_bias)
        self.o_proj = nn.Linear(config.n_heads * hd, d, bias=False)
        self.q_norm = RMSNorm(hd, config.norm_eps) if config.qk_norm else None
        self.k_norm = RMSNorm(hd, config.norm_eps) if config.qk_norm else None

    def forward(
        self,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        start: int | Scattered,
        mask: Tensor | None,
        causal: bool,
        cache: KVCache | None,
    ) -> Tensor:
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.n_kv_heads, self.head_dim).transpose(1, 2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is not None:
            k, v = cache.update(self.layer, start, k, v)
        # is_causal aligns the mask to the top-left corner, which is only right when the
        # queries start at key 0 or there is a single query (which may see every key).
        use_is_causal = causal and start == 0 and mask is None
        if causal and not use_is_causal and n > 1:
            mask = torch.ones(n, k.shape[2], dtype=torch.bool, device=x.device).tril(start)
        y = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            is_causal=use_is_causal,
            enable_gqa=self.n_kv_heads != self.n_heads,
        )
        return self.o_proj(y.transpose(1, 2).reshape(b, n, -1))


class FeedForward(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(config.d_model, config.mlp_hidden, bias=False)
        self.up_proj = nn.Linear(config.d_model, config.mlp_hidden, bias=False)
        self.down_proj = nn.Linear(config.mlp_hidden, config.d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(config.d_model, config.norm_eps)
        self.attn = Attention(config, layer)
        self.mlp_norm = RMSNorm(config.d_model, config.norm_eps)
        self.mlp = FeedForward(config)

    def forward(self, x, cos, sin, start, mask, causal, cache) -> Tensor:
        x = x + self.attn(self.attn_norm(x), cos, sin, start, mask, causal, cache)
        return x + self.mlp(self.mlp_norm(x))


class Transformer(nn.Module):
    """The model; its weights come from :meth:`init_weights` or a checkpoint."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        # Left uninitialised: nn.Embedding's own normal_ draw is thrown away, and on the
        # meta device (Engine.load) it imports torch._dynamo, a second of start-up.
        rows = torch.empty(config.vocab_size, config.d_model)
        self.embed = nn.Embedding(config.vocab_size, config.d_model, _weight=rows)
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        self.tie_weights()
        self._rope: tuple[Tensor, Tensor] | None = None  # float32 cos/sin, built on first use

    def tie_weights(self) -> None:
        """Share the embedding with the output head when the config says so.

        Call again after ``to_empty`` or ``load_state_dict(assign=True)``, which give
        each module its own tensor.
        """
        if self.config.tie_embeddings:
            self.lm_head.weight = self.embed.weight

    def grow_vocabulary(self, embeddings: Tensor, head_rows: Tensor) -> None:
        """Append token ids: ``embeddings`` (new, d_model) become their input rows and
        ``head_rows`` their output rows (ignored when the two are tied)."""
        if embeddings.shape[1:] != (self.config.d_model,) or head_rows.shape != embeddings.shape:
            raise ValueError(f"new rows must be (n, {self.config.d_model}), both alike")
        weight = self.embed.weight
        self.embed.weight = nn.Parameter(torch.cat([weight.data, embeddings.to(weight)]))
        if not self.config.tie_embeddings:
            head = self.lm_head.weight
            self.lm_head.weight = nn.Parameter(torch.cat([head.data, head_rows.to(head)]))
        self.config = replace(self.config, vocab_size=self.config.vocab_size + len(embeddings))
        self.embed.num_embeddings = self.config.vocab_size
        self.lm_head.out_features = self.config.vocab_size
        self.tie_weights()

    def deepen(self, after: Sequence[int]) -> None:
        """Insert a copy of block ``i`` right after it, for each ``i`` in ``after``, with
        the copy's two output projections zeroed.

        A zeroed projection adds nothing to the residual stream, so the deeper model
        computes exactly what this one did: training goes on from the same answers with
        more layers of room, where a fresh deeper model would start from nothing. The copy's
        attention and feed-forward weights give the new layer a useful first gradient.
        """
        if any(not 0 <= i < self.config.n_layers for i in after):
            raise ValueError(f"blocks are 0..{self.config.n_layers - 1}, not {list(after)}")
        copies, blocks = Counter(after), []
        for i, block in enumerate(self.blocks):
            blocks.append(block)
            for _ in range(copies[i]):
                copy = deepcopy(block)
                nn.init.zeros_(copy.attn.o_proj.weight)
                nn.init.zeros_(copy.mlp.down_proj.weight)
                blocks.append(copy)
        for layer, block in enumerate(blocks):
            block.attn.layer = layer  # its slot in the KV cache
        self.blocks = nn.ModuleList(blocks)
        self.config = replace(self.config, n_layers=len(blocks))

    def init_weights(self, generator: torch.Generator | None = None) -> None:
        """Normal(0, 0.02) weights, output projections scaled by depth (GPT-2 style)."""
        out_std = 0.02 / math.sqrt(2 * self.config.n_layers)
        for name, param in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(param)
            elif name.endswith(".bias"):
                nn.init.zeros_(param)
            else:
                std = out_std if name.endswith(("o_proj.weight", "down_proj.weight")) else 0.02
                nn.init.normal_(param, 0.0, std, generator=generator)

    def rope(self, device: torch.device) -> tuple[Tensor, Tensor]:
        """Rotary tables in float32 on ``device``, whatever dtype the weights are in."""
        if self._rope is None or self._rope[0].device != device:
            self._rope = rope_tables(self.config, device=device)
        return self._rope

    def forward(
        self,
        tokens: Tensor,
        *,
        start: int | Scattered = 0,
        prompt_len: Tensor | int | None = None,
        causal: bool = False,
        cache: KVCache | None = None,
        logits_for: slice | Tensor | None = None,
        rows: Rows | None = None,
    ) -> Tensor:
        """Logits (batch, n, vocab) for ``tokens`` (batch, n) at positions ``start..start+n``.

        With ``shift_logits`` the logits at a pass's first position are not meaningful
        (they would come from the position before it): start a pass one earlier.
        ``start`` may instead be :class:`Scattered` (bidirectional, with a ``cache``):
        the n tokens sit at its positions. ``prompt_len`` (an int, or one per row) marks
        the prompt; with ``prompt_sees_reply=False`` prompt queries then attend to prompt
        keys only. ``logits_for`` (a slice or index of the n positions) skips the output
        layer elsewhere, which matters with large vocabularies; a (batch, n) bool mask
        instead gives (k, vocab) logits for its k flagged positions, row by row.
        With ``rows`` (bidirectional only), positions are columns shared by left-padded
        rows of different lengths (see :class:`Rows`).
        """
        n = tokens.shape[1]
        if isinstance(start, Scattered):
            if causal or cache is None:
                raise ValueError("a scattered pass is bidirectional and needs a KV cache")
            where, keys = start.positions.to(tokens.device), start.context
            if int(where.max()) >= keys:
                raise ValueError(f"position {int(where.max())} lies outside the context of {keys}")
        else:
            where, keys = slice(start, start + n), start + n  # a slice: no gather per pass
        if keys > self.config.max_seq_len:
            raise ValueError(
                f"sequence of {keys} tokens exceeds the model's context of "
                f"{self.config.max_seq_len}; shorten the prompt or lower max_new_tokens"
            )
        if rows is not None and causal:
            raise ValueError("rows of different lengths run bidirectionally only")
        if self.config.shift_logits and isinstance(start, Scattered):
            raise ValueError("a model with shifted logits needs contiguous passes, not scattered")
        cos, sin = self.rope(tokens.device)
        mask = None
        if not causal and not self.config.prompt_sees_reply and prompt_len is not None:
            mask = prompt_isolation_mask(prompt_len, where, keys, tokens.device)
        if rows is None:
            cos, sin = cos[where], sin[where]
            if cos.dim() == 3:  # scattered positions per row: broadcast over the heads
                cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        else:
            cos, sin, mask = self._row_layout(rows, where, keys, mask, tokens.device)
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, cos, sin, start, mask, causal, cache)
        if self.config.shift_logits:  # each position is predicted by the one before it
            x = torch.cat([x[:, :1], x[:, :-1]], dim=1)
        if logits_for is not None:
            x = x[logits_for] if _is_row_mask(logits_for) else x[:, logits_for]
        return self.lm_head(self.norm(x))

    def _row_layout(
        self, rows: Rows, where: slice | Tensor, keys: int, mask: Tensor | None, device
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Per-row rotary tables and the attention mask that hides other rows' padding
        (and keys past each row's limit), combined with ``mask`` if there is one."""
        columns = (
            torch.arange(where.start, where.stop, device=device)
            if isinstance(where, slice)
            else where
        )
        offset = rows.offset.view(-1, 1)
        positions = (columns.view(-1, columns.shape[-1]) - offset).clamp_min(0)  # (batch, n)
        cos, sin = self.rope(device)
        cos, sin = cos[positions].unsqueeze(1), sin[positions].unsqueeze(1)
        key = torch.arange(keys, device=device).view(1, -1)
        visible = key >= offset
        if rows.limit is not None:
            visible = visible & (key < rows.limit.view(-1, 1))
        visible = visible.view(-1, 1, 1, keys)
        return cos, sin, visible if mask is None else visible & mask


def _is_row_mask(index: slice | Tensor) -> bool:
    return isinstance(index, Tensor) and index.dtype == torch.bool and index.dim() == 2


def prompt_isolation_mask(
    prompt_len: Tensor | int, queries: Tensor | slice, keys: int, device=None
) -> Tensor | None:
    """Attention mask where prompt queries see prompt keys only and reply queries see all.

    ``queries`` are absolute positions: a contiguous run (a slice), or a tensor (1-D, or
    (batch, n) per row); keys are ``0..keys``. Returns None when no query lies in the
    prompt (nothing to hide). With a slice and an int ``prompt_len`` that is decided on
    the host; otherwise it reads the positions back (a device sync on a GPU), which only
    scattered passes, already data-dependent, do.
    """
    first = queries.start if isinstance(queries, slice) else None
    if isinstance(queries, slice):
        queries = torch.arange(queries.start, queries.stop, device=device)
    if first is not None and isinstance(prompt_len, int):
        if first >= prompt_len:
            return None
    elif int(queries.min()) >= int(torch.as_tensor(prompt_len).max()):
        return None
    if not isinstance(prompt_len, int):
        prompt_len = prompt_len.to(queries.device).reshape(-1, 1, 1, 1)
    key = torch.arange(keys, device=queries.device).view(1, 1, 1, keys)
    return (key < prompt_len) | (queries.view(-1, 1, queries.shape[-1], 1) >= prompt_len)
