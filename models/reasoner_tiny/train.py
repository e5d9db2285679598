"""Rebuild reasoner-tiny from scratch: ``python -m models.reasoner_tiny.train``.

Deterministic given ``--seed``; shows a progress bar; resumes from ``--out`` when run
again, so a long training can be split into runs of ``--minutes`` each. Ship the
result with ``python -m models.reasoner_tiny.ship RUN``, which measures it, writes the
model card and copies it into this folder, where ``Engine.load("bundled")`` finds it.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Collection
from pathlib import Path

from engine import ChatTemplate, Engine, ModelConfig, Tokenizer
from engine.train import Example, TrainConfig, train

from .corpus import training_items, vocabulary

HERE = Path(__file__).parent
SHAPE = dict(d_model=192, n_layers=4, n_heads=4, max_seq_len=352, prompt_sees_reply=False)


def build_engine(seed: int, **shape) -> Engine:
    """A fresh, untrained reasoner-tiny: the corpus's words as whole tokens, everything
    else one byte per token, and spoken-question normalisation.

    ``shape`` overrides the shipped model's shape (smaller models for quick checks).
    """
    template = ChatTemplate(normalise_user_text=True, operand_slots=True)
    tokenizer = Tokenizer.word_level(vocabulary(), template=template)
    config = ModelConfig(vocab_size=tokenizer.vocab_size, **(SHAPE | shape))
    return Engine.random(config, seed=seed, device="auto", tokenizer=tokenizer)


def examples(count: int, seed: int, skills: Collection[str] | None = None) -> list[Example]:
    items = training_items(count, seed, skills)
    return [Example(i.messages(), i.answer, i.thinking) for i in items]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="build/reasoner-tiny", help="run folder (resumable)")
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--examples", type=int, default=150_000, help="corpus size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--minutes", type=float, help="stop (and save) after this long")
    parser.add_argument("--save-every", type=int, default=250)
    parser.add_argument(
        "--suffix-mask-share",
        type=float,
        default=0.5,
        help="share of rows masked from a random cut on, so reasoning is worked out, "
        "not copied back from the answer",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    engine = build_engine(args.seed)
    config = TrainConfig(
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        warmup_steps=200,
        seed=args.seed,
        out_dir=args.out,
        save_every=args.save_every,
        time_limit_s=args.minutes * 60 if args.minutes else None,
        checkpoint_dtype="float16",
        length_buckets=True,
        suffix_mask_share=args.suffix_mask_share,
    )
    result = train(engine, examples(args.examples, args.seed), config)
    print(f"step {result.steps}/{args.steps}, {result.tokens / result.seconds:,.0f} tokens/s")
    print(f"ship it with: python -m models.reasoner_tiny.ship {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
