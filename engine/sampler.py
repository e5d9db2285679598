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
from collections.abc import Collection, Hashable, Iterator
from dataclasses import dataclass
from typing import Literal, get_args, get_type_hints

import torch
from torch import Tensor

from .compiled import CompiledForward
from .model import KVCache, Rows, Scattered, Transformer

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
    """One row's canvas after a forward pass. Tensors are live: copy what you keep."""

    step: int  # 1-based count of this row's forward passes so far
    total_steps: int  # the step budget; threshold and stop_at_end may finish sooner
    canvas: Tensor  # (max_new_tokens,) token ids; masked positions hold the mask id
    masked: Tensor  # (max_new_tokens,) bool
    committed: int  # positions committed by this pass
    key: Hashable = None  # the row's name in its :class:`Canvases` batch
    finished: bool = False  # nothing is masked: the row has left the batch
    # (max_new_tokens,) float32: each committed position's probability of its token at the
    # pass that committed it (the model's softmax, the mask token left out); NaN while
    # masked, and where a rule settled padding outside the pass's window (stop_at_end)
    probability: Tensor | None = None


@dataclass
class _Row:
    """What the host knows of one row between passes (no device reads needed)."""

    key: Hashable
    prompt_len: int
    offset: int  # the column its prompt starts at (left padding before it)
    generator: torch.Generator
    left: list[int]  # masked positions per block
    block: int = 0
    steps_done: int = 0  # passes spent on the current block
    passes: int = 0
    stop: int = 0  # canvas positions still run through the model
    valid: int | None = None  # cache columns [0, prompt width + valid) hold valid keys


