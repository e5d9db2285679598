"""Ship a trained reasoner-tiny:
``python -m quicksilver.models.reasoner_tiny.ship build/reasoner-tiny``.

Picks the sampler settings on a validation draw of the held-out side, and the confidence
under which the assistant says it is unsure on the validation draws (``confidence``),
measures the chosen settings on the reported held-out sets at 8, 16 and 32 steps, writes
``MODEL_CARD.md`` with those figures, and copies the checkpoint (fp16 weights) into
this folder, where ``Engine.load("bundled")`` finds it. Selection and report use
different held-out items, so the card's figures are not tuned on themselves.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch
from quicksilver.engine import Engine, SamplerConfig

from .confidence import VALIDATION_PER_SKILL, card_section, choose_threshold, validation_judged
from .evaluate import TARGET, VALIDATION_SEED, Evaluation, evaluate, left_to_right

HERE = Path(__file__).parent
CARD = "MODEL_CARD.md"
CANDIDATES = {  # sampler options tried on the validation items
    "plain": {},
    "padding settled at p 0.9": {"padding_threshold": 0.9},
    "padding settled at p 0.9, margin confidence": {
        "padding_threshold": 0.9,
        "confidence": "margin",
    },
    "padding settled at p 0.9, blocks of 32": {"padding_threshold": 0.9, "block_length": 32},
    "padding settled at p 0.9, delayed canvas cache": {
        "padding_threshold": 0.9,
        "canvas_cache": "delayed",
    },
    "padding settled at p 0.9, position decay -0.003": {
        "padding_threshold": 0.9,
        "position_decay": -0.003,
    },
    "padding settled at p 0.9, position decay -0.003, delayed canvas cache": {
        "padding_threshold": 0.9,
        "position_decay": -0.003,
        "canvas_cache": "delayed",
    },
}


def candidate_sampler(run: SamplerConfig, options: dict) -> SamplerConfig:
    """The run's sampler at 16 steps with every setting the candidates vary put back to
    its default first, so each candidate is exactly what its name says, whatever the run's
    own settings were ("plain" is plain even for a run that already settles padding)."""
    varied = {key for candidate in CANDIDATES.values() for key in candidate}
    defaults = SamplerConfig()
    reset = {key: getattr(defaults, key) for key in varied}
    return dataclasses.replace(run, steps=16, **(reset | options))


def choose_sampler(engine: Engine, per_skill: int) -> tuple[str, SamplerConfig, dict[str, float]]:
    """Of the candidates within one validation answer of the best mean accuracy at 16
    steps, the fastest (p50). Leaves ``engine.sampler`` as it found it."""
    run_sampler = engine.sampler
    means, p50s = {}, {}
    try:
        for name, options in CANDIDATES.items():
            engine.sampler = candidate_sampler(run_sampler, options)
            result = evaluate(engine, per_skill, steps=16, seed=VALIDATION_SEED)
            means[name] = result.mean
            p50s[name] = result.p50_ms
    finally:
        engine.sampler = run_sampler
    best = best_candidate(means, p50s, answers=per_skill * len(result.scores))
    return best, candidate_sampler(run_sampler, CANDIDATES[best]), means


def best_candidate(means: dict[str, float], p50s: dict[str, float], answers: int) -> str:
    """The fastest candidate whose mean is at most one answer (of ``answers``, spread
    evenly over the skills) below the best: a gap that small is one coin flip on the
    validation items, while latency is a target of its own."""
    slack = 1 / answers + 1e-9
    best = max(means.values())
    return min((name for name in means if means[name] >= best - slack), key=p50s.__getitem__)


def accuracy_table(results: list[Evaluation], in_order: dict[str, float]) -> str:
    """Sampled accuracy per step budget, then the reading-order share (``left_to_right``)."""
    header = "| skill | " + " | ".join(r.label for r in results) + " | in reading order |"
    lines = [header, "|---|" + "---:|" * (len(results) + 1)]
    for i, score in enumerate(results[0].scores):
        cells = " | ".join(f"{r.scores[i].accuracy:.0%}" for r in results)
        lines.append(f"| {score.skill} | {cells} | {in_order[score.skill]:.0%} |")
    means = " | ".join(f"{r.mean:.0%}" for r in results)
    lines.append(f"| **mean** | {means} | {sum(in_order.values()) / len(in_order):.0%} |")
    latency = " | ".join(f"{r.p50_ms:.0f} / {r.p90_ms:.0f}" for r in results)
    lines.append(f"| latency p50 / p90 (ms) | {latency} | |")
    return "\n".join(lines)


def misses(result: Evaluation) -> str:
    rows = [
        f"- {score.skill}: “{question}” → “{got}” (wanted “{wanted}”)"
        for score in result.scores
        for question, wanted, got in score.misses[:1]
    ]
    return "\n".join(rows)


def blend_sentence(blend: dict | None) -> str:
    """The card's account of a blended run (``models.reasoner_tiny.blend``), if it is one."""
    if not blend:
        return ""
    return (
        f" Then blended with the run it started from: {1 - blend['share']:.0%} of"
        f" `{blend['base']}`'s weights and {blend['share']:.0%} of `{blend['tuned']}`'s."
    )


