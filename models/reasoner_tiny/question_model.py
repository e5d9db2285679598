"""The question model shipped beside reasoner-tiny: what its users ask, for speech-to-text.

``python -m quicksilver.models.reasoner_tiny.question_model`` counts the questions of
the training corpus (``corpus.training_items``, so held-out phrasings and words never
reach it) into ``questions.lm.json`` in this folder. The assistant finds it in the
checkpoint folder and lets it choose among Whisper's hypotheses
(:mod:`audio.language_model`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from quicksilver.audio.language_model import FILE_NAME, QuestionModel

from .corpus import training_items

HERE = Path(__file__).parent


def build(count: int = 30_000, seed: int = 0) -> QuestionModel:
    """Count the questions (and earlier turns' questions) of ``count`` training items."""
    items = training_items(count, seed)
    questions = [item.question for item in items]
    questions += [earlier for item in items for earlier, _ in item.history]
    return QuestionModel.train(questions)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=30_000, help="training items counted")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / FILE_NAME)
    args = parser.parse_args(argv)
    model = build(args.examples, args.seed)
    path = model.save(args.out)
    print(f"{len(model.vocabulary)} words, {len(model.counts)} n-grams: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
