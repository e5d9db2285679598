"""Every product a × b asked plainly, right per operand length: what the card's one
multiplication figure averages over.

The held-out draws pick each operand's length alone, so three products in four have a
one-digit operand and the card's figure mostly measures those. Here every unordered pair
of a range is asked ("what is a times b", 16 steps, greedy) and the answers are counted
by the operands' lengths (one digit, 10-19, 20-99), each split into pairs training saw
and held-out ones, with how often the confidence threshold would have caught a wrong
answer. Several models take turns on the same pairs. ``--frame`` asks them in other words
("tell me {a} times {b}?"), and the last row counts the answers that restate an operand
wrong ("88 times 3 is 243." for 81 times 3), a slip the threshold rarely catches. Run
from the repository root: ``python -m benchmarks.products [--model bundled] [--model
build/RUN] [--every 3] [--frame "tell me {a} times {b}?"]``.
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass, field

import torch
from quicksilver.engine import Engine
from quicksilver.models.reasoner_tiny.corpus import is_held_out_value

BATCH = 32
FRAME = "what is {a} times {b}"


def length_class(n: int) -> str:
    return "1 digit" if n < 10 else ("10-19" if n < 20 else "20-99")


@dataclass
class Tally:
    """Right answers per (operand classes, held out or trained), and the wrong ones an
    unsure threshold catches."""

    right: Counter = field(default_factory=Counter)
    asked: Counter = field(default_factory=Counter)
    wrong_caught: int = 0
    wrong: int = 0
    miscopied: int = 0  # answers whose restated operands are not the asked ones

    def add(self, key: tuple[str, bool], ok: bool, caught: bool, miscopied: bool) -> None:
        self.asked[key] += 1
        self.right[key] += ok
        self.miscopied += miscopied
        if not ok:
            self.wrong += 1
            self.wrong_caught += caught

    def share(self, keep) -> str:
        asked = sum(n for key, n in self.asked.items() if keep(key))
        right = sum(n for key, n in self.right.items() if keep(key))
        return f"{right / asked:.0%} of {asked}" if asked else "-"


def pairs(low: int, high: int, every: int) -> list[tuple[int, int]]:
    return [(a, b) for a in range(low, high + 1) for b in range(a, high + 1)][::every]


def tally(
    engine: Engine, asked: list[tuple[int, int]], unsure_below: float, frame: str = FRAME
) -> Tally:
    result = Tally()
    for start in range(0, len(asked), BATCH):
        chunk = asked[start : start + BATCH]
        questions = [[{"role": "user", "content": frame.format(a=a, b=b)}] for a, b in chunk]
        for (a, b), answer in zip(chunk, engine.answer_batch(questions), strict=True):
            key = (f"{length_class(a)} × {length_class(b)}", is_held_out_value("mul", (a, b)))
            said = answer.text.strip()
            result.add(
                key,
                ok=said == f"{a} times {b} is {a * b}.",
                caught=answer.confidence < unsure_below,
                miscopied=not said.startswith(f"{a} times {b} is "),
            )
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="checkpoint (repeatable)")
    parser.add_argument("--low", type=int, default=1)
    parser.add_argument("--high", type=int, default=99)
    parser.add_argument("--every", type=int, default=1, help="ask every n-th pair")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's)")
    parser.add_argument(
        "--unsure-below", type=float, help="threshold (default: the bundled build's)"
    )
    parser.add_argument("--frame", default=FRAME, help="the question, with {a} and {b}")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    asked = pairs(args.low, args.high, args.every)
    engines = {model: Engine.load(model, device="cpu") for model in args.model or ["bundled"]}
    models = list(engines)
    if args.unsure_below is None:
        bundled = engines.get("bundled") or Engine.load("bundled", device="cpu")
        args.unsure_below = bundled.unsure_below
    tallies = {
        model: tally(engine, asked, args.unsure_below, args.frame)
        for model, engine in engines.items()
    }
    classes = sorted({name for t in tallies.values() for name, _held_out in t.asked})
    print(
        f"{len(asked)} products, {args.low}..{args.high}, every {args.every}, asked "
        f'"{args.frame}"; right answers\n'
    )
    print("| operands | " + " | ".join(models) + " |")
    print("|---|" + "---:|" * len(models))
    for name in classes:
        for side, label in ((False, "trained"), (True, "held out")):
            row = [t.share(lambda key, n=name, s=side: key == (n, s)) for t in tallies.values()]
            print(f"| {name}, {label} | " + " | ".join(row) + " |")
    print("| **all** | " + " | ".join(t.share(lambda key: True) for t in tallies.values()) + " |")
    caught = [f"{t.wrong_caught} of {t.wrong}" for t in tallies.values()]
    print(f"| wrong answers under {args.unsure_below} | " + " | ".join(caught) + " |")
    miscopied = [str(t.miscopied) for t in tallies.values()]
    print("| operands restated wrong | " + " | ".join(miscopied) + " |")


if __name__ == "__main__":
    main()
