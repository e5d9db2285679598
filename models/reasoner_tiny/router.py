"""The router of a routed reasoner-tiny: which skill family's expert answers a question.

A small diffusion model whose spoken answer is a family's name ("arithmetic", "letters",
"spelling", "numbers", "calendar") or "default" (chat, refusals: the general
model), from one pass on a canvas of 12 tokens read as a choice among those names
(``NAMES``, a routed build's ``router_names``: see
``quicksilver.engine.routing.choose_names``). It reads prompts exactly as the shipped
model does (its tokenizer, chat template and prompt preparation), so a routed checkpoint
counts a prompt's tokens once for all its models (see ``quicksilver.engine.routing``).

Train it (resumable), measure it on the held-out questions, and assemble a routed
checkpoint from it and fine-tuned experts::

    python -m quicksilver.models.reasoner_tiny.router --out build/router --minutes 5
    python -m quicksilver.models.reasoner_tiny.router evaluate build/router \\
        --experts letters,numbers --route-above 0.5 0.8 0.9
    python -m quicksilver.models.reasoner_tiny.router assemble --router build/router \\
        --expert letters=build/letters --default models/reasoner_tiny --route-above 0.8 \\
        --out build/routed

A route the router is unsure of (below ``route_above``) goes to the default model, so the
threshold trades an expert's reach in its family against questions of other families
(chat, refusals) sent to an expert that never practised them.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import random
import shutil
import sys
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import torch
from quicksilver.audio.language_model import FILE_NAME as QUESTIONS_FILE
from quicksilver.engine import Answer, Engine, ModelConfig, SamplerConfig
from quicksilver.engine.checkpoints import CONFIG_FILE
from quicksilver.engine.routing import (
    DEFAULT,
    RoutedEngine,
    Routing,
    read_router,
    routed_name,
)
from quicksilver.engine.train import EncodedData, Example, TrainConfig, encode_examples, train

from .corpus import (
    OPERATION_WORDS,
    SKILLS,
    Item,
    held_out_set,
    is_held_out_phrasing,
    neutral_words,
    numbers_of,
    training_items,
    with_swapped_framing,
)
from .train import skill_weights, start_from

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
FAMILIES = {
    "arithmetic": ("addition", "subtraction", "multiplication", "division"),
    "letters": ("letter count", "first/last letter"),
    # the general model refuses half of training's own spelling phrasings ("what's the
    # spelling of X", "reverse the letters of X"), which came after it was trained
    "spelling": ("spelling", "backwards"),
    "numbers": ("comparison", "ordering", "conversion"),
    "calendar": ("calendar",),
}
FAMILY_OF = {skill: family for family, skills in FAMILIES.items() for skill in skills}
CANVAS = 12  # "<|answer|>arithmetic<|end|>": the longest name, spelled out, and its end
STEPS = 1  # router passes per answer
SHAPE = dict(d_model=128, n_layers=2, n_heads=4, prompt_sees_reply=False)
EVALUATION_SEEDS = (7, 1234)
NAMES = [*FAMILIES, DEFAULT]  # what the router answers: routing.json's router_names
SKIPPED_FILES = ("trainer_state.pt", "trainer_state.pt.tmp")  # not needed to answer
QUESTION_SETS = {  # the held-out sets routes are checked on: held_out_set's options
    "first turn": {},
    "follow-up": {"follow_up": True},
    "trained phrasings": {"trained_phrasings": True},
}


def family(skill: str) -> str:
    """The family whose expert answers a skill's questions; ``"default"`` for the rest."""
    if skill not in SKILLS:
        raise ValueError(f"no skill named {skill!r}; the skills are {list(SKILLS)}")
    return FAMILY_OF.get(skill, DEFAULT)


def build_router(like: str | Path = HERE, seed: int = 0, **shape) -> Engine:
    """A fresh router that reads prompts as the checkpoint ``like`` does: its tokenizer
    (vocabulary, chat template, prompt preparation) and room for every prompt it takes."""
    reference = Engine.load(like, device="cpu")
    context = reference.model.config.max_seq_len - reference.sampler.max_new_tokens + CANVAS
    config = ModelConfig(
        vocab_size=reference.model.config.vocab_size, max_seq_len=context, **(SHAPE | shape)
    )
    sampler = SamplerConfig(steps=STEPS, max_new_tokens=CANVAS)
    return Engine.random(
        config, seed=seed, device="auto", tokenizer=reference.tokenizer, sampler=sampler
    )


