"""Compare candidate runs with the shipped build before shipping one:
``python -m quicksilver.models.reasoner_tiny.compare BASELINE RUN [RUN ...] [--shares 0.5 0.7]``.

Every candidate answers the same validation draws of the held-out side (other items than
the card reports) with the baseline's sampler settings, so that the columns differ by
their weights alone. ``--shares`` adds, for each run, its blends with the baseline
(``models.reasoner_tiny.blend``), built in memory. The last rows name the skills a
candidate takes below the 95% target that the baseline meets there: a continuation that
practises weak skills tends to unlearn strong ones, and a build that gives up a met
target is not shipped for a higher mean.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from quicksilver.engine import Engine, RoutedEngine

from .blend import blend, load
from .evaluate import TARGET, VALIDATION_SEEDS, evaluate


@dataclass
class Candidate:
    name: str
    accuracy: dict[str, float]  # per skill, over every draw

    @property
    def mean(self) -> float:
        return sum(self.accuracy.values()) / len(self.accuracy)

    def lost_targets(self, baseline: Candidate) -> list[str]:
        """The skills at the target in ``baseline`` that this candidate falls below."""
        return [
            skill
            for skill, share in baseline.accuracy.items()
            if share >= TARGET > self.accuracy[skill]
        ]


def measure(
    name: str,
    engine: Engine,
    per_skill: int,
    seeds: Sequence[int] = VALIDATION_SEEDS,
    trained_phrasings: bool = False,
) -> Candidate:
    """Per-skill accuracy at 16 steps over the validation draws, every draw alike;
    ``trained_phrasings``: their held-out values asked in training's phrasings, where a
    change that teaches a phrasing (or routes one) shows, as the card's column does."""
    results = [
        evaluate(engine, per_skill, steps=16, seed=seed, trained_phrasings=trained_phrasings)
        for seed in seeds
    ]
    skills = [score.skill for score in results[0].scores]
    accuracy = {
        skill: sum(r.scores[i].accuracy for r in results) / len(results)
        for i, skill in enumerate(skills)
    }
    return Candidate(name, accuracy)


def candidates(
    baseline: Engine, runs: dict[str, Engine | RoutedEngine], shares: Sequence[float]
) -> dict[str, Engine | RoutedEngine]:
    """Each run, and its blends with the baseline at ``shares``, all with the baseline's
    sampler settings. A routed checkpoint (``router assemble``) is measured whole and as it
    ships, its router's passes included and each expert with its own sampler (the ship
    chooses one per expert: given the default's, the spelling expert lost 5–12 points it
    has)."""
    engines: dict[str, Engine | RoutedEngine] = {}
    for name, run in runs.items():
        engines[name] = run
        if isinstance(run, RoutedEngine):
            if shares:
                raise ValueError(f"{name} is a routed checkpoint: blend its experts, not it")
            continue
        run.sampler = dataclasses.replace(baseline.sampler)  # a blend takes the run's
        for share in shares:
            engines[f"{share:g} × {name}"] = blend(baseline, run, share)
    return engines


def table(baseline: Candidate, others: Sequence[Candidate]) -> str:
    """Markdown: a column per candidate, the mean, and the met targets each one loses."""
    columns = [baseline, *others]
    lines = [
        "| skill | " + " | ".join(c.name for c in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for skill in baseline.accuracy:
        lines.append(
            f"| {skill} | " + " | ".join(f"{c.accuracy[skill]:.0%}" for c in columns) + " |"
        )
    lines.append("| **mean** | " + " | ".join(f"{c.mean:.1%}" for c in columns) + " |")
    lost = ["(baseline)", *(", ".join(c.lost_targets(baseline)) or "none" for c in others)]
    lines.append("| met targets lost | " + " | ".join(lost) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline", type=Path, help="the build to beat (e.g. models/reasoner_tiny)")
    parser.add_argument("runs", type=Path, nargs="+", help="candidate runs")
    parser.add_argument(
        "--shares",
        type=float,
        nargs="*",
        default=[],
        help="also each run's blends with the baseline (0 keeps the baseline, 1 the run)",
    )
    parser.add_argument("--per-skill", type=int, default=20, help="items per skill per draw")
    parser.add_argument("--seeds", type=int, nargs="+", default=list(VALIDATION_SEEDS))
    parser.add_argument(
        "--trained-phrasings", action="store_true", help="ask in training's phrasings"
    )
    args = parser.parse_args(argv)

    baseline = load(args.baseline)
    try:
        engines = candidates(baseline, {str(run): load(run) for run in args.runs}, args.shares)
    except ValueError as error:
        parser.error(str(error))
    measured = measure("baseline", baseline, args.per_skill, args.seeds, args.trained_phrasings)
    others = []
    for name, engine in engines.items():
        others.append(measure(name, engine, args.per_skill, args.seeds, args.trained_phrasings))
        print(f"{name}: mean {others[-1].mean:.1%}", flush=True)
    print(table(measured, others))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
