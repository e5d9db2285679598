"""Two reasoner builds answering the same held-out questions, turn about.

A model card's latency row is measured on whatever the machine was doing while it
shipped, so two cards' p50s do not compare (one build's card says 53 ms at 16 steps; the
same build on the same VM, hours later, took 90 ms). Here each question goes to both
builds in turn, the order alternating (``evaluate.side_by_side``), so the machine's drift
slows them alike: the ratio of their p50s is the figure to quote, beside how many answers
each got right. Run from the repository root:
``python -m benchmarks.checkpoints BASELINE CANDIDATE [--per-skill 10] [--threads 2]``
(a build is a folder, or a registered name such as ``bundled``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from quicksilver.engine import Answer, Engine
from quicksilver.models.reasoner_tiny.corpus import Item, held_out_set
from quicksilver.models.reasoner_tiny.evaluate import side_by_side


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("baseline", help="the build to compare against (e.g. bundled)")
    parser.add_argument("candidate", help="the build measured beside it")
    parser.add_argument("--per-skill", type=int, default=10, help="questions per skill")
    parser.add_argument("--seed", type=int, default=1234, help="which held-out draw")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    builds = {"baseline": Engine.load(args.baseline), "candidate": Engine.load(args.candidate)}
    items = [item for items in held_out_set(args.per_skill, args.seed).values() for item in items]

    def answering_with(engine: Engine) -> Callable[[Item], Answer]:
        return lambda item: engine.answer(item.messages(), steps=args.steps)

    tallies = side_by_side({name: answering_with(e) for name, e in builds.items()}, items)
    for name, path in (("baseline", args.baseline), ("candidate", args.candidate)):
        tally = tallies[name]
        print(
            f"{name:9} {path}: right {tally.right} of {len(items)}, "
            f"p50 {tally.p50_ms:.0f} ms, p90 {tally.p90_ms:.0f} ms"
        )
    ratio = tallies["candidate"].p50_ms / tallies["baseline"].p50_ms
    print(f"candidate / baseline p50: {ratio:.2f}")


if __name__ == "__main__":
    main()
