"""Training with the masked-diffusion objective (LLaDA's SFT loss).

For each example the prompt stays clean; every reply token is masked with probability
``t ~ U(eps, 1)`` drawn per example, and the loss is the cross-entropy on the masked
reply tokens weighted by ``1 / t``, summed and divided by the number of reply tokens.
Replies are padded with end tokens to the canvas length, so the model learns that
everything after the answer is padding.

Uniform masking alone lets a model skip the reasoning: every step of it is also visible
from the other side (the answer repeats the last result, the result repeats the column
sums), so it learns to copy values back from the answer and never to work them out from
what precedes them, and at inference, where the answer is masked until the end, it
guesses. ``TrainConfig.suffix_mask_share`` therefore masks a share of the rows from a
random cut to the end of their reply (block-diffusion style, as in BD3-LM): before the
cut the usual ratio ``t``, after it everything, so each token must also be predicted
from its left. Their end padding keeps the ratio ``t``, as the sampler settles padding
early. Those rows weigh every masked token 1.

The cut teaches a step from its left only when it falls just after that step: a step in
the cut's clean part is still read back from the result the reasoning arrives at, the
copy the cut was made against. A column sum of two digits the reasoning wrote (rather
than the prompt's) is then never worked out: the arithmetic expert gets its product's
tens column right 98% of the time when everything else is shown and 57% when the result
is hidden, as it is at inference (BENCHMARKS.md, "Two-digit products"). ``TrainConfig``'s
``result_hidden_share`` rows therefore hide the reply from its reasoning's last
``result_marker`` (the ``→`` before the result) to the end and mask the rest at the
usual ratio ``t``: every step before the result is masked now and then with the steps
around it shown and the result not, as the sampler sees it once the steps before are
committed. Hidden tokens weigh 1, the others ``1 / t``; a row without the marker is an
ordinary uniform row. Hiding the whole answer as well costs the answer's copies from the
question: it is then always learnt with the result unseen, and an arithmetic expert so
trained wrote "88 times 2 is 162." for 81 times 2. With ``hide_whole_answer`` off the
row hides the result only where the reply writes it: from the marker to the answer, and
the result's repeats in the answer; the answer's other tokens keep the ratio ``t``.

A reply's spoken answer is a few tokens among a hundred of reasoning, and the loss sums
over all of them alike: a token the answer must copy from the reasoning (the weekday a
calendar reasoning arrives at) is then a sliver of the loss, and a model may go on
recalling it from the prompt instead. ``TrainConfig.answer_weight`` multiplies the weight
of every masked token after the answer marker.

Batches are drawn from a generator seeded by ``(seed, step)``, so a run split into
several resumed runs sees exactly the batches of one long run.

Encoding a big corpus takes minutes of CPU time; ``EncodedData.save`` keeps the result
(about 25 bytes per example) so that later runs, or a borrowed GPU, start at once.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import lzma
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .api import Engine
from .tokenizer import Conversation, Tokenizer

log = logging.getLogger(__name__)

TRAINER_STATE_FILE = "trainer_state.pt"
MIN_MASK_RATIO = 1e-3


@dataclass
class Example:
    """One training conversation and the reply the model should write."""

    conversation: Conversation
    answer: str
    thinking: str = ""


def load_examples(path: str | Path) -> list[Example]:
    """Examples from a JSON-lines file.

    Each line: ``{"question": "..."}`` or ``{"messages": [{"role", "content"}, ...]}``,
    plus ``"answer"`` and optionally ``"thinking"``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no training data at {path}; pass a JSON-lines file")
    examples = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            conversation = row["messages"] if "messages" in row else row["question"]
            examples.append(Example(conversation, row["answer"], row.get("thinking", "")))
        except (json.JSONDecodeError, KeyError, TypeError) as error:
            raise ValueError(
                f"{path}:{number}: expected a JSON object with 'question' (or 'messages') "
                f"and 'answer' ({error!r})"
            ) from None
    if not examples:
        raise ValueError(f"{path} holds no examples")
    return examples