def write_card(
    folder: Path,
    engine: Engine,
    training: dict,
    sampler_choice: tuple[str, dict[str, float]],
    results: list[Evaluation],
    in_order: tuple[dict[str, float], int],
    per_skill: int,
    unsure: str,
) -> Path:
    """``unsure``: the section :func:`~.confidence.card_section` wrote."""
    config = engine.model.config
    chosen, validation = sampler_choice
    tried = ", ".join(f"{name} {mean:.1%}" for name, mean in validation.items())
    weights = folder / "model.safetensors"
    at_16 = next(
        r for r in results if r.steps == 16 and not r.follow_up and not r.trained_phrasings
    )
    template = (HERE / "MODEL_CARD.template.md").read_text(encoding="utf-8")
    card = template.format(
        parameters=f"{config.parameter_count() / 1e6:.1f}M",
        layers=config.n_layers,
        d_model=config.d_model,
        heads=config.n_heads,
        vocab=config.vocab_size,
        canvas=engine.sampler.max_new_tokens,
        size_mb=f"{weights.stat().st_size / 2**20:.1f}" if weights.exists() else "?",
        steps_trained=training.get("step", "?"),
        batch_size=training.get("batch_size", "?"),
        lr=training.get("lr", "?"),
        seed=training.get("seed", "?"),
        hardware=training.get("hardware", "CPU"),
        suffix_share=f"{training.get('suffix_mask_share', 0):.0%}",
        blend=blend_sentence(training.get("blend")),
        sampler=chosen,
        tried=tried,
        per_skill=per_skill,
        in_order_per_skill=in_order[1],
        table=accuracy_table(results, in_order[0]),
        misses=misses(at_16),
        below_target=", ".join(s.skill for s in at_16.scores if s.accuracy < TARGET) or "none",
        unsure=unsure,
    )
    path = folder / CARD
    path.write_text(card, encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="training run folder (config.json, model.safetensors, ...)")
    parser.add_argument("--per-skill", type=int, default=50, help="reported items per skill")
    parser.add_argument("--validation-per-skill", type=int, default=12)
    parser.add_argument(
        "--unsure-per-skill",
        type=int,
        default=VALIDATION_PER_SKILL,
        help="validation items per skill per draw for the unsure threshold",
    )
    parser.add_argument(
        "--in-order-per-skill", type=int, default=20, help="items per skill, reading order"
    )
    parser.add_argument("--to", default=str(HERE), help="where to ship (default: this folder)")
    args = parser.parse_args(argv)

    engine = Engine.load(args.run, device="cpu")
    chosen, engine.sampler, validation = choose_sampler(engine, args.validation_per_skill)
    judged = validation_judged(engine, args.unsure_per_skill)
    engine.unsure_below = choose_threshold(judged)
    results = [evaluate(engine, args.per_skill, steps=steps) for steps in (8, 16, 32)]
    results.append(evaluate(engine, args.per_skill, steps=16, follow_up=True))
    results.append(evaluate(engine, args.per_skill, steps=16, trained_phrasings=True))
    in_order = left_to_right(engine, args.in_order_per_skill)
    target = Path(args.to)
    engine.save(target, dtype=torch.float16)
    training = json.loads((Path(args.run) / "training.json").read_text())
    card = write_card(
        target,
        engine,
        training,
        (chosen, validation),
        results,
        (in_order, args.in_order_per_skill),
        args.per_skill,
        card_section(engine.unsure_below, judged, results[1], args.unsure_per_skill),
    )
    print(accuracy_table(results, in_order))
    print(f"sampler: {chosen} (validation means: {validation}); card: {card}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
