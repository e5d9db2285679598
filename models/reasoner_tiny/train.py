"""Rebuild reasoner-tiny from scratch: ``python -m quicksilver.models.reasoner_tiny.train``.

Deterministic given ``--seed``; shows a progress bar; resumes from ``--out`` when run
again, so a long training can be split into runs of ``--minutes`` each. Ship the
result with ``python -m quicksilver.models.reasoner_tiny.ship RUN``, which measures it, writes the
model card and copies it into this folder, where ``Engine.load("bundled")`` finds it.

Encoding the corpus takes minutes; ``--encoded FILE`` keeps it for the next run (and
``--workers`` spreads it over cores). ``--init-from RUN`` starts from another run's
weights and tokenizer with a fresh schedule, e.g. a burst on a GPU
(``--decay-over-minutes``), or a run that works on a few skills (``--weight SKILL=W``).
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from itertools import repeat
from pathlib import Path

import torch
from quicksilver.engine import ChatTemplate, Engine, ModelConfig, Tokenizer
from quicksilver.engine.train import EncodedData, Example, TrainConfig, encode_examples, train

from .corpus import check_skill_names, training_items, vocabulary

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
SHAPE = dict(d_model=192, n_layers=4, n_heads=4, max_seq_len=352, prompt_sees_reply=False)
CANVAS = 135  # reply tokens: the corpus's longest reply, thinking and answer
CHUNK = 10_000  # examples per encoding task
PREPARATION = "reasoner-tiny-2"  # a fresh run's prompt preparation (prompt.py)
RESULT_MARKER = " →"  # most reasoning formats end "→ result" (train.noise_mask)


def build_engine(seed: int, tokenizer: Tokenizer | None = None, **shape) -> Engine:
    """A fresh, untrained reasoner-tiny: the corpus's words as whole tokens, everything
    else one byte per token, and its prompt preparation (``prompt.py``).

    ``tokenizer`` replaces that tokenizer (a run's own, see ``start_from``); ``shape``
    overrides the shipped model's shape (smaller models for quick checks).
    """
    if tokenizer is None:
        template = ChatTemplate(preparation=PREPARATION)
        tokenizer = Tokenizer.word_level(vocabulary(), template=template)
    config = ModelConfig(vocab_size=tokenizer.vocab_size, **(SHAPE | shape))
    return Engine.random(config, seed=seed, device="auto", tokenizer=tokenizer)


def examples(
    count: int,
    seed: int,
    skills: Collection[str] | None = None,
    weights: Mapping[str, float] | None = None,
    known_framing: float = 0.0,
) -> list[Example]:
    items = training_items(count, seed, skills, weights=weights, known_framing=known_framing)
    return [Example(i.messages(), i.answer, i.thinking) for i in items]


def encoded_corpus(
    engine: Engine,
    count: int,
    seed: int,
    workers: int = 1,
    chunk: int = CHUNK,
    weights: Mapping[str, float] | None = None,
    known_framing: float = 0.0,
) -> EncodedData:
    """The training corpus on a canvas of ``CANVAS`` tokens, encoded with ``engine``'s
    tokenizer by ``workers`` processes (the same rows for any number of them).

    The rare example that does not fit (a reply longer than the canvas, or earlier
    exchanges that leave too little room for it) is left out, and counted in the log.
    """
    corpus = examples(count, seed, weights=weights, known_framing=known_framing)
    chunks = [corpus[i : i + chunk] for i in range(0, len(corpus), chunk)]
    limit = engine.model.config.max_seq_len
    arguments = (chunks, repeat(engine.tokenizer), repeat(limit))
    if workers <= 1:
        parts = list(map(_encode, *arguments))
    else:
        with ProcessPoolExecutor(workers, initializer=torch.set_num_threads, initargs=(1,)) as pool:
            parts = list(pool.map(_encode, *arguments))
    parts = [part for part in parts if part is not None]
    if not parts:
        raise ValueError(f"no example fits a context of {limit} tokens")
    dropped = len(corpus) - sum(len(part.tokens) for part in parts)
    log.info("%d of %d examples do not fit the context and are left out", dropped, len(corpus))
    return EncodedData.concat(parts, engine.tokenizer.end_id)


def _encode(chunk: Sequence[Example], tokenizer: Tokenizer, max_seq_len: int) -> EncodedData | None:
    engine = build_engine(0, tokenizer, max_seq_len=max_seq_len)
    prompts, replies = encode_examples(engine.tokenizer, chunk)
    fits = [
        i
        for i, (prompt, reply) in enumerate(zip(prompts, replies, strict=True))
        if len(reply) <= CANVAS and len(prompt) + CANVAS <= max_seq_len
    ]
    if not fits:
        return None
    prompts, replies = [prompts[i] for i in fits], [replies[i] for i in fits]
    return EncodedData.from_ids(prompts, replies, CANVAS, engine)


def start_from(
    run: str | Path,
    grow_vocabulary: bool = False,
    preparation: str | None = None,
    deepen: int = 0,
) -> Engine:
    """Another run's weights and tokenizer, in float32, to train with a fresh schedule;
    ``preparation``: the run learns to read prompts prepared this way instead;
    ``deepen``: that many more layers, each a copy of one of the run's own spread over its
    depth that starts by adding nothing (:meth:`engine.model.Transformer.deepen`), so the
    run goes on from the same answers with more room.

    Its tokenizer stays even when the corpus's vocabulary has changed since (new phrasings
    add words): a word it does not keep whole reaches the model spelled out, as any word
    a user says that it never learned. With ``grow_vocabulary`` the corpus's words it
    lacks become new tokens instead (:meth:`engine.Engine.with_words`), every old one
    keeping its id, so the run can take up new phrasings without a fresh start.
    """
    engine = Engine.load(run, device="auto", dtype=torch.float32)
    if deepen:
        engine.model.deepen(spread(deepen, engine.model.config.n_layers))
    if preparation is not None:
        tokenizer = engine.tokenizer.with_preparation(preparation)
        engine = Engine(engine.model, tokenizer, engine.sampler, unsure_below=engine.unsure_below)
    return engine.with_words(vocabulary()) if grow_vocabulary else engine


def spread(n: int, layers: int) -> list[int]:
    """``n`` of ``layers`` block indices, evenly over the depth and ending at the last."""
    if not 1 <= n <= layers:
        raise ValueError(f"a model of {layers} layers deepens by 1 to {layers} at a time, not {n}")
    return [(k + 1) * layers // n - 1 for k in range(n)]


def skill_weights(pairs: Sequence[str]) -> dict[str, float]:
    """``["out of scope=4", …]`` → ``{"out of scope": 4.0, …}``."""
    weights = {}
    for pair in pairs:
        name, _, weight = pair.rpartition("=")
        name = name.strip()
        check_skill_names([name])
        try:
            weights[name] = float(weight)
        except ValueError:
            raise ValueError(f"a weight is SKILL=NUMBER, not {pair!r}") from None
        if not weights[name] >= 0:
            raise ValueError(f"a share is 0 or more, not {pair!r}")
    return weights


def origin(args: argparse.Namespace, weights: Mapping[str, float]) -> dict[str, object]:
    """What a run starts from and the corpus it reads, for its ``training.json``."""
    record: dict[str, object] = {
        "examples": args.examples,
        "skill_weights": dict(weights),
        "known_framing": args.known_framing,
    }
    if args.init_from:
        record["init_from"] = str(args.init_from)
        changes = {
            "deepened_by": args.deepen,
            "grown_vocabulary": args.grow_vocabulary,
            "preparation": args.preparation,
        }
        record.update({name: value for name, value in changes.items() if value})
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="build/reasoner-tiny", help="run folder (resumable)")
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--warmup-steps", type=int, default=200)
    parser.add_argument("--examples", type=int, default=150_000, help="corpus size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--minutes", type=float, help="stop (and save) after this long")
    parser.add_argument(
        "--decay-over-minutes",
        action="store_true",
        help="decay the learning rate over --minutes instead of --steps",
    )
    parser.add_argument("--save-every", type=int, default=250)
    parser.add_argument(
        "--suffix-mask-share",
        type=float,
        default=0.5,
        help="share of rows masked from a random cut on, so reasoning is worked out, "
        "not copied back from the answer",
    )
    parser.add_argument(
        "--result-hidden-share",
        type=float,
        default=0.0,
        help="share of rows hidden from the reasoning's result (its last →) on, the rest "
        "masked at random, so each step is learnt from the steps around it",
    )
    parser.add_argument(
        "--hide-result-only",
        action="store_true",
        help="result-hidden rows hide the result where the reply writes it (after the "
        "→ and in the answer), not the whole answer, whose copies from the question then "
        "keep being learnt",
    )
    parser.add_argument(
        "--answer-weight",
        type=float,
        default=1.0,
        metavar="W",
        help="the spoken answer's masked tokens weigh W times in the loss, so a token the "
        "answer copies from the reasoning is not a sliver of it",
    )
    parser.add_argument(
        "--encoded",
        type=Path,
        nargs="+",
        help="encoded corpus files to read and join (then --examples is not used), or "
        "one file to encode the corpus into first",
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--encode-only", action="store_true", help="write --encoded, then stop (no training)"
    )
    parser.add_argument(
        "--init-from", type=Path, help="start from this run's weights and tokenizer"
    )
    parser.add_argument(
        "--d-model", type=int, help=f"a fresh run's width (default {SHAPE['d_model']})"
    )
    parser.add_argument(
        "--layers", type=int, help=f"a fresh run's depth (default {SHAPE['n_layers']})"
    )
    parser.add_argument(
        "--heads", type=int, help=f"a fresh run's attention heads (default {SHAPE['n_heads']})"
    )
    parser.add_argument(
        "--grow-vocabulary",
        action="store_true",
        help="with --init-from: the corpus's words that run's tokenizer lacks become new "
        "whole-word tokens (old ids unchanged) instead of reaching the model spelled out",
    )
    parser.add_argument(
        "--preparation",
        help="with --init-from: the prompt preparation the run learns to read instead of "
        "its own (a registered name, e.g. reasoner-tiny-letters)",
    )
    parser.add_argument(
        "--deepen",
        type=int,
        default=0,
        metavar="N",
        help="with --init-from: N more layers, copies of that run's own that start by "
        "adding nothing, so training goes on from its answers with more room",
    )
    parser.add_argument(
        "--weight",
        action="append",
        default=[],
        metavar="SKILL=W",
        help="a skill's share in the corpus, e.g. --weight 'out of scope=4' (repeatable; "
        "the others keep the recipe's)",
    )
    parser.add_argument(
        "--known-framing", type=float, default=0.0, metavar="SHARE",
        help="share of conversion and calendar questions with a framing word swapped for "
        "a word that asks nothing (corpus.neutral_words)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.encode_only and not args.encoded:
        parser.error("--encode-only needs --encoded FILE")
    if args.grow_vocabulary and not args.init_from:
        parser.error(
            "--grow-vocabulary grows the tokenizer of --init-from RUN; a fresh run "
            "already takes the corpus's whole vocabulary"
        )
    shape = {
        name: value
        for name, value in (
            ("d_model", args.d_model),
            ("n_layers", args.layers),
            ("n_heads", args.heads),
        )
        if value is not None
    }
    if args.deepen and not args.init_from:
        parser.error("--deepen grows --init-from RUN; a fresh run takes --layers")
    if args.preparation and not args.init_from:
        parser.error(f"--preparation changes --init-from RUN's; a fresh run reads {PREPARATION}")
    if shape and args.init_from:
        parser.error(
            "--d-model, --layers and --heads shape a fresh run; --init-from keeps its run's"
        )
    try:
        weights = skill_weights(args.weight)
    except ValueError as error:
        parser.error(f"--weight: {error}")
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    if args.init_from:
        try:
            engine = start_from(args.init_from, args.grow_vocabulary, args.preparation, args.deepen)
        except (FileNotFoundError, ValueError) as error:
            parser.error(str(error))
    else:
        engine = build_engine(args.seed, **shape)
    if args.encoded and all(path.is_file() for path in args.encoded):
        parts = [EncodedData.load(path, engine) for path in args.encoded]
        data = EncodedData.concat(parts, engine.tokenizer.end_id)
    else:
        if args.encoded and len(args.encoded) > 1:
            parser.error("to encode the corpus, give --encoded one file")
        data = encoded_corpus(
            engine, args.examples, args.seed, args.workers, weights=weights,
            known_framing=args.known_framing,
        )  # fmt: skip
        if args.encoded:
            data.save(args.encoded[0], engine)
    print(f"{len(data.tokens):,} examples, a canvas of {data.reply_length} tokens")
    if args.encode_only:
        return 0
    config = TrainConfig(
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        warmup_steps=args.warmup_steps,
        seed=args.seed,
        out_dir=args.out,
        save_every=args.save_every,
        time_limit_s=args.minutes * 60 if args.minutes else None,
        checkpoint_dtype="float16",
        length_buckets=True,
        suffix_mask_share=args.suffix_mask_share,
        result_hidden_share=args.result_hidden_share,
        result_marker=RESULT_MARKER,
        hide_whole_answer=not args.hide_result_only,
        answer_weight=args.answer_weight,
        decay_over_time_limit=args.decay_over_minutes,
        origin=origin(args, weights),
    )
    result = train(engine, data, config)
    print(f"step {result.steps}/{args.steps}, {result.tokens / result.seconds:,.0f} tokens/s")
    print(f"ship it with: python -m quicksilver.models.reasoner_tiny.ship {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