def router_from(run: str | Path) -> Engine:
    """A router that starts from another run's weights (the general model's, say), whose
    reading of the corpus's questions it refines into naming their family: it keeps that
    run's tokenizer and shape and takes the router's canvas and single pass."""
    engine = start_from(run)
    engine.sampler = SamplerConfig(steps=STEPS, max_new_tokens=CANVAS)
    engine.unsure_below = None
    return engine


def routing_examples(
    count: int,
    seed: int,
    drop_words: float = 0.0,
    known_framing: float = 0.0,
    weights: Mapping[str, float] | None = None,
) -> list[Example]:
    """The training corpus's questions (the same mix, augmentations and earlier
    exchanges), each answered with its family's name and no reasoning; ``weights``
    overrides some skills' shares of the mix (``SKILLS``); ``drop_words``:
    the share of questions that lose a word (:func:`with_dropped_words`);
    ``known_framing``: the share of conversion and calendar questions, after that, one
    of whose framing words becomes a word that asks for no skill (as
    :func:`~.corpus.training_items` does for the experts; a router that names
    conversions by their frames sent "change 54 meters into millimeters" to the general
    model)."""
    items = training_items(count, seed, weights=weights)
    items = with_dropped_words(items, random.Random(f"dropped words:{seed}"), drop_words)
    if known_framing:
        rng = random.Random(f"known framing:{seed}")
        items = with_swapped_framing(items, rng, known_framing, neutral_words())
    return [Example(item.messages(), family(item.skill)) for item in items]


def with_dropped_words(items: list[Item], rng: random.Random, share: float) -> list[Item]:
    """Drop one word from a ``share`` of the questions, so that the router learns every
    cue of a family rather than whole training phrasings, and routes phrasings it never
    saw. Never dropped: a word that names an arithmetic operation (without it the
    question is out of scope) or is part of a number. A drop that would make a held-out
    phrasing ("see you later" → the held-out "see you") keeps the question whole."""
    out = []
    for item in items:
        words = item.question.split(" ")
        if len(words) < 3 or rng.random() >= share:
            out.append(item)
            continue
        numbers = numbers_of(words)
        droppable = [
            i
            for i, word in enumerate(words)
            if word.lower().strip("?.") not in OPERATION_WORDS
            and numbers_of([*words[:i], *words[i + 1 :]]) == numbers
        ]
        gone = rng.choice(droppable or [-1])
        question = " ".join(w for i, w in enumerate(words) if i != gone)
        if question == item.question or is_held_out_phrasing(question):
            out.append(item)
            continue
        out.append(dataclasses.replace(item, question=question))
    return out


def encoded(engine: Engine, examples: Sequence[Example]) -> EncodedData:
    """The examples on the router's canvas; a prompt too long for it is left out."""
    prompts, replies = encode_examples(engine.tokenizer, examples)
    room = engine.model.config.max_seq_len - CANVAS
    fits = [i for i, prompt in enumerate(prompts) if len(prompt) <= room]
    log.info("%d of %d examples fit the context", len(fits), len(prompts))
    return EncodedData.from_ids(
        [prompts[i] for i in fits], [replies[i] for i in fits], CANVAS, engine
    )


def routes(
    router: Engine,
    seeds: Sequence[int] = EVALUATION_SEEDS,
    per_skill: int = 50,
    read_text: bool = False,
) -> list[tuple[str, Answer]]:
    """The router's answers to the held-out questions of ``seeds``, each asked as a first
    turn, as a follow-up and in training's phrasings (where "hello" and "what day is it"
    are: a router that sends them astray fails the most common questions), with the
    family each question belongs to. The router is read as a routed build reads it: a
    choice among ``NAMES``, or (``read_text``) its denoised answer as text."""
    out = []
    for seed in seeds:
        for options in QUESTION_SETS.values():
            for skill, items in held_out_set(per_skill, seed, **options).items():
                conversations = [item.messages() for item in items]
                answers = read_router(router, conversations, None if read_text else NAMES, STEPS)
                out += [(family(skill), answer) for answer in answers]
    return out


def tally(
    routed: Sequence[tuple[str, Answer]],
    experts: Collection[str] = tuple(FAMILIES),
    route_above: float | None = None,
) -> dict[str, Counter[str]]:
    """For each family, how many of its questions go to each model, read as a routed
    checkpoint with ``experts`` and ``route_above`` reads its router (``routed_name``)."""
    counts: dict[str, Counter[str]] = {name: Counter() for name in [*FAMILIES, DEFAULT]}
    for wanted, answer in routed:
        counts[wanted][routed_name(answer, experts, route_above)] += 1
    return counts


