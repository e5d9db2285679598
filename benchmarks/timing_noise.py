"""How far apart identical samplers' p50s land when they race side by side as the ship's
candidates do: the gap under which "faster" is noise.

The ship chooses each member's sampler on the validation draws, the fastest of those
within one answer of the best. Here each member's own sampler runs under ``--copies``
names in that same race (``ship.race`` on ``ship.validation_items``, the member's own
skills, both draws), so every difference between the copies' p50s is the machine's.
``ship.CLEARLY_FASTER`` must stay above the largest gap printed here, or a re-ship
flips an unchanged member's sampler on noise. Run from the repository root:
``python -m benchmarks.timing_noise [--model bundled] [--copies 4] [--rounds 2]``.
"""

from __future__ import annotations

import argparse

import torch
from quicksilver.engine import Engine, RoutedEngine
from quicksilver.models.reasoner_tiny.evaluate import VALIDATION_SEEDS
from quicksilver.models.reasoner_tiny.ship import (
    CLEARLY_FASTER,
    race,
    sampled_members,
    sampler_name,
    validation_items,
)


def gap(p50s: list[float]) -> float:
    """How much slower the slowest copy's p50 is than the fastest's, as a share of it."""
    return max(p50s) / min(p50s) - 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="bundled", help="plain or routed build")
    parser.add_argument("--copies", type=int, default=4, help="names the same sampler runs as")
    parser.add_argument("--rounds", type=int, default=2, help="races per member")
    parser.add_argument(
        "--per-skill", type=int, default=20, help="validation items per skill and draw"
    )
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    engine = Engine.load(args.model, device="cpu")
    print(
        f"{args.model}: each member's own sampler as {args.copies} copies, side by side on "
        f"the validation draws (seeds {', '.join(map(str, VALIDATION_SEEDS))}, "
        f"{args.per_skill} per skill), 16 steps, {torch.get_num_threads()} thread(s)\n"
    )
    print("| member | sampler | answers per copy | round | p50 ms per copy | gap |")
    print("|---|---|---:|---:|---|---:|")
    largest = 0.0
    if isinstance(engine, RoutedEngine):
        members = sampled_members(engine, with_default=True)
    else:
        members = {"model": (engine, None)}
    for name, (member, skills) in members.items():
        items = validation_items(args.per_skill, skills, VALIDATION_SEEDS)
        copies = {f"copy {i + 1}": member.sampler for i in range(args.copies)}
        for round_ in range(args.rounds):
            p50s = [tally.p50_ms for tally in race(member, copies, items).values()]
            largest = max(largest, gap(p50s))
            print(
                f"| {name} | {sampler_name(member.sampler)} | {len(items)} | {round_ + 1} "
                f"| {' / '.join(f'{p:.1f}' for p in p50s)} | {gap(p50s):.1%} |",
                flush=True,
            )
    verdict = "above" if largest < CLEARLY_FASTER else "NOT above"
    print(f"\nlargest gap {largest:.1%}; ship.CLEARLY_FASTER {CLEARLY_FASTER:.0%} is {verdict} it")


if __name__ == "__main__":
    main()
