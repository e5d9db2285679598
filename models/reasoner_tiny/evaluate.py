"""Per-skill accuracy of a model on the held-out sets, and its answer latency."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

import torch
from quicksilver.engine import Answer, Engine, RoutedEngine
from quicksilver.engine.model import KVCache

from .corpus import Item, held_out_set

TARGET = 0.95  # exact answers per skill at 16 steps: the accuracy a shipped build aims at
# Held-out draws for choices (sampler settings, candidate runs, the unsure threshold): the
# ship script's sampler draw, and one more; the reported figures use ``evaluate``'s default
VALIDATION_SEED = 7
VALIDATION_SEEDS = (VALIDATION_SEED, 11)


class Latencies:
    """p50 and p90 of the ``latencies_ms`` a result collects, one per answer."""

    latencies_ms: list[float]

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latencies_ms)

    @property
    def p90_ms(self) -> float:
        return statistics.quantiles(self.latencies_ms, n=10)[-1]


@dataclass
class SkillScore:
    skill: str
    correct: int = 0
    total: int = 0
    misses: list[tuple[str, str, str]] = field(default_factory=list)  # question, wanted, got
    miss_kinds: Counter[str] = field(default_factory=Counter)  # every miss by miss_kind
    judged: list[tuple[float, bool]] = field(default_factory=list)  # (confidence, right) each

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0


@dataclass
class Evaluation(Latencies):
    steps: int
    scores: list[SkillScore]
    latencies_ms: list[float]
    follow_up: bool = False  # every question came after an earlier exchange
    trained_phrasings: bool = False  # held-out values asked in training's phrasings

    @property
    def label(self) -> str:
        follow_up = ", follow-up" if self.follow_up else ""
        return f"{self.steps} steps{follow_up}" + (
            ", trained phrasings" if self.trained_phrasings else ""
        )

    @property
    def mean(self) -> float:
        """Mean of the per-skill accuracies: every skill counts alike."""
        return sum(s.accuracy for s in self.scores) / len(self.scores)

    def to_dict(self) -> dict:
        return {
            "steps": self.steps,
            "follow_up": self.follow_up,
            "trained_phrasings": self.trained_phrasings,
            "accuracy": {s.skill: round(s.accuracy, 4) for s in self.scores},
            "misses": {s.skill: dict(s.miss_kinds) for s in self.scores if s.miss_kinds},
            "latency_ms": {"p50": round(self.p50_ms, 1), "p90": round(self.p90_ms, 1)},
        }


def is_right(item: Item, answer_text: str) -> bool:
    """Exact answers only: the spoken sentence must be the expected one."""
    return answer_text.strip() == item.answer


@dataclass
class SideBySide(Latencies):
    """One contender's share of a side-by-side run: its right answers and latencies."""

    right: int = 0
    latencies_ms: list[float] = field(default_factory=list)


def side_by_side(
    contenders: Mapping[str, Callable[[Item], Answer]], items: Sequence[Item]
) -> dict[str, SideBySide]:
    """Every item answered by every contender in turn, the order rotating from item to
    item, so that the machine's drift slows them alike: on a shared or throttled CPU only
    latencies measured so compare (timed one after another, the ship once ranked the
    arithmetic expert's cached canvas behind its uncached one, 30% slower side by side)."""
    names = list(contenders)
    tallies = {name: SideBySide() for name in names}
    for index, item in enumerate(items):
        turn = index % len(names)
        for name in names[turn:] + names[:turn]:
            answer = contenders[name](item)
            tallies[name].latencies_ms.append(answer.latency_s * 1000)
            tallies[name].right += is_right(item, answer.text)
    return tallies


FRAME = "another frame"  # the question read as another: a refusal, "who I am", "smaller"
VALUE = "wrong value"  # the right kind of sentence with a slip in it: a digit, a letter


def miss_kind(wanted: str, got: str) -> str:
    """Why a wrong answer is wrong, by its first two words written in lower case: ``FRAME``
    when they differ from the expected answer's ("66 is smaller" for "283 is bigger", a
    refusal: the wording was not understood, and more steps will not help), ``VALUE``
    when they agree ("Tomorrow is Thursday" for "Tomorrow is Tuesday": a slip).

    Numbers and capitalised words are values, not frame: the asked word that opens
    "Committee has 2 E's." (miscopied "Committe has 2 E's.", a slip), a weekday, a
    letter, "Yes" or "No"."""

    def frame(text: str) -> list[str]:
        return re.findall(r"(?<![\w'])[a-z][a-z']*", text)[:2]

    return FRAME if frame(wanted) != frame(got) else VALUE