def report(routes: dict[str, Counter[str]], experts: Collection[str] = tuple(FAMILIES)) -> str:
    """Per family: right, asked, accuracy, and where the misses went (a miss to the
    default model costs nothing against the general model; one to another expert does).
    A family without an expert is right when its questions go to the default model."""
    lines = [f"{'family':<12} {'right':>7} {'asked':>6}  accuracy  misses went to"]
    goes_to = {name: name if name in experts else DEFAULT for name in routes}
    for name, sent in routes.items():
        right, asked = sent[goes_to[name]], sum(sent.values())
        misses = ", ".join(
            f"{other} {n}" for other, n in sent.most_common() if other != goes_to[name]
        )
        lines.append(f"{name:<12} {right:>7} {asked:>6}  {right / asked:>8.1%}  {misses}")
    right = sum(sent[goes_to[name]] for name, sent in routes.items())
    asked = sum(sum(sent.values()) for sent in routes.values())
    wrong_expert = sum(
        n for name, sent in routes.items() for other, n in sent.items()
        if other not in (goes_to[name], DEFAULT)
    )  # fmt: skip
    lines.append(f"{'all':<12} {right:>7} {asked:>6}  {right / asked:>8.1%}")
    lines.append(f"sent to the wrong expert: {wrong_expert} ({wrong_expert / asked:.1%})")
    return "\n".join(lines)


def assemble(
    router: Path,
    experts: dict[str, Path],
    default: Path,
    out: Path,
    router_steps: int = STEPS,
    unsure_below: float | None = None,
    route_above: float | None = None,
    link_default: bool = False,
    read_text: bool = False,
) -> Path:
    """Copy the router, the experts and the default model into ``out`` (their resumable
    training state left behind) and write its ``routing.json``; the default model's
    model of what users ask (``questions.lm.json``) goes to the top, where the assistant
    looks. ``link_default``: name the default model by its path relative to ``out``
    instead of copying it (a routed build kept inside that model's folder, which ``ship``
    then leaves to its own ship).
    The router is read as a choice among ``NAMES`` (``router_names``), or with
    ``read_text`` its answer denoised in ``router_steps`` passes as text. The result is
    checked by loading it."""
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty; pass a new folder to --out")
    parts = {"router": router, **{f"experts/{n}": p for n, p in experts.items()}}
    if not link_default:
        parts["default"] = default
    for name, source in parts.items():
        if not (source / CONFIG_FILE).is_file():
            raise FileNotFoundError(f"{source} is no checkpoint folder (no config.json)")
        _copy_checkpoint(source, out / name)
    questions = default / QUESTIONS_FILE
    if questions.is_file():
        shutil.copy2(questions, out / questions.name)
    routing = Routing(
        router="router",
        experts={name: f"experts/{name}" for name in experts},
        default=os.path.relpath(default, out) if link_default else "default",
        router_steps=router_steps,
        route_above=route_above,
        unsure_below=unsure_below,
        router_names=None if read_text else NAMES,
    )
    routing.write(out)
    RoutedEngine.load(out, device="cpu")  # the models must fit together
    return out


def _copy_checkpoint(source: Path, target: Path) -> None:
    """The files a model answers with: not its training state, and not what shares its
    folder (the shipped general model's folder is a package with a routed build inside)."""
    target.mkdir(parents=True)
    for file in source.iterdir():
        if file.is_file() and file.name not in SKIPPED_FILES and file.suffix != ".py":
            shutil.copy2(file, target / file.name)


def _expert_pairs(pairs: Sequence[str]) -> dict[str, Path]:
    experts = {}
    for pair in pairs:
        name, _, path = pair.partition("=")
        if not path or name not in FAMILIES:
            raise ValueError(
                f"an expert is FAMILY=FOLDER with FAMILY one of {list(FAMILIES)}, not {pair!r}"
            )
        experts[name] = Path(path)
    return experts


