"""Masked-diffusion decoding with a hard step budget.

The reply canvas starts fully masked. Each step is one forward pass that predicts every
masked position; the most confident predictions are committed and never remasked. The
number committed per step is ``ceil(masked left / steps left)`` of the current block, so
with the default options the canvas is complete after exactly ``steps`` passes whatever
its length (LLaDA's linear schedule, front-loaded remainder).

Options, all in :class:`SamplerConfig`:

* confidence: top-1 probability, top-1 minus top-2 margin, or negative entropy;
* position_decay: each position's confidence is weighted by ``exp(-λ·i)``, ``i`` its
  index in the canvas (PC-Sampler's position-aware weighting). λ > 0 pulls the commits
  towards reading order; λ < 0 towards the end of the canvas, where a reply's spoken
  sentence and end padding lie. Only the order changes, never how many are committed;
* temperature: Gumbel-max sampling of each prediction (0 = greedy);
* semi-autoregressive blocks: the canvas is decoded block by block, the steps split
  between blocks;
* threshold: also commit every prediction whose confidence reaches τ, so a block may
  finish early; the quota above still guarantees it never takes more passes;
* stop_at_end: once an end token is committed, everything after it is padding and is
  filled at once, which can only end the answer sooner;
* padding_threshold: after each pass, the run of positions at the canvas's tail that
  the model predicts as end padding with at least this probability is committed at
  once, outside the step quota. A canvas sized for the longest reply is mostly padding
  for a short one; without this, the confident padding takes the early steps and the
  answer's own tokens are squeezed into the last few. Later passes then run only up to
  the first padding token, which makes short answers cheaper (for models trained on
  canvases of any width, as ``engine.train``'s bucketed batches are);
* prompt_cache: reuse the prompt's keys/values across steps. ``"exact"`` does so only
  when the model's prompt cannot see the reply (then it is lossless); ``"approximate"``
  also does it for fully bidirectional models and keeps everything before the current
  block, refreshed at each block start (Fast-dLLM's prefix cache);
* canvas_cache: ``"delayed"`` runs only the canvas positions still masked, plus those
  committed by the previous pass, through the model; every other position lends the
  keys/values it had when last computed (dKV-Cache's delayed caching: a token is cached
  one pass after it is committed, once its own identity has gone through the model).
  The first pass, and every ``canvas_refresh``-th pass if set, runs the whole canvas.
  As the canvas fills, passes shrink; the stale keys/values are an approximation, so
  measure it on the model at hand (``quicksilver eval``). With a prompt that sees the
  reply, the prompt's keys/values are kept from the last whole pass too.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, get_args, get_type_hints

import torch
from torch import Tensor

from .model import KVCache, Scattered, Transformer

Confidence = Literal["probability", "margin", "entropy"]
PromptCache = Literal["exact", "approximate", "off"]
CanvasCache = Literal["off", "delayed"]


@dataclass(frozen=True)
class SamplerConfig:
    """How a reply canvas is denoised."""

    steps: int = 16
    max_new_tokens: int = 128
    block_length: int | None = None  # None: the whole canvas is one block
    confidence: Confidence = "probability"
    temperature: float = 0.0
    threshold: float | None = None
    stop_at_end: bool = False
    padding_threshold: float | None = None
    prompt_cache: PromptCache = "exact"
    canvas_cache: CanvasCache = "off"
    canvas_refresh: int | None = None  # with canvas_cache: a whole pass every N passes
    position_decay: float = 0.0  # λ of the exp(-λ·i) weight on position i's confidence
    seed: int = 0

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError(f"steps must be at least 1, got {self.steps}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        if self.block_length is not None and self.block_length < 1:
            raise ValueError(f"block_length must be at least 1 or None, got {self.block_length}")
        if self.confidence not in ("probability", "margin", "entropy"):
            raise ValueError(
                f"confidence must be 'probability', 'margin' or 'entropy', got {self.confidence!r}"
            )
        if self.temperature < 0:
            raise ValueError(f"temperature must be 0 (greedy) or more, got {self.temperature}")
        if self.threshold is not None and not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold must lie in (0, 1], got {self.threshold}")
        if self.padding_threshold is not None and not 0.0 < self.padding_threshold <= 1.0:
            raise ValueError(f"padding_threshold must lie in (0, 1], got {self.padding_threshold}")
        if self.prompt_cache not in ("exact", "approximate", "off"):
            raise ValueError(
                f"prompt_cache must be 'exact', 'approximate' or 'off', got {self.prompt_cache!r}"
            )
        if self.canvas_cache not in ("off", "delayed"):
            raise ValueError(f"canvas_cache must be 'off' or 'delayed', got {self.canvas_cache!r}")
        if self.canvas_refresh is not None and self.canvas_refresh < 1:
            raise ValueError(
                f"canvas_refresh must be at least 1 or None, got {self.canvas_refresh}"
            )
        if not math.isfinite(self.position_decay):
            raise ValueError(f"position_decay must be a finite number, got {self.position_decay}")
        if self.canvas_refresh is not None and self.canvas_cache == "off":
            raise ValueError("canvas_refresh needs canvas_cache='delayed'")
        if self.steps < self.num_blocks:
            raise ValueError(
                f"{self.steps} steps cannot cover {self.num_blocks} blocks of "
                f"{self.block_length} tokens; raise steps or block_length"
            )

    @property
    def blocks(self) -> list[tuple[int, int]]:
        """(start, end) of each block within the canvas."""
        size = self.block_length or self.max_new_tokens
        return [
            (start, min(start + size, self.max_new_tokens))
            for start in range(0, self.max_new_tokens, size)
        ]

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def step_budgets(self) -> list[int]:
        """Steps given to each block: ``steps`` split evenly, at most one per token."""
        n = self.num_blocks
        return [
            min(self.steps // n + (i < self.steps % n), end - start)
            for i, (start, end) in enumerate(self.blocks)
        ]


# The settings that None switches off (block_length, threshold, …); the others need a value.
OPTIONAL_SETTINGS = frozenset(
    name for name, hint in get_type_hints(SamplerConfig).items() if type(None) in get_args(hint)
)


@dataclass
class DenoiseState:
    """The canvas after one forward pass. Tensors are live: copy what you keep."""

    step: int  # 1-based count of forward passes so far
    total_steps: int  # the step budget; threshold and stop_at_end may finish sooner
    canvas: Tensor  # (max_new_tokens,) token ids; masked positions hold the mask id
    masked: Tensor  # (max_new_tokens,) bool
    committed: int  # positions committed by this pass


def denoise(
    model: Transformer,
    prompt: Tensor,
    config: SamplerConfig,
    *,
    mask_id: int,
    end_id: int,
) -> Iterator[DenoiseState]:
    """Denoise a reply canvas after ``prompt`` (1-D ids), yielding after every pass."""
    device = prompt.device
    prompt_len, length = prompt.numel(), config.max_new_tokens
    sequence = torch.cat([prompt, torch.full((length,), mask_id, device=device)]).unsqueeze(0)
    canvas = sequence[0, prompt_len:]  # a view: committing writes into the sequence
    masked = torch.ones(length, dtype=torch.bool, device=device)
    generator = torch.Generator(device=device).manual_seed(config.seed)

    cache_mode = _cache_mode(model, config)
    cache = None
    if cache_mode != "off" or config.canvas_cache == "delayed":
        param = next(model.parameters())
        cache = KVCache(model.config, 1, prompt_len + length, device, param.dtype)
    valid_prefix = 0  # positions [0, valid_prefix) of the cache stay valid between passes
    fresh = torch.zeros(length, dtype=torch.bool, device=device)  # committed last pass

    budgets = config.step_budgets()
    total, step = sum(budgets), 0
    stop = length  # canvas positions still run through the model
    for (block_start, block_end), budget in zip(config.blocks, budgets, strict=True):
        if cache_mode == "approximate":
            valid_prefix = 0  # recompute the prefix once at the start of each block
        for steps_done in range(budget):
            left = int(masked[block_start:block_end].sum())
            if left == 0:
                break
            end = min(block_end, stop)
            if _whole_pass(config, cache_mode, step, steps_done):
                start = valid_prefix
                block = slice(prompt_len - start + block_start, prompt_len - start + end)
                block_logits = model(
                    sequence[:, start : prompt_len + stop],
                    start=start,
                    prompt_len=prompt_len,
                    cache=cache,
                    logits_for=block,
                )[0]
            else:
                block_logits = _partial_pass(
                    model, sequence, prompt_len, stop, masked | fresh, (block_start, end), cache
                )
            was_masked = masked.clone()
            step += 1
            if cache_mode == "exact":
                valid_prefix = prompt_len
            elif cache_mode == "approximate":
                valid_prefix = prompt_len + block_start
            committed = 0
            if config.padding_threshold is not None and block_end == length:
                committed += _settle_padding(
                    block_logits, canvas[block_start:end], masked[block_start:end], end_id, config
                )
                left -= committed
                stop = min(stop, _padding_start(canvas, masked, end_id) + 1)
            if left > 0:
                quota = math.ceil(left / (budget - steps_done))
                committed += _commit(
                    block_logits,
                    canvas[block_start:end],
                    masked[block_start:end],
                    quota,
                    config,
                    mask_id,
                    generator,
                )
            if config.stop_at_end:
                committed += _fill_after_end(canvas, masked, end_id)
            fresh = was_masked & ~masked
            yield DenoiseState(step, total, canvas, masked, committed)
    if bool(masked.any()):  # unreachable by construction; a guard for the budget arithmetic
        raise RuntimeError("denoising ended with masked positions left")


def _whole_pass(config: SamplerConfig, cache_mode: PromptCache, step: int, steps_done: int) -> bool:
    """Whether this pass runs every position from the cache's valid prefix on: always
    without the canvas cache; with it, the first pass (nothing is cached yet), each block
    start of the approximate prompt cache, and every ``canvas_refresh``-th pass."""
    return (
        config.canvas_cache == "off"
        or step == 0
        or (steps_done == 0 and cache_mode == "approximate")
        or (config.canvas_refresh is not None and step % config.canvas_refresh == 0)
    )


def _partial_pass(
    model: Transformer,
    sequence: Tensor,
    prompt_len: int,
    stop: int,
    run: Tensor,
    block: tuple[int, int],
    cache: KVCache,
) -> Tensor:
    """One pass over the canvas positions flagged in ``run`` (before ``stop``); the rest
    come from the cache. Returns logits for the block, zero where nothing was run."""
    canvas_positions = run[:stop].nonzero().squeeze(1)
    positions = prompt_len + canvas_positions
    block_start, end = block
    inside = (canvas_positions >= block_start) & (canvas_positions < end)
    logits = model(
        sequence[:, positions],
        start=Scattered(positions, prompt_len + stop),
        prompt_len=prompt_len,
        cache=cache,
        logits_for=inside,
    )[0]
    block_logits = logits.new_zeros(end - block_start, logits.shape[-1])
    block_logits[canvas_positions[inside] - block_start] = logits
    return block_logits


def _cache_mode(model: Transformer, config: SamplerConfig) -> PromptCache:
    if config.prompt_cache == "exact":
        return "off" if model.config.prompt_sees_reply else "exact"
    return config.prompt_cache


def _commit(
    logits: Tensor,
    canvas: Tensor,
    masked: Tensor,
    quota: int,
    config: SamplerConfig,
    mask_id: int,
    generator: torch.Generator,
) -> int:
    """Commit the most confident masked predictions of one block, in place."""
    logits = logits.float()
    logits[:, mask_id] = -math.inf  # the mask token is never an answer
    if config.temperature > 0:
        uniform = torch.rand(
            logits.shape, generator=generator, device=logits.device, dtype=torch.float64
        )
        gumbel = -torch.log(-torch.log(uniform.clamp_min(1e-300)))
        prediction = (logits.double() + config.temperature * gumbel).argmax(-1)
    else:
        prediction = logits.argmax(-1)
    confidence = _confidence(logits, prediction, config.confidence)
    confidence = confidence.masked_fill(~masked, -math.inf)
    count = quota
    if config.threshold is not None:
        count = max(quota, int((confidence >= config.threshold).sum()))
    count = min(count, int(masked.sum()))
    if config.position_decay:
        confidence = _weigh_positions(confidence, config.position_decay)
    chosen = confidence.topk(count).indices
    canvas[chosen] = prediction[chosen]
    masked[chosen] = False
    return count


def _confidence(logits: Tensor, prediction: Tensor, kind: Confidence) -> Tensor:
    probs = logits.softmax(-1)
    if kind == "probability":
        return probs.gather(-1, prediction.unsqueeze(-1)).squeeze(-1)
    if kind == "margin":
        top2 = probs.topk(2, dim=-1).values
        return top2[:, 0] - top2[:, 1]
    return (probs * torch.log(probs.clamp_min(1e-12))).sum(-1)  # negative entropy


def _weigh_positions(confidence: Tensor, decay: float) -> Tensor:
    """Weigh position i's confidence by exp(-decay·i), in float64 so that even a strong
    decay over a long canvas keeps the weights apart. Negative entropy is at most 0, so it
    is divided by the weight instead: either way a lower weight ranks a position later."""
    confidence = confidence.double()
    index = torch.arange(len(confidence), device=confidence.device, dtype=torch.float64)
    weight = torch.exp(-decay * index)
    return torch.where(confidence >= 0, confidence * weight, confidence / weight)


def _settle_padding(
    logits: Tensor, canvas: Tensor, masked: Tensor, end_id: int, config: SamplerConfig
) -> int:
    """Commit the tail run of positions predicted as end padding (see the module doc)."""
    sure = logits.float().softmax(-1)[:, end_id] >= config.padding_threshold
    return _pad_from(
        canvas, masked, _tail_start(sure | _committed_ends(canvas, masked, end_id)), end_id
    )


def _padding_start(canvas: Tensor, masked: Tensor, end_id: int) -> int:
    """Where the committed run of end padding at the canvas's tail begins."""
    return _tail_start(_committed_ends(canvas, masked, end_id))


def _fill_after_end(canvas: Tensor, masked: Tensor, end_id: int) -> int:
    """Commit every masked position after the first committed end token as padding."""
    ends = _committed_ends(canvas, masked, end_id).nonzero()
    if ends.numel() == 0:
        return 0
    return _pad_from(canvas, masked, int(ends[0]) + 1, end_id)


def _committed_ends(canvas: Tensor, masked: Tensor, end_id: int) -> Tensor:
    return ~masked & (canvas == end_id)


def _tail_start(flags: Tensor) -> int:
    """Where the run of true flags that ends the canvas begins (its length if none)."""
    others = (~flags).nonzero()
    return int(others[-1]) + 1 if others.numel() else 0


def _pad_from(canvas: Tensor, masked: Tensor, start: int, end_id: int) -> int:
    """Commit every masked position from ``start`` on as end padding; return how many."""
    tail = masked.clone()
    tail[:start] = False
    canvas[tail] = end_id
    masked[tail] = False
    return int(tail.sum())
