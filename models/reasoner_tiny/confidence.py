"""When reasoner-tiny should say it is not sure:
``python -m quicksilver.models.reasoner_tiny.confidence [FOLDER] [--write]``.

Every :class:`~quicksilver.engine.Answer` carries a ``confidence`` taken from the
denoising itself (the probability the model gave its spoken answer, token by token, as it
committed it). This chooses the value under which the assistant says it is unsure, on the
validation draws (the ones ``compare`` uses, never the card's questions): the threshold
that catches the most wrong answers net of the right ones it hides, a wrong answer and a
hidden right one counting alike. It then reports, on the card's held-out questions at 16
steps, how often that catches a wrong answer and how often it hides a right one, per
skill. ``--write`` stores the threshold in the checkpoint's ``config.json``
(``answer.unsure_below``) and the figures in its model card's section (the rest of the
card, and the weights, stay as they are); the ship script does the same for a new build.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from quicksilver.engine import Engine
from quicksilver.engine.api import ROUTING_FILE
from quicksilver.engine.checkpoints import CONFIG_FILE, update_config
from quicksilver.engine.routing import Routing

from .evaluate import VALIDATION_SEEDS, Evaluation, evaluate

HERE = Path(__file__).parent
HEADING = "## When it is not sure"
VALIDATION_PER_SKILL = 20  # per draw, as compare's


@dataclass
class Catches:
    """Answers below a threshold: the wrong ones caught and the right ones hidden."""

    right: int = 0
    hidden: int = 0
    wrong: int = 0
    caught: int = 0

    @classmethod
    def of(cls, judged: Iterable[tuple[float, bool]], threshold: float) -> Catches:
        """``judged``: (confidence, right) per answer."""
        counts = cls()
        for confidence, right in judged:
            unsure = confidence < threshold
            if right:
                counts.right += 1
                counts.hidden += unsure
            else:
                counts.wrong += 1
                counts.caught += unsure
        return counts

    @property
    def net(self) -> int:
        return self.caught - self.hidden

    @property
    def said_right(self) -> float:
        """The share of the answers still said that are right."""
        said = self.right - self.hidden + self.wrong - self.caught
        return (self.right - self.hidden) / said if said else 1.0


def choose_threshold(judged: Sequence[tuple[float, bool]]) -> float:
    """The threshold with the most wrong answers caught net of right ones hidden (ties:
    the one that hides fewest right answers), halfway between the two confidences it
    falls between, rounded to three places; 0 (never unsure) when none catches more than
    it hides."""
    values = sorted({confidence for confidence, _ in judged})
    candidates = [0.0] + [(a + b) / 2 for a, b in itertools.pairwise(values)]
    candidates.append(values[-1] + 1e-6 if values else 1.0)

    def merit(threshold: float) -> tuple[int, int, float]:
        counts = Catches.of(judged, threshold)
        return counts.net, -counts.hidden, -threshold

    return round(min(max(candidates, key=merit), 1.0), 3)


def validation_judged(
    engine: Engine, per_skill: int = VALIDATION_PER_SKILL, seeds: Sequence[int] = VALIDATION_SEEDS
) -> list[tuple[float, bool]]:
    """(confidence, right) of every validation answer at 16 steps."""
    return [
        pair
        for seed in seeds
        for score in evaluate(engine, per_skill, steps=16, seed=seed).scores
        for pair in score.judged
    ]


def _share(part: int, whole: int) -> str:
    return f"{part} of {whole}" + (f" ({part / whole:.0%})" if whole else "")


def card_section(
    threshold: float,
    validation: Sequence[tuple[float, bool]],
    held_out: Evaluation,
    validation_per_skill: int = VALIDATION_PER_SKILL,
    stored_in: tuple[str, str] = ("answer.unsure_below", "config.json"),
) -> str:
    """The model card's section (its heading included): the rule, the threshold, the
    validation figures and the held-out catches per skill. ``stored_in``: the setting
    and the file the engine reads the threshold from (a routed build keeps its own in
    ``routing.json``)."""
    chosen = Catches.of(validation, threshold)
    lines = [
        HEADING,
        "",
        "Every answer carries a confidence taken from the denoising itself: the product of",
        "the probabilities the model gave the spoken answer's tokens, and the end token after",
        f"them, at the passes that committed them. Below **{threshold:.3f}** (`{stored_in[0]}`",
        f"in `{stored_in[1]}`) the assistant says it is not sure instead of the answer. The",
        "threshold catches the most wrong answers net of the right ones it hides, on the",
        f"validation draws ({validation_per_skill} questions per skill, seeds "
        f"{' and '.join(map(str, VALIDATION_SEEDS))}, 16 steps):",
        f"it caught {_share(chosen.caught, chosen.wrong)} wrong answers there and hid "
        f"{_share(chosen.hidden, chosen.right)} right ones.",
        "",
        f"On the held-out questions above ({held_out.scores[0].total} per skill, "
        f"{held_out.steps} steps; `python -m models.reasoner_tiny.confidence`):",
        "",
        "| skill | wrong answers caught | right answers hidden | said answers right |",
        "|---|---:|---:|---:|",
    ]
    for score in held_out.scores:
        counts = Catches.of(score.judged, threshold)
        lines.append(
            f"| {score.skill} | {_share(counts.caught, counts.wrong)} | "
            f"{_share(counts.hidden, counts.right)} | {counts.said_right:.0%} |"
        )
    total = Catches.of([pair for score in held_out.scores for pair in score.judged], threshold)
    lines.append(
        f"| **all** | {_share(total.caught, total.wrong)} | "
        f"{_share(total.hidden, total.right)} | {total.said_right:.0%} |"
    )
    accuracy = total.right / (total.right + total.wrong)
    lines += [
        "",
        f"Of the answers it still says, {total.said_right:.0%} are right (against "
        f"{accuracy:.0%} of all answers).",
    ]
    return "\n".join(lines) + "\n"


def replace_section(card: str, section: str) -> str:
    """``card`` with its :data:`HEADING` section replaced by ``section`` (inserted before
    "## Limits", or at the end, when it has none)."""
    start = card.find(HEADING + "\n")
    if start < 0:
        limits = card.find("\n## Limits\n")
        at = limits + 1 if limits >= 0 else len(card)
        return card[:at] + section + "\n" + card[at:]
    end = card.find("\n## ", start + len(HEADING))
    end = end + 1 if end >= 0 else len(card)
    return card[:start] + section + "\n" + card[end:]


def write_threshold(folder: Path, threshold: float) -> tuple[str, str]:
    """Store ``threshold`` where the engine reads it from ``folder``, nothing else: a
    routed build's ``routing.json`` (``unsure_below``), else ``config.json``
    (``answer.unsure_below``). Returns the setting and the file, as the card names them."""
    if (folder / ROUTING_FILE).is_file():
        routing = Routing.read(folder)
        dataclasses.replace(routing, unsure_below=threshold).write(folder)
        return "unsure_below", ROUTING_FILE
    update_config(folder, "answer", {"unsure_below": threshold})
    return "answer.unsure_below", CONFIG_FILE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=HERE, help="a shipped checkpoint")
    parser.add_argument("--per-skill", type=int, default=50, help="reported items per skill")
    parser.add_argument("--validation-per-skill", type=int, default=VALIDATION_PER_SKILL)
    parser.add_argument(
        "--write", action="store_true", help="store the threshold and the card section"
    )
    args = parser.parse_args(argv)

    engine = Engine.load(args.folder, device="cpu")
    validation = validation_judged(engine, args.validation_per_skill)
    threshold = choose_threshold(validation)
    held_out = evaluate(engine, args.per_skill, steps=16)
    routed = (args.folder / ROUTING_FILE).is_file()
    stored_in = ("unsure_below", ROUTING_FILE) if routed else ("answer.unsure_below", CONFIG_FILE)
    section = card_section(threshold, validation, held_out, args.validation_per_skill, stored_in)
    print(section)
    if args.write:
        setting, file = write_threshold(args.folder, threshold)
        card = args.folder / "MODEL_CARD.md"
        text = card.read_text(encoding="utf-8") if card.exists() else ""
        card.write_text(replace_section(text, section), encoding="utf-8")
        print(f"{setting} {threshold} written to {args.folder / file}; card: {card}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
