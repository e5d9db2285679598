"""The shipped reasoner under each candidate sampler setting, side by side.

Every setting that ``models.reasoner_tiny.ship`` chooses from answers the same held-out
validation questions (``--per-skill`` per skill, the ship script's validation draw);
the settings take turns, ``--rounds`` times, so load on a shared machine hits them
alike. Accuracy is the same every round (greedy decoding), and so is the count that
does not depend on the machine: positions run through the model per answer (prompt
and canvas, summed over the passes). Latency is the median of the rounds' p50 and p90.
Run from the repository root:
``python -m benchmarks.sampler [--per-skill 8] [--rounds 2] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import statistics

import torch
from quicksilver.engine import Engine, SamplerConfig
from quicksilver.models.reasoner_tiny.evaluate import evaluate
from quicksilver.models.reasoner_tiny.ship import CANDIDATES, VALIDATION_SEED


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="bundled", help="checkpoint (default: shipped)")
    parser.add_argument("--per-skill", type=int, default=8, help="questions per skill")
    parser.add_argument("--rounds", type=int, default=2, help="turns each setting takes")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    engine = Engine.load(args.model, device="cpu")
    # Candidates are options over the library's defaults, as on a training run's folder
    # in the ship script; the shipped checkpoint's own choice would leak into "plain".
    engine.sampler = SamplerConfig(steps=16, max_new_tokens=engine.sampler.max_new_tokens)
    positions_run = 0

    def count(_module, inputs, _output) -> None:
        nonlocal positions_run
        positions_run += inputs[0].shape[1]

    engine.model.register_forward_hook(count)
    means: dict[str, float] = {}
    positions: dict[str, float] = {}
    p50s: dict[str, list[float]] = {name: [] for name in CANDIDATES}
    p90s: dict[str, list[float]] = {name: [] for name in CANDIDATES}
    for round_ in range(args.rounds):
        for name, options in CANDIDATES.items():
            positions_run = 0
            result = evaluate(engine, args.per_skill, steps=16, seed=VALIDATION_SEED, **options)
            means[name] = result.mean
            positions[name] = positions_run / len(result.latencies_ms)
            p50s[name].append(result.p50_ms)
            p90s[name].append(result.p90_ms)
            print(f"  round {round_ + 1}: {name}: p50 {result.p50_ms:.0f} ms", flush=True)
    first = next(iter(CANDIDATES))
    base = statistics.median(p50s[first])
    print(
        f"\n{args.model}, 16 steps, {args.per_skill} validation questions per skill, "
        f"{torch.get_num_threads()} thread(s), median of {args.rounds} round(s)\n"
    )
    print(
        "| sampler | mean accuracy | positions run per answer | p50 ms | p90 ms | p50 / first row |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name in CANDIDATES:
        p50, p90 = statistics.median(p50s[name]), statistics.median(p90s[name])
        print(
            f"| {name} | {means[name]:.1%} | {positions[name]:,.0f} | {p50:.0f} | {p90:.0f} "
            f"| {p50 / base:.2f} |"
        )


if __name__ == "__main__":
    main()