def evaluate(
    engine: Engine | RoutedEngine,
    per_skill: int = 50,
    steps: int = 16,
    skills: Collection[str] | None = None,
    seed: int = 1234,
    follow_up: bool = False,
    trained_phrasings: bool = False,
    **options,
) -> Evaluation:
    """Answer every held-out item; ``options`` go to the sampler (e.g. ``block_length``).

    ``seed`` picks which held-out items are drawn: the reported figures use the default,
    choices such as sampler settings are made on another seed. ``follow_up`` asks each
    question after an earlier exchange, the way the assistant's memory passes it, and
    ``trained_phrasings`` asks the held-out values in training's phrasings (see
    ``held_out_set``).
    """
    scores, latencies = [], []
    sets = held_out_set(per_skill, seed, skills, follow_up, trained_phrasings)
    for skill, items in sets.items():
        score = SkillScore(skill)
        for item in items:
            answer = engine.answer(item.messages(), steps=steps, **options)
            latencies.append(answer.latency_s * 1000)
            score.total += 1
            right = is_right(item, answer.text)
            score.judged.append((answer.confidence, right))
            if right:
                score.correct += 1
                continue
            score.miss_kinds[miss_kind(item.answer, answer.text)] += 1
            if len(score.misses) < 3:
                score.misses.append((item.question, item.answer, answer.text))
        scores.append(score)
    return Evaluation(steps, scores, latencies, follow_up, trained_phrasings)


def left_to_right(
    engine: Engine | RoutedEngine,
    per_skill: int = 50,
    skills: Collection[str] | None = None,
    seed: int = 1234,
) -> dict[str, float]:
    """Per skill, the share of held-out replies (reasoning and answer) the model gets
    wholly right in reading order: each token predicted from the right tokens before it,
    the rest of the reply masked and its end padding shown (teacher-forced, as an
    autoregressive model is scored).

    It tells a model that works its reasoning out from one that fills it in backwards
    from the answer, which uniform masking teaches and which fails at inference, where
    the answer stays masked until the reasoning is written. For a model trained to work
    forwards (``TrainConfig.suffix_mask_share``) the gap down to :func:`evaluate`'s
    accuracy is what the step budget and the commit order cost. A routed engine's reply
    is scored on the model its router picks for the question.
    """
    tok, canvas = engine.tokenizer, engine.sampler.max_new_tokens
    shares = {}
    for skill, items in held_out_set(per_skill, seed=seed, skills=skills).items():
        right = 0
        for item in items:
            reply = tok.reply_ids(item.thinking, item.answer)
            if len(reply) <= canvas:  # else the canvas cannot hold it: wrong
                model = (
                    engine.engine_for(engine.route(item.messages()))
                    if isinstance(engine, RoutedEngine)
                    else engine
                )
                prompt = model.tokenizer.prompt_ids(item.messages())  # as that model reads it
                right += _predicted_left_to_right(model, prompt, reply) == reply
        shares[skill] = right / len(items)
    return shares


def _predicted_left_to_right(engine: Engine, prompt: list[int], reply: list[int]) -> list[int]:
    """Each reply token as predicted from the reply before it (see :func:`left_to_right`).

    One canvas per token. When the prompt cannot see the canvas (reasoner-tiny), its keys
    and values are computed once for all of them."""
    tok, model, device = engine.tokenizer, engine.model, engine.device
    canvas = engine.sampler.max_new_tokens
    row = torch.tensor(reply + [tok.end_id] * (canvas - len(reply)), device=device)
    rows = row.repeat(len(reply), 1)
    for j in range(len(reply)):
        rows[j, j : len(reply)] = tok.mask_id
    prompt_ids = torch.tensor([prompt], device=device)
    with torch.inference_mode():
        if model.config.prompt_sees_reply:
            full = torch.cat([prompt_ids.expand(len(reply), -1), rows], dim=1)
            span = slice(len(prompt), len(prompt) + len(reply))
            logits = model(full, prompt_len=len(prompt), logits_for=span)
        else:
            dtype = next(model.parameters()).dtype
            cache = KVCache(model.config, 1, len(prompt) + canvas, device, dtype)
            model(prompt_ids, prompt_len=len(prompt), cache=cache)
            cache = cache.repeated(len(reply))
            logits = model(rows, start=len(prompt), cache=cache, logits_for=slice(0, len(reply)))
    return logits.diagonal(dim1=0, dim2=1).argmax(0).tolist()  # row j's token j
