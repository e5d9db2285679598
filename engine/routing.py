"""Routed checkpoints: a small router model picks, per question, which expert answers.

A routed checkpoint is a folder holding ``routing.json`` and one ordinary checkpoint
folder per model it names (paths relative to the folder)::

    {"format": "quicksilver-routed", "format_version": 3,
     "router": "router", "router_steps": 1,
     "experts": {"letters": "letters", "arithmetic": "arithmetic"},
     "default": "general", "router_names": ["letters", "arithmetic", "default"],
     "route_above": 0.8, "unsure_below": null}

The router is an ordinary diffusion checkpoint whose spoken answer is an expert's name,
on its own short canvas. With ``router_names`` (every name it was trained to answer,
"default" included) it is read as a choice among them: its one pass on the masked canvas
scores each name's whole canvas, and the likeliest name is the route, its share of the
names' probability the router's confidence (:func:`choose_names`). Without them (format
1 and 2), its answer is denoised in ``router_steps`` passes and read as text, which can
come out as no name at all ("nemault" between "numbers" and "default"). A route naming
no expert ("default", an empty or unknown answer, a name the build has no expert for)
goes to the default model, and so does one the router is less sure of than
``route_above`` (its :attr:`~engine.api.Answer.confidence`):
a doubtful route costs nothing against the general model, while a wrong expert, trained
on one family alone, answers a question of another badly. Every answer then
costs the router's passes plus the expert's, and :class:`~engine.api.Answer` says so:
``forward_passes`` and ``latency_s`` include the router's, ``router_passes`` counts them
and ``expert`` names the model that answered.

The router, the experts and the default must read prompts alike (one vocabulary, one
set of special tokens, one chat template); an expert may prepare its prompts its own way
(the template's ``preparation``: a letters expert's prompt holds the asked letter in a
field of its own), and a prompt then counts as the longest any model reads. The experts
and the default share their context and reply canvas, so a caller's budget fits
whichever answers. ``unsure_below`` is the routed system's own threshold,
measured on the routed system (the experts' own thresholds are not used).

:func:`scheduler_for` gives the continuous-batching scheduler an engine needs: a
:class:`~engine.scheduler.Scheduler` for a plain engine, a :class:`RoutedScheduler`
(one scheduler per model, conversations routed as they are submitted) for a routed one.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import torch

from .api import ROUTING_FILE, Answer, DenoiseFrame, Engine, Prepared, answers_in_order
from .checkpoints import AnswerSettings
from .sampler import SamplerConfig
from .scheduler import Handle, Scheduler
from .tokenizer import ChatTemplate, Conversation

log = logging.getLogger(__name__)

FORMAT = "quicksilver-routed"
FORMAT_VERSION = 3  # 2: route_above; 3: router_names
DEFAULT = "default"  # what a routed answer's ``expert`` says when the default answered


@dataclass
class Routing:
    """What ``routing.json`` says; paths relative to the routed folder."""

    router: str
    experts: dict[str, str]
    default: str
    router_steps: int = 1
    route_above: float | None = None  # the router's confidence an expert needs; None: any
    unsure_below: float | None = None
    router_names: list[str] | None = None  # read the router as a choice among these names
    format: str = FORMAT
    format_version: int = FORMAT_VERSION

    def __post_init__(self) -> None:
        if not isinstance(self.router, str) or not isinstance(self.default, str):
            raise ValueError("router and default are folder paths (strings)")
        if not isinstance(self.experts, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in self.experts.items()
        ):
            raise ValueError('experts maps names to folder paths, e.g. {"letters": "letters"}')
        for name in self.experts:
            if name != name.strip() or not name or name == DEFAULT:
                raise ValueError(
                    f"expert name {name!r} cannot be routed to: names are non-empty, have no "
                    f"surrounding spaces and are not {DEFAULT!r} (the default model's)"
                )
        if not isinstance(self.router_steps, int) or self.router_steps < 1:
            raise ValueError(f"router_steps must be a whole number ≥ 1, got {self.router_steps!r}")
        AnswerSettings(self.unsure_below)  # checks the range
        if self.router_names is not None:
            names = self.router_names
            if not (
                isinstance(names, list)
                and len(names) >= 2
                and all(isinstance(n, str) and n.strip() == n and n for n in names)
                and len(set(names)) == len(names)
            ):
                raise ValueError(
                    "router_names lists the names the router answers, at least two, each "
                    f'once, e.g. ["letters", "default"]; got {names!r}'
                )
            if self.router_steps != 1:
                raise ValueError("a router read as a choice among router_names runs 1 pass")
        if self.route_above is not None and not (
            isinstance(self.route_above, int | float) and 0.0 <= self.route_above <= 1.0
        ):
            raise ValueError(
                f"route_above is a confidence in [0, 1] or null, not {self.route_above!r}"
            )

    @classmethod
    def read(cls, folder: Path) -> Routing:
        path = folder / ROUTING_FILE
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{path} is not valid JSON ({error})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{path}: format is not {FORMAT!r}; is this a routed checkpoint?")
        if data.get("format_version", 0) > FORMAT_VERSION:
            raise ValueError(
                f"{path} uses routed format version {data['format_version']}, newer than this "
                f"Quicksilver reads ({FORMAT_VERSION}); upgrade with `pip install -U quicksilver`"
            )
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"{path}: unknown settings {unknown}")
        missing = sorted({"router", "experts", "default"} - set(data))
        if missing:
            raise ValueError(f"{path} lacks {', '.join(missing)}")
        try:
            return cls(**data)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None

    def write(self, folder: str | Path) -> Path:
        path = Path(folder) / ROUTING_FILE
        data = dataclasses.asdict(self)
        order = ["format", "format_version", "router", "router_steps", "experts", "default"]
        ordered = {key: data[key] for key in order}
        if self.router_names is not None:
            ordered["router_names"] = self.router_names
        ordered |= {"route_above": self.route_above, "unsure_below": self.unsure_below}
        path.write_text(json.dumps(ordered, indent=2) + "\n")
        return path


class RoutedEngine:
    """A router and its experts, answering as one :class:`~engine.api.Engine` does.

    What callers of an engine read comes from the default model (``model``,
    ``tokenizer``, ``sampler``, ``device``): the load checks that every model reads
    prompts alike and that the experts share the default's context and canvas, so
    those figures hold whichever model answers. Sampler options given to a call go to
    the expert; the router runs its own settings in ``router_steps`` passes.
    """

    def __init__(
        self,
        router: Engine,
        experts: Mapping[str, Engine],
        default: Engine,
        router_steps: int = 1,
        unsure_below: float | None = None,
        route_above: float | None = None,
        router_names: Sequence[str] | None = None,
    ) -> None:
        self.router = router
        self.experts = dict(experts)
        self.default = default
        self.router_steps = router_steps
        self.route_above = route_above
        self.router_names = tuple(router_names) if router_names is not None else None
        self.unsure_below = AnswerSettings(unsure_below).unsure_below
        self._router_lock = threading.Lock()  # one router pass at a time
        check_compatible(router, self.experts, default)
        if self.router_names is not None:
            name_canvases(router, self.router_names)  # each name fits the router's canvas
        preparing = {e.tokenizer.template.preparation: e for e in self.experts.values()}
        preparing[default.tokenizer.template.preparation] = default
        self._preparing_differently = tuple(preparing.values())  # one model per preparation

    @classmethod
    def load(
        cls,
        folder: str | Path,
        device: str | torch.device = "auto",
        dtype: torch.dtype | None = None,
        compile: bool | None = None,
    ) -> RoutedEngine:
        """Load a routed checkpoint folder (see the module doc)."""
        folder = Path(folder)
        routing = Routing.read(folder)

        def part(role: str, relative: str) -> Engine:
            path = folder / relative
            if not path.is_dir():
                raise FileNotFoundError(
                    f"routed checkpoint {folder}: the {role} folder {path} does not exist "
                    f"(named in {ROUTING_FILE})"
                )
            try:
                return Engine.load(path, device=device, dtype=dtype, compile=compile)
            except (ValueError, FileNotFoundError) as error:
                raise type(error)(f"routed checkpoint {folder}, the {role}: {error}") from None

        router = part("router", routing.router)
        experts = {name: part(f"expert {name!r}", path) for name, path in routing.experts.items()}
        default = part("default model", routing.default)
        log.info("routed checkpoint %s: experts %s", folder, ", ".join(experts) or "none")
        return cls(
            router, experts, default, routing.router_steps, routing.unsure_below,
            routing.route_above, routing.router_names,
        )  # fmt: skip

    # ------------------------------------------------------------------ as an engine

    @property
    def model(self):
        return self.default.model

    @property
    def tokenizer(self):
        return self.default.tokenizer

    @property
    def sampler(self) -> SamplerConfig:
        """The default model's settings (the canvas every model shares); each expert
        answers with its own, as the ship chose it."""
        return self.default.sampler

    @property
    def device(self) -> torch.device:
        return self.default.device

    def date_context(self, today: datetime.date) -> str | None:
        return self.default.date_context(today)

    def count_prompt_tokens(self, conversation: Conversation) -> int:
        """The longest prompt any answering model reads for ``conversation``."""
        return max(
            engine.count_prompt_tokens(conversation) for engine in self._preparing_differently
        )

    def sampler_config(self, **options) -> SamplerConfig:
        return self.default.sampler_config(**options)

    def prepare(self, conversation: Conversation, **options) -> Prepared:
        """Check and tokenise a conversation as the default model reads it (every model
        shares its context and canvas; an expert with its own preparation checks its own
        prompt again when it answers); bad input raises here."""
        return self.default.prepare(conversation, **options)

    # ------------------------------------------------------------------ routing

    def route(self, conversation: Conversation) -> str:
        """The name of the expert the router picks, or ``"default"``."""
        return self.route_batch([conversation])[0][0]

    def route_batch(self, conversations: Sequence[Conversation]) -> list[tuple[str, Answer]]:
        """Each conversation's expert name (or ``"default"``) and the router's answer,
        from one batched router call (read as a choice among ``router_names``: a pass
        per prompt length)."""
        with self._router_lock:
            answers = read_router(self.router, conversations, self.router_names, self.router_steps)
        return [(routed_name(a, self.experts, self.route_above), a) for a in answers]

    def engine_for(self, name: str) -> Engine:
        """The model a routed name stands for."""
        return self.experts.get(name, self.default)

    # ------------------------------------------------------------------ answering

    def answer(self, conversation: Conversation, **options) -> Answer:
        """:meth:`Engine.answer <engine.api.Engine.answer>` by the routed expert."""
        started = time.perf_counter()
        self.prepare(conversation, **options)  # bad input raises before the router runs
        [(name, routed)] = self.route_batch([conversation])
        answer = self.engine_for(name).answer(conversation, **options)
        return with_routing(answer, name, routed, time.perf_counter() - started)

    def stream(self, conversation: Conversation, **options) -> Iterator[DenoiseFrame]:
        """:meth:`Engine.stream <engine.api.Engine.stream>` by the routed expert: the
        router runs here (bad input raises here too), then the expert's frames follow;
        the last frame's answer counts the router's passes and time."""
        started = time.perf_counter()
        self.prepare(conversation, **options)
        [(name, routed)] = self.route_batch([conversation])
        frames = self.engine_for(name).stream(conversation, **options)
        return _routed_frames(frames, {0: (name, routed)}, started, {0: 0})

    def answer_batch(self, conversations: Sequence[Conversation], **options) -> list[Answer]:
        """:meth:`Engine.answer_batch <engine.api.Engine.answer_batch>`: one batched
        router call, then one batch per expert; answers in the order asked."""
        frames = self.stream_batch(conversations, drafts=False, **options)
        return answers_in_order(frames, len(conversations))

    def stream_batch(
        self, conversations: Sequence[Conversation], *, drafts: bool = True, **options
    ) -> Iterator[DenoiseFrame]:
        """:meth:`Engine.stream_batch <engine.api.Engine.stream_batch>`: one batched
        router call, then each expert's batch in turn; ``frame.conversation`` is the
        index in ``conversations``. Bad input raises here, before the router runs."""
        if not conversations:
            raise ValueError("no conversations to answer; pass at least one")
        started = time.perf_counter()
        for conversation in conversations:
            self.prepare(conversation, **options)
        routes = dict(enumerate(self.route_batch(conversations)))
        groups: dict[str, list[int]] = {}
        for index, (name, _) in routes.items():
            groups.setdefault(name, []).append(index)
        return self._group_frames(conversations, routes, groups, started, drafts, options)

    def _group_frames(self, conversations, routes, groups, started, drafts, options):
        for name, indices in groups.items():
            frames = self.engine_for(name).stream_batch(
                [conversations[i] for i in indices], drafts=drafts, **options
            )
            yield from _routed_frames(frames, routes, started, dict(enumerate(indices)))


def name_canvases(router: Engine, names: Sequence[str]) -> torch.Tensor:
    """Each name's whole canvas as the router was trained to write it (its reply ids,
    then end padding), one row per name; a name longer than the canvas is refused."""
    tok, canvas = router.tokenizer, router.sampler.max_new_tokens
    rows = []
    for name in names:
        ids = tok.reply_ids("", name)
        if len(ids) > canvas:
            raise ValueError(
                f"the router's canvas holds {canvas} tokens; the name {name!r} takes "
                f"{len(ids)}: it cannot be one of its router_names"
            )
        rows.append(ids + [tok.end_id] * (canvas - len(ids)))
    return torch.tensor(rows, device=router.device)


def choose_names(
    router: Engine, conversations: Sequence[Conversation], names: Sequence[str]
) -> list[Answer]:
    """The router's choice among ``names`` for each conversation, from one pass on its
    masked canvas: each name is scored by the log-probability of its whole canvas
    (every position as that pass predicts it), and the answer is the likeliest, its
    ``confidence`` its softmax share among the names. Unlike a denoised answer, it is
    always one of the names, and a near tie between two shows as a low confidence.
    Conversations whose prompts are as long share a batched pass."""
    candidates = name_canvases(router, names)  # (names, canvas)
    canvas = candidates.shape[1]
    requests = [router.prepare(conversation, steps=1) for conversation in conversations]
    by_length: dict[int, list[int]] = {}
    for index, request in enumerate(requests):
        by_length.setdefault(len(request.prompt_ids), []).append(index)
    answers: list[Answer | None] = [None] * len(requests)
    masked = [router.tokenizer.mask_id] * canvas
    with torch.inference_mode():
        for length, indices in by_length.items():
            rows = [[*requests[i].prompt_ids, *masked] for i in indices]
            tokens = torch.tensor(rows, device=router.device)
            span = slice(length, length + canvas)
            logits = router.model(tokens, prompt_len=length, logits_for=span).float()
            # (rows, canvas, names): each position's log-probability of each name's token
            per_position = logits.log_softmax(-1).gather(
                2, candidates.T.unsqueeze(0).expand(len(indices), -1, -1)
            )
            shares = per_position.sum(1).softmax(-1)  # (rows, names)
            for row, index in enumerate(indices):
                best = int(shares[row].argmax())
                answers[index] = Answer(
                    text=names[best],
                    thinking="",
                    steps=1,
                    forward_passes=1,
                    latency_s=time.perf_counter() - requests[index].started,
                    prompt_tokens=length,
                    canvas_tokens=canvas,
                    tokens=tuple(candidates[best].tolist()),
                    probabilities=tuple(per_position[row, :, best].exp().tolist()),
                    confidence=float(shares[row, best]),
                )
    return answers


def read_router(
    router: Engine,
    conversations: Sequence[Conversation],
    names: Sequence[str] | None,
    steps: int = 1,
) -> list[Answer]:
    """The router's answers as a routed build reads them: a choice among ``names``
    (:func:`choose_names`), or with no names its answers denoised in ``steps`` passes."""
    if names is not None:
        return choose_names(router, conversations, names)
    return router.answer_batch(conversations, steps=steps)


def routed_name(routed: Answer, experts: Collection[str], route_above: float | None) -> str:
    """Which model answers, given the router's answer: the expert it names if there is
    one and the router is sure enough (``route_above``), else ``"default"``."""
    name = routed.text.strip()
    if name in experts:
        if route_above is None or routed.confidence >= route_above:
            return name
        log.debug("the router named %r, sure to %.2f only: the default model answers",
                  name, routed.confidence)  # fmt: skip
    elif name != DEFAULT:
        log.debug("the router answered %r, no expert's name: the default model answers",
                  routed.text)  # fmt: skip
    return DEFAULT


def _routed_frames(
    frames: Iterator[DenoiseFrame],
    routes: Mapping[int, tuple[str, Answer]],
    started: float,
    indices: Mapping[int, int],
) -> Iterator[DenoiseFrame]:
    """An expert's frames renumbered to the caller's conversations (``indices``: the
    expert's index → the caller's), the finished answers carrying the routing."""
    for frame in frames:
        index = indices[frame.conversation]
        answer = frame.answer
        if answer is not None:
            name, routed = routes[index]
            answer = with_routing(answer, name, routed, time.perf_counter() - started)
        yield dataclasses.replace(frame, conversation=index, answer=answer)


def with_routing(answer: Answer, expert: str, routed: Answer, latency_s: float) -> Answer:
    """An expert's answer with the router's cost added: its passes, and the latency
    from the call (``latency_s``) that now includes the routing."""
    return dataclasses.replace(
        answer,
        forward_passes=answer.forward_passes + routed.forward_passes,
        router_passes=routed.forward_passes,
        latency_s=latency_s,
        expert=expert,
    )


def _reading(template: ChatTemplate) -> ChatTemplate:
    """A chat template less its prompt preparation, which an expert may have its own."""
    return dataclasses.replace(template, preparation=None)


def check_compatible(router: Engine, experts: Mapping[str, Engine], default: Engine) -> None:
    """Refuse models that would not read the same prompt alike, or experts whose context
    or canvas differ from the default's; the error names the part that differs."""
    reference = default.tokenizer
    parts = {"the router": router, **{f"expert {n!r}": e for n, e in experts.items()}}
    for role, engine in parts.items():
        tokenizer = engine.tokenizer
        for what, mine, theirs in (
            ("vocabulary", tokenizer.hf.get_vocab(True), reference.hf.get_vocab(True)),
            ("special tokens", tokenizer.specials, reference.specials),
            ("chat template", _reading(tokenizer.template), _reading(reference.template)),
        ):
            if mine != theirs:
                raise ValueError(
                    f"{role}'s tokenizer has another {what} than the default model's; a routed "
                    "checkpoint's models must read prompts alike (train them on one tokenizer)"
                )
    context, canvas = default.model.config.max_seq_len, default.sampler.max_new_tokens
    for role, engine in parts.items():
        if role == "the router":
            continue
        theirs = (engine.model.config.max_seq_len, engine.sampler.max_new_tokens)
        if theirs != (context, canvas):
            raise ValueError(
                f"{role} has a context of {theirs[0]} tokens and a canvas of {theirs[1]}, the "
                f"default model {context} and {canvas}; experts must share both"
            )
    room = router.model.config.max_seq_len - router.sampler.max_new_tokens
    if room < context - canvas:
        raise ValueError(
            f"the router takes prompts of up to {room} tokens, the default model up to "
            f"{context - canvas}; raise the router's max_seq_len"
        )