def main_assemble(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="router assemble", description="Assemble a routed checkpoint folder."
    )
    parser.add_argument("--router", type=Path, required=True)
    parser.add_argument("--expert", action="append", default=[], metavar="FAMILY=FOLDER")
    parser.add_argument("--default", type=Path, default=HERE, help="the general model")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--router-steps", type=int, default=STEPS)
    parser.add_argument(
        "--read-text", action="store_true",
        help="read the router's denoised answer as text (routed format 2) instead of as a "
        "choice among the names it answers",
    )  # fmt: skip
    parser.add_argument(
        "--route-above", type=float, help="the router's confidence an expert needs (evaluate)"
    )
    parser.add_argument(
        "--link-default", action="store_true",
        help="name the default model by its path relative to --out rather than copying it",
    )  # fmt: skip
    parser.add_argument(
        "--unsure-below", type=float, help="the routed system's threshold, measured on it"
    )
    args = parser.parse_args(argv)
    try:
        experts = _expert_pairs(args.expert)
    except ValueError as error:
        parser.error(str(error))
    assemble(
        args.router, experts, args.default, args.out, args.router_steps, args.unsure_below,
        args.route_above, args.link_default, args.read_text,
    )  # fmt: skip
    print(f"{args.out}: routed checkpoint; load it with Engine.load({str(args.out)!r})")
    return 0


def main_evaluate(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="router evaluate", description="Measure a router.")
    parser.add_argument("run", type=Path)
    parser.add_argument("--per-skill", type=int, default=50)
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=list(EVALUATION_SEEDS), help="held-out draws"
    )
    parser.add_argument(
        "--experts", default=",".join(FAMILIES), help="the families that will have an expert"
    )
    parser.add_argument(
        "--route-above", type=float, nargs="*", default=[], metavar="P",
        help="also read the router as a routed checkpoint with each of these route_above",
    )  # fmt: skip
    parser.add_argument("--read-text", action="store_true", help="read its denoised answer as text")
    args = parser.parse_args(argv)
    experts = [name for name in args.experts.split(",") if name]
    unknown = set(experts) - set(FAMILIES)
    if unknown:
        parser.error(f"no families {sorted(unknown)}; the families are {list(FAMILIES)}")
    router = Engine.load(args.run, device="auto")
    answers = routes(router, args.seeds, args.per_skill, args.read_text)
    for route_above in [None, *args.route_above]:
        print(f"\nexperts {', '.join(experts) or 'none'}; route_above {route_above}")
        print(report(tally(answers, experts, route_above), experts))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["assemble"]:
        return main_assemble(argv[1:])
    if argv[:1] == ["evaluate"]:
        return main_evaluate(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="build/router", help="run folder (resumable)")
    parser.add_argument("--like", type=Path, default=HERE, help="whose tokenizer to read with")
    parser.add_argument(
        "--init-from", type=Path, help="start from this run's weights (e.g. models/reasoner_tiny)"
    )
    parser.add_argument("--warmup-steps", type=int, default=100)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--examples", type=int, default=60_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--minutes", type=float, help="stop (and save) after this long")
    parser.add_argument("--per-skill", type=int, default=50, help="held-out questions per skill")
    parser.add_argument(
        "--drop-words", type=float, default=0.0, help="share of questions that lose a word"
    )
    parser.add_argument(
        "--known-framing", type=float, default=0.0,
        help="share of conversion and calendar questions with a framing word swapped",
    )  # fmt: skip
    parser.add_argument(
        "--weight", action="append", default=[], metavar="SKILL=SHARE",
        help="a skill's share of the mix in place of its corpus weight (repeatable)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    engine = router_from(args.init_from) if args.init_from else build_router(args.like, args.seed)
    weights = skill_weights(args.weight)
    examples = routing_examples(
        args.examples, args.seed, args.drop_words, args.known_framing, weights
    )
    data = encoded(engine, examples)
    config = TrainConfig(
        steps=args.steps,
        batch_size=args.batch_size,
        lr=args.lr,
        warmup_steps=args.warmup_steps,
        seed=args.seed,
        out_dir=args.out,
        save_every=250,
        time_limit_s=args.minutes * 60 if args.minutes else None,
        checkpoint_dtype="float16",
        length_buckets=True,
        origin={
            "examples": args.examples,
            "skill_weights": weights,
            "drop_words": args.drop_words,
            "known_framing": args.known_framing,
            **({"init_from": str(args.init_from)} if args.init_from else {}),
        },
    )
    result = train(engine, data, config)
    print(f"step {result.steps}/{args.steps}")
    router = Engine.load(args.out, device="auto", dtype=torch.float32)
    print(report(tally(routes(router, per_skill=args.per_skill))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