class Canvases:
    """A batch of reply canvases denoised together, one forward pass for all rows.

    Every row keeps its own schedule (block, steps spent, commits, cache validity), so
    rows may join between passes (:meth:`add`) and leave when done or cancelled
    (:meth:`remove`); :meth:`step` runs one pass. Prompts of different lengths are
    left-padded into shared columns and each row attends only to its own tokens
    (:class:`~engine.model.Rows`), so a greedy row commits what it would alone, in the
    cache modes that are exact alone; rows that share a pass but want different kinds of
    pass (a delayed-cache row due for a whole pass) all get the whole pass.

    Host synchronisation: with the plain schedule (no threshold, stop_at_end or
    padding_threshold) the host knows every row's block and commit count in advance, so
    a whole pass, and everything it commits, is queued on the device without waiting
    for it: the per-pass numbers come from :attr:`plan`, a table uploaded once, indexed
    by each row's pass count kept on the device. Only :meth:`add` and :meth:`remove`
    (an answer's start and end) move data between host and device. The data-dependent
    options read back one small tensor per pass (how many are left in each block, where
    the padding starts: the host must know when a row is done), and the canvas cache's
    partial passes gather the positions still to run (``nonzero``, a read). A frame's
    draft (``Engine.stream``) is a read of the canvas by its reader, not by the loop.

    ``compiled`` runs whole passes through a :class:`~engine.compiled.CompiledForward`
    and rounds the prompt columns up to its bucket, so their shapes repeat; passes cut
    short by settled padding, and partial passes, run the model eagerly.
    """

    def __init__(
        self,
        model: Transformer,
        config: SamplerConfig,
        *,
        mask_id: int,
        end_id: int,
        compiled: CompiledForward | None = None,
    ):
        self.model, self.config, self.compiled = model, config, compiled
        self.bucket = compiled.bucket if compiled is not None else 1
        self.mask_id, self.end_id = mask_id, end_id
        if model.config.shift_logits and config.canvas_cache == "delayed":
            raise ValueError(
                "canvas_cache='delayed' runs scattered positions, which a model with shifted "
                "logits (Dream) cannot read its predictions from; use canvas_cache='off'"
            )
        self.cache_mode = _cache_mode(model, config)
        self.blocks, self.budgets = config.blocks, config.step_budgets()
        self.total_steps = sum(self.budgets)
        self.reads_back = (
            config.threshold is not None
            or config.stop_at_end
            or config.padding_threshold is not None
        )
        param = next(model.parameters())
        self.device = param.device
        length = config.max_new_tokens
        self.width = 0  # prompt columns: row b's prompt ends where the canvases begin
        self.sequence = torch.empty(0, length, dtype=torch.long, device=self.device)
        self.masked = torch.empty(0, length, dtype=torch.bool, device=self.device)
        self.fresh = torch.empty_like(self.masked)  # committed by the previous pass
        # each position's probability of its token when committed (DenoiseState.probability)
        self.probability = torch.empty(0, length, dtype=torch.float32, device=self.device)
        self.cache = None
        if self.cache_mode != "off" or config.canvas_cache == "delayed":
            self.cache = KVCache(model.config, 0, length, self.device, param.dtype)
        self.rows: list[_Row] = []
        self.offsets = torch.empty(0, dtype=torch.long, device=self.device)
        # The plain schedule's (block start, block end, commits) for pass p at plan[p],
        # the same for every row; each row's pass count, on the device, indexes it.
        self.schedule = [] if self.reads_back else self._schedule()
        self.plan = None
        if self.schedule:
            self.plan = torch.tensor(self.schedule, dtype=torch.long, device=self.device)
        self.passes = torch.empty(0, dtype=torch.long, device=self.device)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def canvas(self) -> Tensor:
        """(rows, max_new_tokens): a view of the sequences' canvas columns."""
        return self.sequence[:, self.width :]

    @property
    def keys(self) -> list[Hashable]:
        return [row.key for row in self.rows]

    def add(self, key: Hashable, prompt: Tensor, seed: int | None = None) -> None:
        """Admit a row for ``prompt`` (1-D ids) between passes; ``seed`` (default: the
        config's) drives its sampling at temperature > 0."""
        if any(row.key == key for row in self.rows):
            raise ValueError(f"a row named {key!r} is already in the batch")
        prompt = prompt.to(self.device)
        grow = max(0, -(-prompt.numel() // self.bucket) * self.bucket - self.width)
        if grow:  # a longer prompt: every row moves right by the same columns
            pad = self.sequence.new_full((len(self.rows), grow), self.mask_id)
            self.sequence = torch.cat([pad, self.sequence], 1)
            self.offsets += grow
            self.width += grow
            for other in self.rows:
                other.offset += grow
        length = self.config.max_new_tokens
        offset = self.width - prompt.numel()
        row = torch.cat(
            [
                prompt.new_full((offset,), self.mask_id),
                prompt,
                prompt.new_full((length,), self.mask_id),
            ]
        )
        self.sequence = torch.cat([self.sequence, row.unsqueeze(0)])
        self.masked = torch.cat([self.masked, self.masked.new_ones(1, length)])
        self.fresh = torch.cat([self.fresh, self.fresh.new_zeros(1, length)])
        self.probability = torch.cat(
            [self.probability, self.probability.new_full((1, length), math.nan)]
        )
        self.offsets = torch.cat([self.offsets, self.offsets.new_tensor([offset])])
        self.passes = torch.cat([self.passes, self.passes.new_zeros(1)])
        if self.cache is not None:
            self.cache.extend(1, grow)
        seed = self.config.seed if seed is None else seed
        self.rows.append(
            _Row(
                key,
                prompt.numel(),
                offset,
                torch.Generator(device=self.device).manual_seed(seed),
                left=[end - start for start, end in self.blocks],
                stop=length,
            )
        )

    def remove(self, keys: Collection[Hashable]) -> None:
        """Drop rows (finished or cancelled) at once; the others go on unchanged."""
        keep = [i for i, row in enumerate(self.rows) if row.key not in keys]
        if len(keep) == len(self.rows):
            return
        self.rows = [self.rows[i] for i in keep]
        index = torch.tensor(keep, dtype=torch.long, device=self.device)
        self.offsets, self.passes = self.offsets[index], self.passes[index]
        trim = min((row.offset for row in self.rows), default=self.width)
        trim -= trim % self.bucket  # the prompt columns stay a whole number of buckets
        self.sequence = self.sequence[index, trim:]
        self.masked, self.fresh = self.masked[index], self.fresh[index]
        self.probability = self.probability[index]
        self.offsets -= trim
        self.width -= trim
        for row in self.rows:
            row.offset -= trim
        if self.cache is not None:
            self.cache.select(index, trim)

    def step(self) -> list[DenoiseState]:
        """One forward pass for every row; the rows it finished leave the batch."""
        if not self.rows:
            raise RuntimeError("no rows to denoise; add one first")
        for row in self.rows:
            self._enter_block(row)
        spans = [self.blocks[row.block] for row in self.rows]
        windows = [
            (start, min(end, row.stop)) for row, (start, end) in zip(self.rows, spans, strict=True)
        ]
        w0, w1 = min(lo for lo, _ in windows), max(hi for _, hi in windows)
        whole = any(
            _whole_pass(self.config, self.cache_mode, row.passes, row.steps_done)
            for row in self.rows
        )
        logits = self._run_whole(w0, w1) if whole else self._run_partial(windows, w0, w1)
        committed = self._commit(logits, spans, windows, w0)
        if self.plan is not None:
            self.passes += 1
        states, done = [], []
        counts = self._counts(committed, spans)
        for i, row in enumerate(self.rows):
            row.passes += 1
            row.steps_done += 1
            if self.cache_mode == "exact":
                row.valid = 0
            elif self.cache_mode == "approximate":
                row.valid = spans[i][0]
            before = sum(row.left)
            *row.left, stop = counts[i]
            row.stop = min(row.stop, stop)
            finished = sum(row.left) == 0
            states.append(
                DenoiseState(
                    row.passes,
                    self.total_steps,
                    self.canvas[i],
                    self.masked[i],
                    before - sum(row.left),
                    row.key,
                    finished,
                    self.probability[i],
                )
            )
            if finished:
                done.append(row.key)
        self.remove(done)
        return states

    # ------------------------------------------------------------------ the parts of a step

    def _schedule(self) -> list[tuple[int, int, int]]:
        """Each pass's block start, block end and commit count under the plain schedule,
        where a block commits ceil(masked left / steps left) each step."""
        plan = []
        for (start, end), budget in zip(self.blocks, self.budgets, strict=True):
            left = end - start
            for done in range(budget):
                quota = math.ceil(left / (budget - done))
                plan.append((start, end, quota))
                left -= quota
        return plan

    def _enter_block(self, row: _Row) -> None:
        """Move a row on to the next block once its block is complete or its steps spent."""
        while row.block < len(self.blocks) and (
            row.left[row.block] == 0 or row.steps_done == self.budgets[row.block]
        ):
            row.block += 1
            row.steps_done = 0
        if row.block == len(self.blocks):  # unreachable by construction; guards the budgets
            raise RuntimeError("denoising ended with masked positions left")
        if row.steps_done == 0 and self.cache_mode == "approximate":
            row.valid = None  # recompute the prefix once at the start of each block

    def _layout(self) -> tuple[int, Rows | None]:
        """Columns the pass runs to, and the rows' extents when they differ."""
        stops = [row.stop for row in self.rows]
        end = self.width + max(stops)
        limit = None
        if min(stops) < max(stops):
            limit = self.width + torch.tensor(stops, device=self.device)
        if limit is None and not any(row.prompt_len < self.width for row in self.rows):
            return end, None
        return end, Rows(self.offsets, limit)

    def _run_whole(self, w0: int, w1: int) -> Tensor:
        """Every column from the rows' common valid cache prefix on; logits (rows,
        w1 - w0, vocab) for canvas positions [w0, w1)."""
        valid = [row.valid for row in self.rows]
        start = 0 if None in valid else self.width + min(valid)
        if self.model.config.shift_logits:  # position i is read from i - 1's output
            start = min(start, self.width + w0 - 1)
        end, rows = self._layout()
        shift = self.width - start
        static = self.compiled is not None and end == self.width + self.config.max_new_tokens
        forward = self.compiled if static else self.model
        return forward(
            self.sequence[:, start:end],
            start=start,
            prompt_len=self.width,
            cache=self.cache,
            logits_for=slice(shift + w0, shift + w1),
            rows=rows,
        )

    def _run_partial(self, windows: list[tuple[int, int]], w0: int, w1: int) -> Tensor:
        """Each row's masked and just-committed positions (before its stop); the rest
        come from the cache. Logits as :meth:`_run_whole`, zero where nothing ran."""
        run = self.masked | self.fresh
        picked = [run[i, : row.stop].nonzero().squeeze(1) for i, row in enumerate(self.rows)]
        n = max(len(p) for p in picked)
        # Rows run the same count: a shorter row repeats a position it runs anyway, which
        # writes the same keys/values again.
        canvas_positions = torch.stack(
            [
                torch.cat([p, p[-1:].expand(n - len(p))]) if len(p) else p.new_zeros(n)
                for p in picked
            ]
        )
        lo = torch.tensor([w[0] for w in windows], device=self.device).view(-1, 1)
        hi = torch.tensor([w[1] for w in windows], device=self.device).view(-1, 1)
        inside = (canvas_positions >= lo) & (canvas_positions < hi)
        end, rows = self._layout()
        positions = self.width + canvas_positions
        if len(self.rows) == 1:  # one row: 1-D positions, as the model's plain path
            positions, inside = positions[0], inside[0]
        logits = self.model(
            self.sequence.gather(1, positions.view(len(self.rows), -1)),
            start=Scattered(positions, end),
            prompt_len=self.width,
            cache=self.cache,
            logits_for=inside,
            rows=rows,
        )
        window = logits.new_zeros(len(self.rows), w1 - w0, logits.shape[-1])
        row_index, col_index = inside.view(len(self.rows), -1).nonzero(as_tuple=True)
        window[row_index, canvas_positions[row_index, col_index] - w0] = logits.reshape(
            -1, logits.shape[-1]
        )
        return window

    def _commit(
        self,
        logits: Tensor,
        spans: list[tuple[int, int]],
        windows: list[tuple[int, int]],
        w0: int,
    ) -> Tensor | list[int]:
        """Commit each row's most confident predictions in its block, in place. Returns
        the quota committed per row: a host list on the plain schedule, else a tensor."""
        config, length = self.config, self.config.max_new_tokens
        w1 = w0 + logits.shape[1]
        device = self.device
        column = torch.arange(length, device=device)
        if self.plan is not None:  # no padding settles, so each window is its block
            lo, span_end, quota = self.plan[self.passes].unsqueeze(-1).unbind(1)
            hi = span_end
        else:
            lo = torch.tensor([w[0] for w in windows], device=device).view(-1, 1)
            hi = torch.tensor([w[1] for w in windows], device=device).view(-1, 1)
            span_end = torch.tensor([end for _, end in spans], device=device).view(-1, 1)
        in_window = (column >= lo) & (column < hi)  # (rows, length)
        canvas, masked = self.canvas, self.masked
        was_masked = masked.clone()
        if config.padding_threshold is not None:
            last_block = span_end == length
            sure = torch.zeros_like(masked)
            probs = logits.float().softmax(-1)[..., self.end_id]
            sure[:, w0:w1] = probs >= config.padding_threshold
            flags = _committed_ends(canvas, masked, self.end_id) | (sure & in_window)
            _pad_tail(canvas, masked, _tail_start(flags), self.end_id, last_block)
        if self.reads_back:
            in_block = (column >= lo) & (column < span_end)
            left = (masked & in_block).sum(-1)
            steps_left = [self.budgets[row.block] - row.steps_done for row in self.rows]
            sl = torch.tensor(steps_left, device=device)
            quota = (left + sl - 1) // sl
        else:  # the plain schedule: the plan's counts, known to the host too
            quota = quota.view(-1)
            host_quota = [self.schedule[row.passes][2] for row in self.rows]
        block_logits = logits.float()
        block_logits[..., self.mask_id].fill_(-math.inf)  # the mask token is never an answer
        eligible = (masked & in_window)[:, w0:w1]
        prediction = self._predict(block_logits, windows, w0)
        probs = block_logits.softmax(-1)
        confidence = _confidence(probs, prediction, config.confidence)
        confidence = confidence.masked_fill(~eligible, -math.inf)
        count = quota
        if config.threshold is not None:
            count = torch.maximum(quota, (confidence >= config.threshold).sum(-1))
            count = torch.minimum(count, eligible.sum(-1))
        if config.position_decay:
            index = torch.arange(w0, w1, device=device) - lo  # from each row's block start
            confidence = _weigh_positions(confidence, index, config.position_decay)
        chosen = _top(confidence, count)
        window_canvas = canvas[:, w0:w1]
        window_canvas.copy_(torch.where(chosen, prediction, window_canvas))
        masked[:, w0:w1] &= ~chosen
        if config.stop_at_end:
            ends = _committed_ends(canvas, masked, self.end_id)
            first = torch.where(ends, column, length).min(-1, keepdim=True).values
            _pad_tail(canvas, masked, first + 1, self.end_id)
        self.fresh = was_masked & ~masked
        self._record_probability(probs, w0)
        return quota if self.reads_back else host_quota

    def _record_probability(self, probs: Tensor, w0: int) -> None:
        """Keep, for each position this pass committed inside its window, the probability
        it gave the committed token (padding settled included); on the device, no read."""
        w1 = w0 + probs.shape[1]
        tokens = self.canvas[:, w0:w1].unsqueeze(-1)
        committed = probs.gather(-1, tokens).squeeze(-1)
        window = self.probability[:, w0:w1]
        window.copy_(torch.where(self.fresh[:, w0:w1], committed, window))

    def _predict(self, logits: Tensor, windows: list[tuple[int, int]], w0: int) -> Tensor:
        """Greedy predictions, or Gumbel-max samples drawn from each row's own generator
        over its own block (so a row samples as it would alone)."""
        if self.config.temperature == 0:
            return logits.argmax(-1)
        gumbel = torch.zeros(logits.shape, device=logits.device, dtype=torch.float64)
        for i, ((lo, hi), row) in enumerate(zip(windows, self.rows, strict=True)):
            uniform = torch.rand(
                (hi - lo, logits.shape[-1]),
                generator=row.generator,
                device=logits.device,
                dtype=torch.float64,
            )
            gumbel[i, lo - w0 : hi - w0] = -torch.log(-torch.log(uniform.clamp_min(1e-300)))
        return (logits.double() + self.config.temperature * gumbel).argmax(-1)

    def _counts(self, quota: Tensor | list[int], spans: list[tuple[int, int]]) -> list[list[int]]:
        """Per row: masked positions per block, then how far later passes run (padding
        settled in the last block is cut off after its first end token). Read from the
        device when commits depend on the data, else worked out here."""
        if self.reads_back:
            length = self.config.max_new_tokens
            ends = torch.tensor([end for _, end in self.blocks], device=self.device)
            before = self.masked.long().cumsum(1)[:, ends - 1]
            per_block = torch.diff(before, dim=1, prepend=before.new_zeros(len(self.rows), 1))
            stop = torch.full_like(per_block[:, :1], length)
            if self.config.padding_threshold is not None:
                last = torch.tensor([end == length for _, end in spans], device=self.device)
                tail = _tail_start(_committed_ends(self.canvas, self.masked, self.end_id)) + 1
                stop = torch.where(last.view(-1, 1), tail.clamp_max(length), stop)
            return torch.cat([per_block, stop], 1).tolist()
        counts = []
        for row, q in zip(self.rows, quota, strict=True):
            left = list(row.left)
            left[row.block] -= q
            counts.append([*left, row.stop])
        return counts


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


def _cache_mode(model: Transformer, config: SamplerConfig) -> PromptCache:
    if config.prompt_cache == "exact":
        return "off" if model.config.prompt_sees_reply else "exact"
    return config.prompt_cache


def _confidence(probs: Tensor, prediction: Tensor, kind: Confidence) -> Tensor:
    """Each position's confidence in its ``prediction`` from its softmax ``probs``."""
    if kind == "probability":
        return probs.gather(-1, prediction.unsqueeze(-1)).squeeze(-1)
    if kind == "margin":
        top2 = probs.topk(2, dim=-1).values
        return top2[..., 0] - top2[..., 1]
    return (probs * torch.log(probs.clamp_min(1e-12))).sum(-1)  # negative entropy


def _weigh_positions(confidence: Tensor, index: Tensor, decay: float) -> Tensor:
    """Weigh the confidence at ``index`` (from the block start) by exp(-decay·index), in
    float64 so that even a strong decay over a long canvas keeps the weights apart.
    Negative entropy is at most 0, so it is divided by the weight instead: either way a
    lower weight ranks a position later."""
    confidence = confidence.double()
    weight = torch.exp(-decay * index.double())
    return torch.where(confidence >= 0, confidence * weight, confidence / weight)


def _top(confidence: Tensor, count: Tensor) -> Tensor:
    """Flags of each row's ``count`` most confident positions (ties: the leftmost),
    without reading the counts back to the host."""
    order = confidence.argsort(dim=-1, descending=True, stable=True)
    rank = torch.empty_like(order)
    rank.scatter_(-1, order, torch.arange(order.shape[-1], device=order.device).expand_as(order))
    return rank < count.view(-1, 1)


def _committed_ends(canvas: Tensor, masked: Tensor, end_id: int) -> Tensor:
    return ~masked & (canvas == end_id)


def _tail_start(flags: Tensor) -> Tensor:
    """Per row (keepdim), where the run of true flags that ends it begins (its length
    if none)."""
    column = torch.arange(1, flags.shape[-1] + 1, device=flags.device)
    return torch.where(flags, 0, column).max(-1, keepdim=True).values


def _pad_tail(
    canvas: Tensor, masked: Tensor, start: Tensor, end_id: int, rows: Tensor | None = None
) -> None:
    """Commit every masked position from ``start`` (per row) on as end padding, in
    ``rows`` (flags) only if given."""
    tail = masked & (torch.arange(masked.shape[-1], device=masked.device) >= start)
    if rows is not None:
        tail &= rows.view(-1, 1)
    canvas.copy_(torch.where(tail, end_id, canvas))
    masked &= ~tail


def denoise(
    model: Transformer,
    prompt: Tensor,
    config: SamplerConfig,
    *,
    mask_id: int,
    end_id: int,
) -> Iterator[DenoiseState]:
    """Denoise one reply canvas after ``prompt`` (1-D ids), yielding after every pass:
    a batch of one :class:`Canvases` row."""
    canvases = Canvases(model, config, mask_id=mask_id, end_id=end_id)
    canvases.add(0, prompt)
    while canvases:
        yield from canvases.step()
