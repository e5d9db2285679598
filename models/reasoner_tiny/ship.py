"""Ship a trained reasoner-tiny:
``python -m quicksilver.models.reasoner_tiny.ship build/reasoner-tiny``.

Picks the sampler settings on a validation draw of the held-out side, and the confidence
under which the assistant says it is unsure on the validation draws (``confidence``),
measures the chosen settings on the reported held-out sets at 8, 16 and 32 steps, writes
``MODEL_CARD.md`` with those figures, and copies the checkpoint (fp16 weights) into
this folder, where ``Engine.load("bundled")`` finds it. Selection and report use
different held-out items, so the card's figures are not tuned on themselves.

A routed build (a folder with ``routing.json``, as ``router assemble`` writes it) is
shipped as one. The plain path could not ship it (it has no weights of its own), so the
folder decides rather than a flag; ``--routed`` only insists on it (an error for a plain
folder)::

    python -m quicksilver.models.reasoner_tiny.ship models/reasoner_tiny/routed --routed

It is measured whole, through its router: the same held-out sets, step budgets and
reading-order score as a plain build (reading order on the model the router picks for
each question), the router's passes counted on its answers, and which model answered
each skill's questions. Its weights are already assembled and stay as they are; it is
shipped where it lies (``--to`` elsewhere writes the card there and changes nothing in
the build). Each expert's sampler is chosen as a plain build's is, on the validation
draws of its own family's skills, and written to the expert's ``config.json`` (only that
section), where the engine reads it: an expert is another model than the default whose
sampler it inherited. Then its ``unsure_below`` is chosen on the validation draws as a
plain build's is and written to its ``routing.json``. A default model the build names by
a path out of it (``..``: the plain reasoner's folder, ``router assemble
--link-default``) is another build, whose own ship chose its sampler: a routed ship
leaves its files as they are. A default of the build's own (``assemble`` copied it in)
is a member like the experts: its sampler is chosen on the skills no expert of the
build covers (:func:`default_skills`) and written to its ``config.json``. The card names
the sampler each member runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from pathlib import Path

import torch
from quicksilver.engine import Answer, Engine, RoutedEngine, SamplerConfig
from quicksilver.engine.api import ROUTING_FILE
from quicksilver.engine.checkpoints import update_config
from quicksilver.engine.machine import describe_cpu
from quicksilver.engine.routing import DEFAULT, Routing
from quicksilver.models import BUNDLED, SHIPPED

from .confidence import (
    VALIDATION_PER_SKILL,
    card_section,
    choose_threshold,
    validation_judged,
    write_threshold,
)
from .corpus import SKILLS, Item, held_out_set
from .evaluate import (
    TARGET,
    VALIDATION_SEED,
    VALIDATION_SEEDS,
    Evaluation,
    SideBySide,
    evaluate,
    left_to_right,
    side_by_side,
)
from .router import FAMILIES, QUESTION_SETS, family

HERE = Path(__file__).parent
CARD = "MODEL_CARD.md"
TEMPLATE = HERE / "MODEL_CARD.template.md"
ROUTED_TEMPLATE = HERE / "MODEL_CARD.routed.template.md"
# The plain card's section that a routed card shares, from its heading to its placeholder
ACCURACY_SECTION = ("## Accuracy on the held-out sets", "{unsure}")
STEP_BUDGETS = (8, 16, 32)  # the card's columns, then 16 steps as a follow-up and in
# training's phrasings
CLEARLY_FASTER = 0.05  # a p50 this much lower beats a member's own sampler (best_candidate)
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


def sampler_name(sampler: SamplerConfig) -> str:
    """The candidate a sampler is (whatever its step budget), or, for one that is none of
    them, its settings that differ from the defaults."""
    own = dataclasses.asdict(sampler)
    for name, options in CANDIDATES.items():
        if (
            dataclasses.asdict(candidate_sampler(sampler, options)) | {"steps": sampler.steps}
            == own
        ):
            return name
    defaults = SamplerConfig()
    settings = [
        f"{field.name} {getattr(sampler, field.name)}"
        for field in dataclasses.fields(sampler)
        if field.name not in ("steps", "max_new_tokens")
        and getattr(sampler, field.name) != getattr(defaults, field.name)
    ]
    return "own settings: " + (", ".join(settings) or "the defaults")


def validation_items(
    per_skill: int,
    skills: Collection[str] | None = None,
    seeds: Collection[int] = (VALIDATION_SEED,),
) -> list[Item]:
    """The held-out validation draws a sampler is chosen on: ``per_skill`` items of each
    of ``skills`` (every skill by default) per draw, one draw per seed."""
    return [
        item
        for seed in seeds
        for questions in held_out_set(per_skill, seed, skills).values()
        for item in questions
    ]


def race(
    engine: Engine, samplers: dict[str, SamplerConfig], items: Sequence[Item]
) -> dict[str, SideBySide]:
    """Each of ``samplers`` answers every item at 16 steps, side by side
    (:func:`side_by_side`), not one after another. Leaves ``engine.sampler`` as it found
    it."""
    run_sampler = engine.sampler

    def answering_with(sampler: SamplerConfig) -> Callable[[Item], Answer]:
        def answer(item: Item) -> Answer:
            engine.sampler = sampler
            return engine.answer(item.messages(), steps=16)

        return answer

    try:
        return side_by_side({n: answering_with(s) for n, s in samplers.items()}, items)
    finally:
        engine.sampler = run_sampler


def choose_sampler(
    engine: Engine,
    per_skill: int,
    skills: Collection[str] | None = None,
    seeds: Collection[int] = (VALIDATION_SEED,),
) -> tuple[str, SamplerConfig, dict[str, float]]:
    """The candidate :func:`best_candidate` picks at 16 steps on the validation draws
    (:func:`validation_items`), the engine's own sampler kept when it is one of them and
    no other is clearly better or clearly faster. Leaves ``engine.sampler`` as it found
    it."""
    samplers = {name: candidate_sampler(engine.sampler, o) for name, o in CANDIDATES.items()}
    items = validation_items(per_skill, skills, seeds)
    tallies = race(engine, samplers, items)
    means = {name: tally.right / len(items) for name, tally in tallies.items()}
    p50s = {name: tally.p50_ms for name, tally in tallies.items()}
    best = best_candidate(means, p50s, len(items), keep=sampler_name(engine.sampler))
    return best, samplers[best], means


def own_default(folder: Path, routing: Routing) -> bool:
    """Whether the default model lies inside the build ``folder``, its own member, rather
    than being another build it names by a path out of it (``..``, an absolute path or a
    link elsewhere), whose own ship chose its sampler."""
    return (folder / routing.default).resolve().is_relative_to(folder.resolve())


def default_skills(experts: Collection[str]) -> tuple[str, ...]:
    """The skills a build with ``experts`` (family names) leaves to its default model:
    chat and refusals always, and the skills of every family with no expert there."""
    return tuple(skill for skill in SKILLS if family(skill) not in experts)


def sampled_members(
    engine: RoutedEngine, with_default: bool
) -> dict[str, tuple[Engine, tuple[str, ...]]]:
    """The members whose sampler a routed ship chooses, each with the skills it is chosen
    on: every expert named for a family (one named for none answers no skill the draws
    ask) on its family's, and with ``with_default`` the default model on
    :func:`default_skills`."""
    members = {
        name: (expert, FAMILIES[name])
        for name, expert in engine.experts.items()
        if name in FAMILIES
    }
    if with_default:
        members[DEFAULT] = (engine.default, default_skills(engine.experts))
    return members


def choose_member_samplers(
    engine: RoutedEngine, per_skill: int, with_default: bool
) -> dict[str, str]:
    """Set each of :func:`sampled_members` to the sampler :func:`choose_sampler` picks on
    its skills, both validation draws; the chosen candidate's name per member ("default"
    for the default model).

    An expert inherits the default model's sampler when it is trained, chosen for another
    model on every skill; its own can differ (the spelling expert spelled 4 points better
    without the default's position decay)."""
    chosen = {}
    for name, (member, skills) in sampled_members(engine, with_default).items():
        chosen[name], member.sampler, _ = choose_sampler(
            member, per_skill, skills, VALIDATION_SEEDS
        )
    return chosen


def best_candidate(
    means: dict[str, float], p50s: dict[str, float], answers: int, keep: str | None = None
) -> str:
    """Of the candidates whose mean is at most one answer (of ``answers``, spread evenly
    over the skills) below the best, the fastest: a gap that small is one coin flip on
    the validation items, while latency is a target of its own.

    ``keep`` (the sampler a member runs now; a name no candidate has is never among them)
    stays chosen while it is among them and none is faster by more than
    :data:`CLEARLY_FASTER`: identical samplers' p50s land that far apart side by side,
    and a re-ship of an unchanged member should not flip its sampler on that noise (the
    calendar expert once lost position decay so, and 8 points)."""
    slack = 1 / answers + 1e-9
    best = max(means.values())
    tied = [name for name in means if means[name] >= best - slack]
    fastest = min(tied, key=p50s.__getitem__)
    if keep in tied and p50s[fastest] >= p50s[keep] * (1 - CLEARLY_FASTER):
        return keep
    return fastest


def choose_unsure(engine: Engine | RoutedEngine, per_skill: int) -> list[tuple[float, bool]]:
    """Set ``engine.unsure_below`` as chosen on the validation draws; their (confidence,
    right) pairs, which the card's section reports."""
    judged = validation_judged(engine, per_skill)
    engine.unsure_below = choose_threshold(judged)
    return judged


def measure(
    engine: Engine | RoutedEngine, per_skill: int, in_order_per_skill: int
) -> tuple[list[Evaluation], dict[str, float]]:
    """The card's figures: the held-out sets at every step budget, at 16 steps as a
    follow-up and in training's phrasings, and the reading-order share per skill."""
    results = [evaluate(engine, per_skill, steps=steps) for steps in STEP_BUDGETS]
    results.append(evaluate(engine, per_skill, steps=16, follow_up=True))
    results.append(evaluate(engine, per_skill, steps=16, trained_phrasings=True))
    return results, left_to_right(engine, in_order_per_skill)


def accuracy_table(
    results: list[Evaluation], in_order: dict[str, float], passes: dict[int, int] | None = None
) -> str:
    """Sampled accuracy per step budget, then the reading-order share (``left_to_right``);
    ``passes``: forward passes per answer at each step budget, a row of its own (a routed
    build's, its router's included)."""
    header = "| skill | " + " | ".join(r.label for r in results) + " | in reading order |"
    lines = [header, "|---|" + "---:|" * (len(results) + 1)]
    for i, score in enumerate(results[0].scores):
        cells = " | ".join(f"{r.scores[i].accuracy:.0%}" for r in results)
        lines.append(f"| {score.skill} | {cells} | {in_order[score.skill]:.0%} |")
    means = " | ".join(f"{r.mean:.0%}" for r in results)
    lines.append(f"| **mean** | {means} | {sum(in_order.values()) / len(in_order):.0%} |")
    latency = " | ".join(f"{r.p50_ms:.0f} / {r.p90_ms:.0f}" for r in results)
    lines.append(f"| latency p50 / p90 (ms) | {latency} | |")
    if passes is not None:
        counts = " | ".join(str(passes[r.steps]) for r in results)
        lines.append(f"| forward passes per answer | {counts} | |")
    return "\n".join(lines)


def misses(result: Evaluation) -> str:
    rows = [
        f"- {score.skill}: “{question}” → “{got}” (wanted “{wanted}”)"
        for score in result.scores
        for question, wanted, got in score.misses[:1]
    ]
    return "\n".join(rows)


def accuracy_fields(
    results: list[Evaluation],
    in_order: tuple[dict[str, float], int],
    per_skill: int,
    unsure: str,
    passes: dict[int, int] | None = None,
) -> dict[str, object]:
    """What a card's accuracy section and the unsure section after it are filled with,
    plain or routed. ``in_order``: the shares and the questions per skill they are of;
    ``unsure``: the section :func:`~.confidence.card_section` wrote."""
    at_16 = next(
        r for r in results if r.steps == 16 and not r.follow_up and not r.trained_phrasings
    )
    return {
        "per_skill": per_skill,
        "in_order_per_skill": in_order[1],
        "table": accuracy_table(results, in_order[0], passes),
        "misses": misses(at_16),
        "below_target": ", ".join(s.skill for s in at_16.scores if s.accuracy < TARGET) or "none",
        "unsure": unsure,
        "machine": describe_cpu(),  # the ship measures on the CPU
    }


def blend_clause(blend: dict) -> str:
    """How a blended run (``models.reasoner_tiny.blend``) was mixed."""
    return (
        f"blended with the run it started from: {1 - blend['share']:.0%} of"
        f" `{blend['base']}`'s weights and {blend['share']:.0%} of `{blend['tuned']}`'s"
    )


def blend_sentence(blend: dict | None) -> str:
    """The card's account of a blended run, if it is one."""
    return f" Then {blend_clause(blend)}." if blend else ""


def weights_mb(folder: Path) -> str:
    weights = folder / "model.safetensors"
    return f"{weights.stat().st_size / 2**20:.1f}" if weights.exists() else "?"


def write_card(
    folder: Path,
    engine: Engine,
    training: dict,
    sampler_choice: tuple[str, dict[str, float]],
    accuracy: dict[str, object],
) -> Path:
    """``accuracy``: the figures :func:`accuracy_fields` gives."""
    config = engine.model.config
    chosen, validation = sampler_choice
    tried = ", ".join(f"{name} {mean:.1%}" for name, mean in validation.items())
    card = TEMPLATE.read_text(encoding="utf-8").format(
        role=role_sentence(shipped_name(folder)),
        parameters=f"{config.parameter_count() / 1e6:.1f}M",
        layers=config.n_layers,
        d_model=config.d_model,
        heads=config.n_heads,
        vocab=config.vocab_size,
        canvas=engine.sampler.max_new_tokens,
        size_mb=weights_mb(folder),
        steps_trained=training.get("step", "?"),
        batch_size=training.get("batch_size", "?"),
        lr=training.get("lr", "?"),
        seed=training.get("seed", "?"),
        hardware=training.get("hardware", "CPU"),
        suffix_share=f"{training.get('suffix_mask_share', 0):.0%}",
        blend=blend_sentence(training.get("blend")),
        sampler=chosen,
        tried=tried,
        **accuracy,
    )
    path = folder / CARD
    path.write_text(card, encoding="utf-8")
    return path


# ---------------------------------------------------------------------- a routed build


def routes(engine: RoutedEngine, per_skill: int, seed: int = 1234) -> dict[str, dict[str, Counter]]:
    """For each of :data:`QUESTION_SETS`, per skill, how many of the held-out questions
    (``evaluate``'s, same seed) each model answers: the router asked one question at a
    time, as ``evaluate`` asks it."""
    return {
        label: {
            skill: Counter(engine.route(item.messages()) for item in items)
            for skill, items in held_out_set(per_skill, seed, **options).items()
        }
        for label, options in QUESTION_SETS.items()
    }


def routes_table(routed: dict[str, dict[str, Counter]]) -> str:
    """Markdown: per skill and question set, the models that answered and their shares."""

    def cell(counts: Counter) -> str:
        total = sum(counts.values())
        if len(counts) == 1:
            return next(iter(counts))
        return ", ".join(f"{name} {n / total:.0%}" for name, n in counts.most_common())

    labels = list(routed)
    lines = ["| skill | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    for skill in routed[labels[0]]:
        cells = " | ".join(cell(routed[label][skill]) for label in labels)
        lines.append(f"| {skill} | {cells} |")
    every = [sum(routed[label].values(), Counter()) for label in labels]
    lines.append("| **all** | " + " | ".join(cell(counts) for counts in every) + " |")
    return "\n".join(lines)


def counted_passes(engine: RoutedEngine) -> tuple[int, dict[int, int]]:
    """The router's passes per answer and the forward passes per answer at each step
    budget, the router's included, as the answers count them (``Answer.router_passes``
    and ``forward_passes``), on a held-out question."""
    item = next(iter(held_out_set(1).values()))[0]
    answers = {steps: engine.answer(item.messages(), steps=steps) for steps in STEP_BUDGETS}
    router_passes = {answer.router_passes for answer in answers.values()}
    if len(router_passes) != 1:
        raise RuntimeError(f"the router ran {sorted(router_passes)} passes; expected one count")
    return router_passes.pop(), {steps: a.forward_passes for steps, a in answers.items()}


def pass_count(count: int) -> str:
    return f"{count} pass" if count == 1 else f"{count} passes"


def shipped_name(folder: Path) -> str:
    """A folder's name in the registry (``models.SHIPPED``), else its own name."""
    for name, path in SHIPPED.items():
        if path.resolve() == folder.resolve():
            return name
    return folder.resolve().name


def role_sentence(name: str) -> str:
    """Whether a build is Quicksilver's default (the one ``bundled`` names), for its card."""
    if name == BUNDLED:
        return (
            "It is Quicksilver's default: `quicksilver ask`, the assistant and "
            '`Engine.load("bundled")` answer with it.'
        )
    return f"`quicksilver ask --model {name}` answers with it; the default is {BUNDLED}."


def shape(engine: Engine) -> str:
    config = engine.model.config
    return (
        f"{config.parameter_count() / 1e6:.1f}M parameters ({config.n_layers} layers × "
        f"d{config.d_model}, {config.n_heads} heads)"
    )


def trained(folder: Path) -> str:
    """A member's last run, as its ``training.json`` records it."""
    path = folder / "training.json"
    if not path.is_file():
        return "no training record"
    run = json.loads(path.read_text())
    return (
        f"its last run {run.get('step', '?')} steps of batch {run.get('batch_size', '?')}, "
        f"peak learning rate {run.get('lr', '?')}, seed {run.get('seed', '?')}, on "
        f"{run.get('hardware', 'CPU')}"
        + (
            f", {run['result_hidden_share']:.0%} of its rows "
            + (
                "hidden from the result on"
                if run.get("hide_whole_answer", True)
                else "with the result hidden wherever it is written"
            )
            if run.get("result_hidden_share")
            else ""
        )
        + (
            f", the answer's tokens weighted {run['answer_weight']:g}x"
            if run.get("answer_weight", 1.0) != 1.0
            else ""
        )
        + continued_clause(run.get("origin") or {})
        + (f", then {blend_clause(run['blend'])}" if run.get("blend") else "")
    )


def continued_clause(origin: dict) -> str:
    """What a run continued, as its ``training.json`` records it (runs before the record
    existed say nothing)."""
    if "init_from" not in origin:
        return ""
    deepened = origin.get("deepened_by")
    layers = f" with {deepened} layer{'s' if deepened != 1 else ''} added" if deepened else ""
    return f", continuing `{origin['init_from']}`{layers}"


def sampler_sentence(engine: RoutedEngine, per_skill: int, linked_default: str | None) -> str:
    """The sampler the answering models run, and how each was chosen: the default's by
    this ship too, unless it is ``linked_default``, another build (its name)."""
    default = sampler_name(engine.default.sampler)
    if any(expert.sampler != engine.sampler for expert in engine.experts.values()):
        runs = f"each model its own: the default {default}; " + "; ".join(
            f"{name} {sampler_name(expert.sampler)}" for name, expert in engine.experts.items()
        )
    else:
        runs = f"{default}, which the experts run as well"
    default_chosen = (
        f"the default's is {linked_default}'s, chosen by its own ship, which a routed ship "
        f"leaves as it is"
        if linked_default
        else "the default's on the skills no expert covers "
        f"({', '.join(default_skills(engine.experts))})"
    )
    return (
        f"{runs}; {engine.sampler.steps} steps. The engine reads each model's own from its "
        f"`config.json`. Each expert's is chosen by this ship on the validation draws of its "
        f"own skills ({per_skill} questions a skill per draw, the fastest within one answer "
        f"of the best); {default_chosen}"
    )


def read_as(routing: Routing) -> str:
    """How the routed build reads its router's pass, for the card."""
    if routing.router_names is None:
        return ", read as text"
    return f", read as a choice among {', '.join(routing.router_names)}"


def parts_table(
    folder: Path,
    target: Path,
    routing: Routing,
    engine: RoutedEngine,
    router_passes: int,
    sampler_per_skill: int,
) -> str:
    """The card's rows on the routed build's parts and settings (what ``routing.json``
    says, each member's shape and last run)."""
    default_folder = folder / routing.default
    linked_default = None if own_default(folder, routing) else shipped_name(default_folder)
    if linked_default is None:
        default = (
            f"its own general model, for every other question and any whose expert the "
            f"router names with a confidence under `route_above`: {shape(engine.default)}, "
            f"`model.safetensors` {weights_mb(default_folder)} MB; {trained(default_folder)}"
        )
    else:
        card = os.path.relpath(default_folder / CARD, target)
        default = (
            f"{linked_default} ([its card]({card})): every other question, and any whose "
            f"expert the router names with a confidence under `route_above`"
        )
    router = engine.router
    rows = [
        f"| `{routing.router}/` | the router: {shape(router)}, `model.safetensors` "
        f"{weights_mb(folder / routing.router)} MB; names the family whose expert answers, "
        f"in {pass_count(router_passes)} on a {router.sampler.max_new_tokens}-token "
        f"canvas{read_as(routing)}; {trained(folder / routing.router)} |"
    ]
    for name, path in routing.experts.items():
        skills = ", ".join(FAMILIES.get(name, ())) or "its family"
        rows.append(
            f"| `{path}/` | the {name} expert ({skills}): {shape(engine.experts[name])}, "
            f"`model.safetensors` {weights_mb(folder / path)} MB; {trained(folder / path)} |"
        )
    rows += [
        f"| `{routing.default}` (default) | {default} |",
        f"| `route_above` | {routing.route_above}: the router's confidence an expert needs "
        f"(`{ROUTING_FILE}`) |",
        f"| `unsure_below` | {engine.unsure_below:.3f}: the routed system's own, chosen on the "
        f"validation draws as below (`{ROUTING_FILE}`) |",
        f"| sampler | {sampler_sentence(engine, sampler_per_skill, linked_default)} |",
    ]
    return "\n".join(rows)


def write_routed_card(
    folder: Path,
    target: Path,
    engine: RoutedEngine,
    routed: dict[str, dict[str, Counter]],
    router_passes: int,
    accuracy: dict[str, object],
    sampler_per_skill: int,
) -> Path:
    """The routed build's card: its own parts and routes, then the plain card's accuracy
    section (:data:`ACCURACY_SECTION`, from the plain template) and unsure section,
    filled alike."""
    routing = Routing.read(folder)
    own = own_default(folder, routing)
    plain = TEMPLATE.read_text(encoding="utf-8")
    start = plain.index(ACCURACY_SECTION[0])
    section = plain[start : plain.index(ACCURACY_SECTION[1], start)]
    name = shipped_name(folder)
    card = ROUTED_TEMPLATE.read_text(encoding="utf-8").format(
        name=name,
        role=role_sentence(name),
        default_name=(
            "A general model of its own" if own else shipped_name(folder / routing.default)
        ),
        default_limits=(
            'its figures are those of the questions it answers (see "Routing").'
            if own
            else "see its card."
        ),
        experts=", ".join(f"{n} ({', '.join(FAMILIES.get(n, ()))})" for n in engine.experts)
        or "none",
        parts=parts_table(folder, target, routing, engine, router_passes, sampler_per_skill),
        router_passes=pass_count(router_passes),
        per_skill=accuracy["per_skill"],
        routes=routes_table(routed),
        accuracy=section.format(**accuracy),
        unsure=accuracy["unsure"],
    )
    path = target / CARD
    path.write_text(card, encoding="utf-8")
    return path


def ship_routed(args: argparse.Namespace) -> int:
    folder = Path(args.run)
    target = Path(args.to) if args.to else folder
    engine = Engine.load(folder, device="cpu")
    routing = Routing.read(folder)
    samplers = choose_member_samplers(
        engine, args.validation_per_skill, own_default(folder, routing)
    )
    judged = choose_unsure(engine, args.unsure_per_skill)
    results, in_order = measure(engine, args.per_skill, args.in_order_per_skill)
    router_passes, per_answer = counted_passes(engine)
    routed = routes(engine, args.per_skill)
    unsure = card_section(
        engine.unsure_below, judged, results[1], args.unsure_per_skill,
        stored_in=("unsure_below", ROUTING_FILE),
    )  # fmt: skip
    accuracy = accuracy_fields(
        results, (in_order, args.in_order_per_skill), args.per_skill, unsure, per_answer
    )
    in_place = target.resolve() == folder.resolve()
    if in_place:  # the engine reads them from there
        write_threshold(folder, engine.unsure_below)
        members = {n: (p, engine.experts[n]) for n, p in routing.experts.items()}
        members[DEFAULT] = (routing.default, engine.default)
        for name, (path, member) in members.items():
            if name in samplers:
                update_config(folder / path, "sampler", dataclasses.asdict(member.sampler))
    target.mkdir(parents=True, exist_ok=True)
    card = write_routed_card(
        folder, target, engine, routed, router_passes, accuracy, args.validation_per_skill
    )
    print(accuracy["table"])
    print(routes_table(routed))
    where = "written" if in_place else "not written (--to elsewhere)"
    print(f"members' samplers {where}: {samplers}")
    print(f"unsure_below {engine.unsure_below} {where} ({ROUTING_FILE}); card: {card}")
    return 0


def ship_plain(args: argparse.Namespace) -> int:
    engine = Engine.load(args.run, device="cpu")
    chosen, engine.sampler, validation = choose_sampler(engine, args.validation_per_skill)
    judged = choose_unsure(engine, args.unsure_per_skill)
    results, in_order = measure(engine, args.per_skill, args.in_order_per_skill)
    target = Path(args.to) if args.to else HERE
    engine.save(target, dtype=torch.float16)
    training = json.loads((Path(args.run) / "training.json").read_text())
    unsure = card_section(engine.unsure_below, judged, results[1], args.unsure_per_skill)
    accuracy = accuracy_fields(results, (in_order, args.in_order_per_skill), args.per_skill, unsure)
    card = write_card(target, engine, training, (chosen, validation), accuracy)
    print(accuracy["table"])
    print(f"sampler: {chosen} (validation means: {validation}); card: {card}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "run", help="training run folder (config.json, model.safetensors, ...) or routed build"
    )
    parser.add_argument(
        "--routed",
        action="store_true",
        help=f"the run is a routed build (read from its {ROUTING_FILE} anyway; this insists)",
    )
    parser.add_argument("--per-skill", type=int, default=50, help="reported items per skill")
    parser.add_argument(
        "--validation-per-skill",
        type=int,
        default=12,
        help="validation items per skill (and draw) for the samplers: a plain build's, on "
        "one draw, or a routed build's experts', on both",
    )
    parser.add_argument(
        "--unsure-per-skill",
        type=int,
        default=VALIDATION_PER_SKILL,
        help="validation items per skill per draw for the unsure threshold",
    )
    parser.add_argument(
        "--in-order-per-skill", type=int, default=20, help="items per skill, reading order"
    )
    parser.add_argument(
        "--to",
        help="where to ship (default: this folder; a routed build: where it lies)",
    )
    args = parser.parse_args(argv)
    routed = (Path(args.run) / ROUTING_FILE).is_file()
    if args.routed and not routed:
        parser.error(f"{args.run} has no {ROUTING_FILE}: it is no routed build")
    return ship_routed(args) if routed else ship_plain(args)


if __name__ == "__main__":
    raise SystemExit(main())