# ---------------------------------------------------------------------- continuous batching


class RoutedHandle:
    """A :class:`~engine.scheduler.Handle` for a routed conversation: the same API, its
    frames those of the expert's scheduler, renumbered to this handle's ``id``, the answer
    carrying the routing."""

    def __init__(self, id: int, inner: Handle, expert: str, routed: Answer, started: float):
        self.id = id
        self.inner = inner
        self.expert = expert
        self._routed = routed
        self._started = started
        self._answer: Answer | None = None

    @property
    def request(self) -> Prepared:
        return self.inner.request

    @property
    def drafts(self) -> bool:
        return self.inner.drafts

    @property
    def cancelled(self) -> bool:
        return self.inner.cancelled

    @property
    def done(self) -> bool:
        return self.inner.done

    def cancel(self) -> None:
        self.inner.cancel()

    def _routed_answer(self, answer: Answer) -> Answer:
        if self._answer is None:
            # The expert's own latency runs from its submit, just after the routing.
            latency = answer.latency_s + (self.inner.request.started - self._started)
            self._answer = with_routing(answer, self.expert, self._routed, latency)
        return self._answer

    def _frame(self, frame: DenoiseFrame) -> DenoiseFrame:
        answer = self._routed_answer(frame.answer) if frame.answer is not None else None
        return dataclasses.replace(frame, conversation=self.id, answer=answer)

    def frames(self, timeout: float | None = None) -> Iterator[DenoiseFrame]:
        for frame in self.inner.frames(timeout):
            yield self._frame(frame)

    def result(self, timeout: float | None = None) -> Answer:
        return self._routed_answer(self.inner.result(timeout))

    async def answer(self) -> Answer:
        return self._routed_answer(await self.inner.answer())

    async def __aiter__(self) -> AsyncIterator[DenoiseFrame]:
        async for frame in self.inner:
            yield self._frame(frame)