@dataclass
class TrainConfig:
    steps: int = 1000
    batch_size: int = 32
    lr: float = 1e-3
    warmup_steps: int = 100
    min_lr_ratio: float = 0.1  # cosine decay ends at lr * min_lr_ratio
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    reply_length: int | None = None  # canvas length; None: the longest reply
    seed: int = 0
    out_dir: str | None = None  # where checkpoints (and the resumable state) go
    save_every: int = 0  # steps between checkpoints; 0: only at the end
    resume: bool = True  # continue from out_dir's trainer state when there is one
    stop_after: int | None = None  # run at most this many steps in this call, then save
    time_limit_s: float | None = None  # or stop (and save) once this much time has passed
    progress: bool = True  # tqdm progress bar
    checkpoint_dtype: str | None = None  # e.g. "float16" to shrink saved weights
    length_buckets: bool = False  # batch replies of similar length (see EncodedData.sample)
    suffix_mask_share: float = 0.0  # rows masked from a random cut on (see module doc)
    result_hidden_share: float = 0.0  # rows hidden from the result on (see module doc)
    result_marker: str | None = None  # the token before a reasoning's result, e.g. " →"
    hide_whole_answer: bool = True  # False: result-hidden rows hide only the result in it
    answer_weight: float = 1.0  # the answer's masked tokens weigh this many times (see doc)
    # Cosine decay spans time_limit_s rather than steps: a burst of fixed length on
    # hardware whose speed is not known ahead ends with a fully decayed rate. Such a
    # run is not resumable step for step.
    decay_over_time_limit: bool = False
    # Where the weights and the data came from (a starting checkpoint, the corpus's
    # options), as the caller states it; written to training.json with the rest so the
    # run can be made again and a model card can say what it continued
    origin: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.steps < 1 or self.batch_size < 1:
            raise ValueError("steps and batch_size must be at least 1")
        if self.lr <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        for name in ("suffix_mask_share", "result_hidden_share"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {getattr(self, name)}")
        if self.result_hidden_share and not self.result_marker:
            raise ValueError("result_hidden_share needs the result_marker token")
        if not self.answer_weight > 0:
            raise ValueError(f"answer_weight must be positive, got {self.answer_weight}")
        if self.decay_over_time_limit and not self.time_limit_s:
            raise ValueError("decay_over_time_limit needs time_limit_s")


@dataclass
class TrainResult:
    losses: list[float] = field(default_factory=list)  # one per step run in this call
    first_step: int = 0  # the step this call started from (> 0 when resumed)
    steps: int = 0  # the step reached
    tokens: int = 0  # tokens processed in this call
    seconds: float = 0.0
    checkpoint: Path | None = None


@dataclass
class Batch:
    """Rows of prompt + reply + end padding, and where each row's prompt and reply end."""

    tokens: torch.Tensor  # (batch, width)
    prompt_lens: torch.Tensor  # (batch,)
    reply_ends: torch.Tensor  # (batch,) prompt + reply, without padding

    def to(self, device: torch.device) -> Batch:
        return Batch(*(t.to(device) for t in (self.tokens, self.prompt_lens, self.reply_ends)))


@dataclass
class EncodedData:
    """Examples as padded id tensors, ready to batch."""

    tokens: torch.Tensor  # (n, max_len) prompt + reply + end padding
    prompt_lens: torch.Tensor  # (n,)
    reply_length: int
    lengths: torch.Tensor  # (n,) prompt + reply, without padding
    by_length: torch.Tensor  # (n,) row indices, shortest first

    @classmethod
    def build(
        cls, engine: Engine, examples: Sequence[Example], reply_length: int | None
    ) -> EncodedData:
        if not examples:
            raise ValueError("no training examples given")
        prompts, replies = encode_examples(engine.tokenizer, examples)
        return cls.from_ids(prompts, replies, reply_length, engine)

    @classmethod
    def from_ids(
        cls,
        prompts: Sequence[Sequence[int]],
        replies: Sequence[Sequence[int]],
        reply_length: int | None,
        engine: Engine,
    ) -> EncodedData:
        """Pad encoded prompts and replies (see ``encode_examples``) into one tensor."""
        longest = max(map(len, replies))
        reply_length = reply_length or longest
        if longest > reply_length:
            raise ValueError(
                f"a reply is {longest} tokens but reply_length is {reply_length}; "
                "raise reply_length"
            )
        max_len = max(map(len, prompts)) + reply_length
        if max_len > engine.model.config.max_seq_len:
            raise ValueError(
                f"prompt + reply reach {max_len} tokens, beyond the model's context of "
                f"{engine.model.config.max_seq_len}; raise ModelConfig.max_seq_len"
            )
        rows = [torch.tensor([*p, *r]) for p, r in zip(prompts, replies, strict=True)]
        return cls._padded(
            torch.cat(rows),
            torch.tensor([len(row) for row in rows]),
            torch.tensor([len(p) for p in prompts]),
            reply_length,
            engine.tokenizer.end_id,
        )

    @classmethod
    def _padded(
        cls,
        flat: torch.Tensor,
        lengths: torch.Tensor,
        prompt_lens: torch.Tensor,
        reply_length: int,
        end_id: int,
    ) -> EncodedData:
        width = int(prompt_lens.max()) + reply_length
        tokens = torch.full((len(lengths), width), end_id, dtype=torch.long)
        columns = torch.arange(width).unsqueeze(0)
        tokens[columns < lengths.unsqueeze(1)] = flat.long()
        return cls(tokens, prompt_lens, reply_length, lengths, lengths.argsort(stable=True))

    @classmethod
    def concat(cls, parts: Sequence[EncodedData], end_id: int) -> EncodedData:
        """One data set of all the parts' rows, in order (parts encoded in parallel), with
        the widest part's canvas."""
        if len(parts) == 1:
            return parts[0]  # already padded; re-padding would copy every row for nothing
        return cls._padded(
            torch.cat([part._unpadded() for part in parts]),
            torch.cat([part.lengths for part in parts]),
            torch.cat([part.prompt_lens for part in parts]),
            max(part.reply_length for part in parts),
            end_id,
        )

    def _unpadded(self) -> torch.Tensor:
        """Every row without its end padding, one after another."""
        return self.tokens[torch.arange(self.tokens.shape[1]) < self.lengths.unsqueeze(1)]

    def save(self, path: str | Path, engine: Engine) -> None:
        """Write the rows, unpadded and xz-compressed, to ``path`` (``engine``: whose
        tokenizer encoded them, which ``load`` checks)."""
        rows = self._unpadded()
        state = {
            "flat": rows.to(torch.int16 if int(rows.max()) < 2**15 else torch.int32),
            "lengths": self.lengths,
            "prompt_lens": self.prompt_lens,
            "reply_length": self.reply_length,
            "tokenizer": engine.tokenizer.fingerprint(),
        }
        buffer = io.BytesIO()
        torch.save(state, buffer)
        Path(path).write_bytes(lzma.compress(buffer.getvalue(), preset=6))

    @classmethod
    def load(cls, path: str | Path, engine: Engine) -> EncodedData:
        """Rows written by ``save``; they must come from ``engine``'s tokenizer."""
        path = Path(path)
        try:
            state = torch.load(io.BytesIO(lzma.decompress(path.read_bytes())), weights_only=True)
        except (lzma.LZMAError, RuntimeError, EOFError) as error:
            raise ValueError(f"{path} is not an encoded corpus ({error})") from None
        if not isinstance(state, dict) or "flat" not in state:
            raise ValueError(f"{path} is not an encoded corpus (no token rows in it)")
        if state.get("tokenizer") != engine.tokenizer.fingerprint():
            raise ValueError(f"{path} was encoded with another tokenizer; encode it again")
        return cls._padded(
            state["flat"],
            state["lengths"],
            state["prompt_lens"],
            state["reply_length"],
            engine.tokenizer.end_id,
        )

    def sample(self, batch_size: int, generator: torch.Generator, bucketed: bool) -> Batch:
        """A batch of rows.

        Plain batches are cut to their longest prompt + ``reply_length``: every reply
        gets the full canvas. Bucketed batches take rows of similar length and cut them
        anywhere between just past their longest row and the full canvas, uniformly,
        which saves half the compute that padding would take. The width must not tell
        the reply's length: a model that saw short replies only in narrow canvases
        writes garbage into the full canvas it gets at inference.
        """
        if not bucketed:
            rows = torch.randint(len(self.tokens), (batch_size,), generator=generator)
            width = int(self.prompt_lens[rows].max()) + self.reply_length
            return Batch(self.tokens[rows, :width], self.prompt_lens[rows], self.lengths[rows])
        window = min(len(self.by_length), 4 * batch_size)
        first = int(torch.randint(len(self.by_length) - window + 1, (1,), generator=generator))
        pick = torch.randperm(window, generator=generator)[:batch_size]
        rows = self.by_length[first + pick]
        full = int(self.prompt_lens[rows].max()) + self.reply_length
        shortest = int(self.lengths[rows].max())
        width = int(torch.randint(shortest, full + 1, (1,), generator=generator))
        return Batch(self.tokens[rows, :width], self.prompt_lens[rows], self.lengths[rows])


def encode_examples(
    tokenizer: Tokenizer, examples: Sequence[Example]
) -> tuple[list[list[int]], list[list[int]]]:
    """Prompt ids and reply ids of each example."""
    prompts = [tokenizer.prompt_ids(e.conversation) for e in examples]
    replies = [tokenizer.reply_ids(e.thinking, e.answer) for e in examples]
    return prompts, replies


def diffusion_loss(
    engine: Engine,
    batch: Batch,
    generator: torch.Generator,
    suffix_mask_share: float = 0.0,
    result_hidden_share: float = 0.0,
    result_marker_id: int | None = None,
    answer_marker_id: int | None = None,
    answer_weight: float = 1.0,
) -> torch.Tensor:
    """The masked-diffusion loss of one batch (see the module docstring)."""
    masked, weights = noise_mask(
        batch,
        generator,
        suffix_mask_share,
        result_hidden_share,
        result_marker_id,
        answer_marker_id,
    )
    if answer_weight != 1.0:
        answers = answer_span(batch, engine.tokenizer.answer_id)
        weights = torch.where(answers, weights * answer_weight, weights)
    tokens = batch.tokens
    noisy = torch.where(masked, engine.tokenizer.mask_id, tokens)
    logits = engine.model(noisy, prompt_len=batch.prompt_lens)
    ce = F.cross_entropy(logits[masked].float(), tokens[masked], reduction="none")
    reply_positions = tokens.shape[1] * len(tokens) - int(batch.prompt_lens.sum())
    return (ce * weights[masked]).sum() / reply_positions


def reply_span(batch: Batch) -> torch.Tensor:
    """Each row's reply positions, its end token included and the padding after it not."""
    position = torch.arange(batch.tokens.shape[1], device=batch.tokens.device).unsqueeze(0)
    return (position >= batch.prompt_lens.unsqueeze(1)) & (position < batch.reply_ends.unsqueeze(1))


def answer_span(batch: Batch, answer_id: int) -> torch.Tensor:
    """Each row's answer: the positions after its answer marker, up to the reply's end
    (its end token included, padding not); nothing in a row without the marker."""
    position = torch.arange(batch.tokens.shape[1], device=batch.tokens.device).unsqueeze(0)
    in_reply = reply_span(batch)
    marks = (batch.tokens == answer_id) & in_reply
    first = torch.where(marks, position, batch.tokens.shape[1]).amin(dim=1, keepdim=True)
    return in_reply & (position > first)


def marker_id(engine: Engine, marker: str | None) -> int:
    """The id of the one token ``marker`` encodes to; a clear error for any other."""
    ids = engine.tokenizer.encode(marker or "")
    if len(ids) != 1:
        raise ValueError(f"the result marker {marker!r} must be one token, not {len(ids)}")
    return ids[0]


def noise_mask(
    batch: Batch,
    generator: torch.Generator,
    suffix_mask_share: float = 0.0,
    result_hidden_share: float = 0.0,
    result_marker_id: int | None = None,
    answer_marker_id: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Which positions of the batch to mask, and the loss weight of each position.

    Result-hidden rows hide from the last ``result_marker_id`` to the end of the reply,
    or, given ``answer_marker_id``, the result only (see the module docstring)."""
    rows, width = batch.tokens.shape
    device = batch.tokens.device

    def uniform(*shape: int) -> torch.Tensor:
        return torch.rand(*shape, generator=generator, device=device)

    ratio = MIN_MASK_RATIO + (1 - MIN_MASK_RATIO) * uniform(rows)
    position = torch.arange(width, device=device).unsqueeze(0)
    is_reply = position >= batch.prompt_lens.unsqueeze(1)
    at_ratio = (uniform(rows, width) < ratio.unsqueeze(1)) & is_reply
    ratio_weights = (1.0 / ratio).unsqueeze(1).expand(rows, width)
    masked, weights = at_ratio, ratio_weights
    if suffix_mask_share > 0:
        ordered = (uniform(rows) < suffix_mask_share).unsqueeze(1)
        reply_lens = (batch.reply_ends - batch.prompt_lens).clamp_min(1)
        cut = batch.prompt_lens + (uniform(rows) * reply_lens).long()
        suffix = (position >= cut.unsqueeze(1)) & (position < batch.reply_ends.unsqueeze(1))
        masked = masked | (suffix & ordered)
        weights = torch.where(ordered, torch.ones_like(weights), weights)
    if result_hidden_share > 0:  # drawn only when asked: other runs keep their batches
        rows_hiding = (uniform(rows) < result_hidden_share).unsqueeze(1)
        in_reply = reply_span(batch)
        marks = (batch.tokens == result_marker_id) & in_reply
        last_mark = torch.where(marks, position, -1).amax(dim=1)
        start = torch.where(last_mark >= 0, last_mark, batch.reply_ends).unsqueeze(1)
        hidden = (position >= start) & in_reply
        if answer_marker_id is not None:
            hiding = (rows_hiding.squeeze(1) & (last_mark >= 0)).nonzero().flatten().tolist()
            hidden = _result_only(batch, hidden, last_mark, hiding, answer_marker_id)
        masked = torch.where(rows_hiding, at_ratio | hidden, masked)
        weights = torch.where(rows_hiding, torch.where(hidden, 1.0, ratio_weights), weights)
    return masked, weights


def _result_only(
    batch: Batch, hidden: torch.Tensor, last_mark: torch.Tensor, rows: list[int], answer_id: int
) -> torch.Tensor:
    """``hidden`` (each row's span from its last result marker to the reply's end) cut,
    in ``rows``, to the result: from the marker to the answer marker, and wherever the
    answer repeats the tokens between them ("→ 162" and "... is 162.")."""
    cut = hidden.clone()
    for row in rows:
        start, end = int(last_mark[row]), int(batch.reply_ends[row])
        ids = batch.tokens[row, :end].tolist()
        if answer_id not in ids[start:]:
            continue  # no answer after the result: the span stays hidden whole
        answer = ids.index(answer_id, start)
        result = ids[start + 1 : answer]
        cut[row, answer + 1 : end] = False
        for at in range(answer + 1, end - len(result) + 1) if result else ():
            if ids[at : at + len(result)] == result:
                cut[row, at : at + len(result)] = True
    return cut


def learning_rate(config: TrainConfig, step: int, seconds: float = 0.0) -> float:
    """Linear warm-up, then cosine decay to ``lr * min_lr_ratio`` over the remaining
    steps, or over the time limit (``decay_over_time_limit``; ``seconds`` run so far)."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    if config.decay_over_time_limit:
        progress = seconds / config.time_limit_s
    else:
        progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return config.lr * (config.min_lr_ratio + (1 - config.min_lr_ratio) * cosine)


def train(
    engine: Engine, examples: Sequence[Example] | EncodedData, config: TrainConfig
) -> TrainResult:
    """Train ``engine.model`` in place (float32 weights; bf16 autocast on CUDA).

    The engine's default canvas becomes the trained reply length, and that is what the
    saved checkpoint's sampler settings say.
    """
    model = engine.model.float().train()
    device = engine.device
    data = (
        examples
        if isinstance(examples, EncodedData)
        else EncodedData.build(engine, examples, config.reply_length)
    )
    engine.sampler = dataclasses.replace(engine.sampler, max_new_tokens=data.reply_length)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=config.lr, betas=(0.9, 0.95), weight_decay=config.weight_decay
    )
    out_dir = Path(config.out_dir) if config.out_dir else None
    start = _resume(engine, optimizer, out_dir) if (out_dir and config.resume) else 0
    result = TrainResult(first_step=start, steps=start)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    marker = marker_id(engine, config.result_marker) if config.result_hidden_share else None
    began = time.perf_counter()
    bar = tqdm(
        range(start, config.steps),
        initial=start,
        total=config.steps,
        disable=not config.progress,
        desc="training",
        unit="step",
    )
    try:
        for step in bar:
            generator = torch.Generator().manual_seed(config.seed * 1_000_003 + step)
            batch = data.sample(config.batch_size, generator, config.length_buckets)
            noise = torch.Generator(device=device).manual_seed(config.seed * 1_000_003 + step)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(config, step, time.perf_counter() - began)
            with autocast:
                loss = diffusion_loss(
                    engine,
                    batch.to(device),
                    noise,
                    config.suffix_mask_share,
                    config.result_hidden_share,
                    marker,
                    None if config.hide_whole_answer else engine.tokenizer.answer_id,
                    config.answer_weight,
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimizer.step()
            result.losses.append(loss.item())
            result.tokens += batch.tokens.numel()
            result.steps = step + 1
            bar.set_postfix(loss=f"{result.losses[-1]:.4f}", refresh=False)
            if out_dir and config.save_every and result.steps % config.save_every == 0:
                result.checkpoint = _save(engine, optimizer, out_dir, config, result.steps)
            if _out_of_budget(config, result.steps - start, time.perf_counter() - began):
                break
    finally:
        bar.close()
        model.eval()
    if out_dir and result.steps > start:
        result.checkpoint = _save(engine, optimizer, out_dir, config, result.steps)
    result.seconds = time.perf_counter() - began
    return result


def _out_of_budget(config: TrainConfig, steps_run: int, seconds: float) -> bool:
    if config.stop_after is not None and steps_run >= config.stop_after:
        return True
    return config.time_limit_s is not None and seconds >= config.time_limit_s


def _save(engine: Engine, optimizer, out_dir: Path, config: TrainConfig, step: int) -> Path:
    dtype = getattr(torch, config.checkpoint_dtype) if config.checkpoint_dtype else None
    # Resumable state first, weights last: a crash between them leaves the older pair.
    state = {"step": step, "optimizer": optimizer.state_dict(), "config": asdict(config)}
    state["model"] = {k: v.detach().cpu().clone() for k, v in engine.model.state_dict().items()}
    tmp = out_dir / (TRAINER_STATE_FILE + ".tmp")
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.save(state, tmp)
    tmp.replace(out_dir / TRAINER_STATE_FILE)
    engine.save(out_dir, dtype=dtype)
    record = {"step": step, **asdict(config), "hardware": _hardware(engine.device)}
    (out_dir / "training.json").write_text(json.dumps(record, indent=2) + "\n")
    log.info("step %d: checkpoint written to %s", step, out_dir)
    return out_dir


def _hardware(device: torch.device) -> str:
    """What trained the weights, for the model card."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    threads = torch.get_num_threads()
    return f"CPU, {threads} thread{'s' if threads != 1 else ''}"


def _resume(engine: Engine, optimizer, out_dir: Path) -> int:
    path = out_dir / TRAINER_STATE_FILE
    if not path.is_file():
        return 0
    state = torch.load(path, map_location=engine.device, weights_only=True)
    engine.model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    log.info("resuming from step %d in %s", state["step"], out_dir)
    return int(state["step"])
