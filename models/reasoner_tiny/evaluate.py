"""Per-skill accuracy of a model on the held-out sets, and its answer latency."""

from __future__ import annotations

import statistics
from collections.abc import Collection
from dataclasses import dataclass, field

from engine import Engine

from .corpus import Item, held_out_set


@dataclass
class SkillScore:
    skill: str
    correct: int = 0
    total: int = 0
    misses: list[tuple[str, str, str]] = field(default_factory=list)  # question, wanted, got

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0


@dataclass
class Evaluation:
    steps: int
    scores: list[SkillScore]
    latencies_ms: list[float]
    follow_up: bool = False  # every question came after an earlier exchange

    @property
    def label(self) -> str:
        return f"{self.steps} steps" + (", follow-up" if self.follow_up else "")

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latencies_ms)

    @property
    def p90_ms(self) -> float:
        return statistics.quantiles(self.latencies_ms, n=10)[-1]

    def to_dict(self) -> dict:
        return {
            "steps": self.steps,
            "follow_up": self.follow_up,
            "accuracy": {s.skill: round(s.accuracy, 4) for s in self.scores},
            "latency_ms": {"p50": round(self.p50_ms, 1), "p90": round(self.p90_ms, 1)},
        }


def is_right(item: Item, answer_text: str) -> bool:
    """Exact answers only: the spoken sentence must be the expected one."""
    return answer_text.strip() == item.answer


def evaluate(
    engine: Engine,
    per_skill: int = 50,
    steps: int = 16,
    skills: Collection[str] | None = None,
    seed: int = 1234,
    follow_up: bool = False,
    **options,
) -> Evaluation:
    """Answer every held-out item; ``options`` go to the sampler (e.g. ``block_length``).

    ``seed`` picks which held-out items are drawn: the reported figures use the default,
    choices such as sampler settings are made on another seed. ``follow_up`` asks each
    question after an earlier exchange, the way the assistant's memory passes it.
    """
    scores, latencies = [], []
    sets = held_out_set(per_skill, seed=seed, skills=skills, follow_up=follow_up)
    for skill, items in sets.items():
        score = SkillScore(skill)
        for item in items:
            answer = engine.answer(item.messages(), steps=steps, **options)
            latencies.append(answer.latency_s * 1000)
            score.total += 1
            if is_right(item, answer.text):
                score.correct += 1
            elif len(score.misses) < 3:
                score.misses.append((item.question, item.answer, answer.text))
        scores.append(score)
    return Evaluation(steps, scores, latencies, follow_up)
