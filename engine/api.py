"""The engine's public face: load a checkpoint, answer, stream drafts."""

from __future__ import annotations

import dataclasses
import datetime
import logging
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from .checkpoints import AnswerSettings, load_checkpoint, resolve_checkpoint, save_checkpoint
from .compiled import CompiledForward, compile_by_default
from .model import ModelConfig, Transformer
from .sampler import OPTIONAL_SETTINGS, Canvases, DenoiseState, SamplerConfig
from .tokenizer import Conversation, Tokenizer

if TYPE_CHECKING:
    from .routing import RoutedEngine

log = logging.getLogger(__name__)

ROUTING_FILE = "routing.json"  # what makes a folder a routed checkpoint (engine.routing)


@dataclass(frozen=True)
class Answer:
    """A finished reply: the spoken ``text``, the hidden ``thinking``, its cost, and how
    sure the model was of it.

    ``confidence`` is the probability the model gave its spoken answer as it committed
    it: the product, over the answer's tokens and the end token after them, of each
    token's probability at the pass that committed it (the whole reply's tokens when the
    canvas has no answer marker). Near 1 the model never hesitated over a token of what
    it says; one doubtful token pulls it down. :attr:`Engine.unsure_below`, where the
    checkpoint has measured it, is the value under which an answer is better not said as
    it is.
    """

    text: str
    thinking: str
    steps: int  # the step budget the answer was denoised with
    forward_passes: int  # passes actually run (== steps unless an early finish was allowed)
    latency_s: float  # from the call to the finished answer, tokenising included
    prompt_tokens: int
    canvas_tokens: int  # length of the reply canvas (max_new_tokens)
    tokens: tuple[int, ...]  # the finished canvas, padding included
    # Each canvas position's probability of its token at the pass that committed it,
    # aligned with ``tokens`` (NaN where a rule, not a prediction, settled padding)
    probabilities: tuple[float, ...]
    confidence: float  # in [0, 1]: see above
    # A routed checkpoint's (engine.routing): the router's passes, included in
    # forward_passes (its time is in latency_s), and the model that answered ("default"
    # for the routed checkpoint's default model); 0 and None for a plain engine
    router_passes: int = 0
    expert: str | None = None


@dataclass(frozen=True)
class DenoiseFrame:
    """The draft after one forward pass; ``answer`` is set on the last frame only."""

    step: int
    total_steps: int
    text: str  # the spoken answer's draft, masked positions shown as ``MASK_GLYPH``
    thinking: str  # the reasoning draft
    masked: int  # positions of the canvas still masked
    committed: int  # positions this pass committed
    answer: Answer | None = None
    conversation: int = 0  # which conversation of a batch (or handle of a scheduler)


@dataclass(frozen=True)
class Prepared:
    """A conversation made ready to denoise: its settings, prompt ids and start time."""

    config: SamplerConfig
    prompt_ids: list[int]
    started: float  # time.perf_counter() at the call: latency counts from here


def answer_confidence(
    tokenizer: Tokenizer, tokens: Sequence[int], probabilities: Sequence[float]
) -> float:
    """:attr:`Answer.confidence`: the product of the committed probabilities over the
    spoken answer and its end token (``Tokenizer.answer_span``)."""
    values = probabilities[tokenizer.answer_span(tokens)]
    return math.prod(p for p in values if not math.isnan(p))


def answers_in_order(frames: Iterator[DenoiseFrame], count: int) -> list[Answer]:
    """The answers of a batch's last frames, in the order of their ``conversation``."""
    answers: list[Answer | None] = [None] * count
    for frame in frames:
        if frame.answer is not None:
            answers[frame.conversation] = frame.answer
    return answers


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``"auto"`` picks CUDA when it is there, else the CPU; anything else is checked."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "device 'cuda' was asked for but PyTorch sees no CUDA GPU; use 'cpu' or 'auto'"
        )
    return device


def default_dtype(device: torch.device) -> torch.dtype:
    """float32 on the CPU; bfloat16 on GPUs that have it, else float16."""
    if device.type != "cuda":
        return torch.float32
    return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16