class RoutedScheduler:
    """Continuous batching for a :class:`RoutedEngine`: one
    :class:`~engine.scheduler.Scheduler` per model (each up to ``max_batch`` rows), a
    conversation routed when it is submitted (the router's passes run in the submitting
    thread, one conversation at a time) and queued at its expert's scheduler. Handles
    keep the :class:`~engine.scheduler.Handle` API."""

    def __init__(self, engine: RoutedEngine, max_batch: int = 8, *, start: bool = True) -> None:
        self.engine = engine
        self.max_batch = max_batch
        self.schedulers = {
            name: Scheduler(expert, max_batch, start=start)
            for name, expert in [*engine.experts.items(), (DEFAULT, engine.default)]
        }
        self.router_passes = 0
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def submit(self, conversation: Conversation, *, drafts: bool = True, **options) -> Handle:
        """Route, then queue at the expert's scheduler (see :meth:`Scheduler.submit
        <engine.scheduler.Scheduler.submit>`); bad input raises before the router runs."""
        started = time.perf_counter()
        self.engine.prepare(conversation, **options)
        [(name, routed)] = self.engine.route_batch([conversation])
        inner = self.schedulers[name].submit(conversation, drafts=drafts, **options)
        with self._lock:
            self.router_passes += routed.forward_passes
            handle_id = next(self._ids)
        return RoutedHandle(handle_id, inner, name, routed, started)

    @property
    def passes(self) -> int:
        """Forward passes run so far: the router's and every scheduler's."""
        return self.router_passes + sum(s.passes for s in self.schedulers.values())

    @property
    def running(self) -> int:
        return sum(s.running for s in self.schedulers.values())

    @property
    def waiting(self) -> int:
        return sum(s.waiting for s in self.schedulers.values())

    def step(self) -> bool:
        """One step of every model's scheduler (for ``start=False``)."""
        stepped = [s.step() for s in self.schedulers.values()]
        return any(stepped)

    def close(self) -> None:
        for scheduler in self.schedulers.values():
            scheduler.close()

    def __enter__(self) -> RoutedScheduler:
        return self

    def __exit__(
        self, kind: type | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def scheduler_for(
    engine: Engine | RoutedEngine, max_batch: int = 8, *, start: bool = True
) -> Scheduler | RoutedScheduler:
    """The continuous-batching scheduler for ``engine``, plain or routed."""
    if isinstance(engine, RoutedEngine):
        return RoutedScheduler(engine, max_batch, start=start)
    return Scheduler(engine, max_batch, start=start)


__all__ = [
    "RoutedEngine",
    "RoutedHandle",
    "RoutedScheduler",
    "Routing",
    "scheduler_for",
]