class Engine:
    """A diffusion language model with its tokenizer and default sampler settings.

    >>> engine = Engine.load("path/to/checkpoint")
    >>> answer = engine.answer("what is 17 times 3", steps=16)
    >>> answer.text, answer.forward_passes

    ``compile``: run the denoising passes through ``torch.compile`` (CUDA graphs on a
    GPU) over bucketed, repeating shapes (:mod:`engine.compiled`); None: on for CUDA,
    off for the CPU. Greedy answers are the eager ones, up to floating-point rounding.

    ``unsure_below``: the :attr:`Answer.confidence` under which this model's answers are
    better not said as they are (the checkpoint's ``answer.unsure_below``, measured on
    validation items); None where no one measured it: then no answer is called unsure.
    """

    def __init__(
        self,
        model: Transformer,
        tokenizer: Tokenizer,
        sampler: SamplerConfig | None = None,
        compile: bool | None = None,
        unsure_below: float | None = None,
    ) -> None:
        if tokenizer.vocab_size > model.config.vocab_size:
            raise ValueError(
                f"the tokenizer has {tokenizer.vocab_size} tokens but the model's vocab_size "
                f"is {model.config.vocab_size}; raise ModelConfig.vocab_size"
            )
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.sampler = sampler or SamplerConfig()
        self.unsure_below = AnswerSettings(unsure_below).unsure_below  # checked
        if compile is None:
            compile = compile_by_default(self.device)
        self.compiled = CompiledForward(self.model) if compile else None

    # ------------------------------------------------------------------ construction

    @classmethod
    def load(
        cls,
        path: str | Path,
        device: str | torch.device = "auto",
        dtype: torch.dtype | None = None,
        compile: bool | None = None,
    ) -> Engine | RoutedEngine:
        """Load a checkpoint folder (config.json + model.safetensors + tokenizer.json).

        A routed checkpoint (a folder with ``routing.json``, see :mod:`engine.routing`)
        loads as a :class:`~engine.routing.RoutedEngine`, which answers as an engine does.
        """
        folder = resolve_checkpoint(path)
        if (folder / ROUTING_FILE).is_file():
            from .routing import RoutedEngine  # it builds on this module

            return RoutedEngine.load(folder, device, dtype, compile)
        config, state, tokenizer = load_checkpoint(folder)
        device = resolve_device(device)
        with torch.device("meta"):
            model = Transformer(config.model)
        if config.model.tie_embeddings:
            state["lm_head.weight"] = state["embed.weight"]
        model.load_state_dict(state, assign=True)
        model.tie_weights()
        model.to(device=device, dtype=dtype or default_dtype(device))
        log.info(
            "loaded %s (%.1fM parameters) on %s", path, config.model.parameter_count() / 1e6, device
        )
        return cls(model, tokenizer, config.sampler, compile, config.answer.unsure_below)

    @classmethod
    def random(
        cls,
        config: ModelConfig,
        seed: int = 0,
        device: str | torch.device = "cpu",
        dtype: torch.dtype | None = None,
        tokenizer: Tokenizer | None = None,
        sampler: SamplerConfig | None = None,
        compile: bool | None = None,
    ) -> Engine:
        """A randomly initialised engine (byte-level tokenizer); for tests and benchmarks."""
        device = resolve_device(device)
        tokenizer = tokenizer or Tokenizer.byte_level()
        with torch.device("meta"):
            model = Transformer(config).to(dtype=dtype or default_dtype(device))
        model.to_empty(device=device)  # allocated once, in the final dtype, on the device
        model.tie_weights()
        model.init_weights(torch.Generator(device=device).manual_seed(seed))
        return cls(model, tokenizer, sampler, compile)

    def with_words(self, words: Sequence[str]) -> Engine:
        """This engine with ``words`` kept whole by its (word-level) tokenizer, for going
        on training on text that has new words, which would otherwise reach the model
        spelled out like the words it is asked to spell.

        Every existing id keeps its meaning and weights. A new word's embedding starts as
        the mean of the embeddings of the characters that spelled it, and its output row
        as that of byte 0, which no text holds: the model does not write the word until
        training teaches it to. Changes the model in place; the returned engine owns it.
        """
        tokenizer = self.tokenizer.with_words(words)
        first = self.tokenizer.vocab_size
        if first != self.model.config.vocab_size:
            raise ValueError(
                f"the model has {self.model.config.vocab_size} token rows for a tokenizer of "
                f"{first}; only a model sized to its tokenizer can grow with it"
            )
        new_ids = range(first, tokenizer.vocab_size)
        embed, head = self.model.embed.weight.detach(), self.model.lm_head.weight.detach()
        (never_written,) = self.tokenizer.encode("\x00")
        spelled = [self.tokenizer.encode(tokenizer.decode([i])) for i in new_ids]
        embeddings = embed.new_zeros(len(spelled), embed.shape[1])
        for row, ids in enumerate(spelled):
            embeddings[row] = embed[ids].mean(0)
        self.model.grow_vocabulary(embeddings, head[never_written].expand_as(embeddings))
        log.info("%d new whole words: %d tokens", len(spelled), tokenizer.vocab_size)
        return Engine(self.model, tokenizer, self.sampler, self.compiled is not None)

    def save(self, folder: str | Path, dtype: torch.dtype | None = None) -> Path:
        """Write this engine as a checkpoint folder that :meth:`load` reads back."""
        answer = AnswerSettings(self.unsure_below)
        return save_checkpoint(folder, self.model, self.tokenizer, self.sampler, dtype, answer)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------ prompts

    def date_context(self, today: datetime.date) -> str | None:
        """The sentence that tells this model today's date, worded as its training did
        (for a system message); None for a model not trained to be told the date."""
        preparation = self.tokenizer.preparation
        return preparation.date_context(today) if preparation is not None else None

    def count_prompt_tokens(self, conversation: Conversation) -> int:
        """How many prompt tokens the model sees for ``conversation`` (a question or a
        list of messages), after its own preparation: a budget callers can fill without
        preparing the prompt themselves."""
        return len(self.tokenizer.prompt_ids(conversation))

    # ------------------------------------------------------------------ answering

    def answer(self, conversation: Conversation, **options) -> Answer:
        """Answer a question (or a list of chat messages) in the configured steps.

        ``options`` override :class:`SamplerConfig` fields for this call, e.g.
        ``steps=16, max_new_tokens=128, threshold=0.9`` (see :meth:`sampler_config`).
        """
        *_, last = self._frames([self.prepare(conversation, **options)], drafts=False)
        return last.answer

    def stream(self, conversation: Conversation, **options) -> Iterator[DenoiseFrame]:
        """Like :meth:`answer`, yielding a :class:`DenoiseFrame` after every forward pass.

        Bad input raises here, before the first frame.
        """
        return self._frames([self.prepare(conversation, **options)], drafts=True)

    def answer_batch(self, conversations: Sequence[Conversation], **options) -> list[Answer]:
        """Answer several conversations together, one forward pass per step for all.

        Each gets the same ``options`` and its own canvas, commits and step count; a
        greedy answer is token for token what :meth:`answer` gives that conversation
        alone (in the prompt cache modes that are exact alone). Answers come back in the
        order asked; each row leaves the batch as soon as it is finished.
        """
        frames = self.stream_batch(conversations, drafts=False, **options)
        return answers_in_order(frames, len(conversations))

    def stream_batch(
        self, conversations: Sequence[Conversation], *, drafts: bool = True, **options
    ) -> Iterator[DenoiseFrame]:
        """Like :meth:`answer_batch`, yielding each conversation's :class:`DenoiseFrame`
        after every pass (``frame.conversation`` is its index in ``conversations``); a
        conversation's last frame holds its answer. ``drafts=False``: last frames only.

        Bad input (any conversation's) raises here, before the first frame.
        """
        if not conversations:
            raise ValueError("no conversations to answer; pass at least one")
        prepared = [self.prepare(conversation, **options) for conversation in conversations]
        return self._frames(prepared, drafts=drafts)

    def prepare(self, conversation: Conversation, **options) -> Prepared:
        """Check and tokenise one conversation with its options (what a batch, or
        :class:`~engine.scheduler.Scheduler`, denoises); bad input raises here."""
        started = time.perf_counter()
        config = self.sampler_config(**options)
        prompt_ids = self.tokenizer.prompt_ids(conversation)
        self._check_length(len(prompt_ids), config.max_new_tokens)
        return Prepared(config, prompt_ids, started)

    def canvases(self, config: SamplerConfig) -> Canvases:
        """An empty batch of canvases for this engine's model and tokens."""
        tok = self.tokenizer
        return Canvases(
            self.model, config, mask_id=tok.mask_id, end_id=tok.end_id, compiled=self.compiled
        )

    def _frames(self, prepared: Sequence[Prepared], drafts: bool) -> Iterator[DenoiseFrame]:
        config = prepared[0].config
        with torch.inference_mode():
            canvases = self.canvases(config)
            for index, request in enumerate(prepared):
                prompt = torch.tensor(request.prompt_ids, dtype=torch.long, device=self.device)
                canvases.add(index, prompt)
            while canvases:
                for state in canvases.step():
                    if drafts or state.finished:
                        yield self.frame(state, prepared[state.key], state.key)

    def frame(self, state: DenoiseState, request: Prepared, conversation: int) -> DenoiseFrame:
        """The :class:`DenoiseFrame` a row's state makes, with the answer if it is done."""
        answer = self._finish(state, request) if state.finished else None
        thinking, text = (
            (answer.thinking, answer.text)
            if answer
            else self.tokenizer.split_draft(state.canvas.tolist(), state.masked.tolist())
        )
        return DenoiseFrame(
            state.step,
            state.total_steps,
            text,
            thinking,
            int(state.masked.sum()),
            state.committed,
            answer,
            conversation,
        )

    def _finish(self, state: DenoiseState, request: Prepared) -> Answer:
        tokens = tuple(state.canvas.tolist())
        probabilities = tuple(state.probability.tolist())
        thinking, text = self.tokenizer.split_reply(tokens)
        return Answer(
            text=text,
            thinking=thinking,
            steps=state.total_steps,
            forward_passes=state.step,
            latency_s=time.perf_counter() - request.started,
            prompt_tokens=len(request.prompt_ids),
            canvas_tokens=request.config.max_new_tokens,
            tokens=tokens,
            probabilities=probabilities,
            confidence=answer_confidence(self.tokenizer, tokens, probabilities),
        )

    def sampler_config(self, **options) -> SamplerConfig:
        """The checkpoint's sampler settings with ``options`` applied as given.

        An option left out keeps the checkpoint's default; one passed is used as it is, so
        ``padding_threshold=None`` turns padding settling off even where the checkpoint
        turns it on. A setting that cannot be off (``steps``, ``max_new_tokens``, …)
        refuses None rather than reading it as "the default".
        """
        unknown = sorted(set(options) - {f.name for f in dataclasses.fields(SamplerConfig)})
        if unknown:
            raise ValueError(f"unknown sampler options {unknown}; see engine.SamplerConfig")
        required = [k for k, v in options.items() if v is None and k not in OPTIONAL_SETTINGS]
        if required:
            defaults = ", ".join(f"{k}={getattr(self.sampler, k)!r}" for k in required)
            raise ValueError(
                f"{' and '.join(required)} cannot be None; leave the option out to use the "
                f"checkpoint's default ({defaults})"
            )
        return dataclasses.replace(self.sampler, **options)

    def _check_length(self, prompt_tokens: int, new_tokens: int) -> None:
        context = self.model.config.max_seq_len
        if prompt_tokens >= context:
            raise ValueError(
                f"the prompt is {prompt_tokens} tokens but the model's context is {context}; "
                "shorten the question or drop older turns"
            )
        if prompt_tokens + new_tokens > context:
            raise ValueError(
                f"max_new_tokens={new_tokens} does not fit: the prompt takes {prompt_tokens} of "
                f"the model's {context}-token context; "
                f"use max_new_tokens ≤ {context - prompt_tokens}"
            )
