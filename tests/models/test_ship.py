"""Shipping a trained run: the sampler is chosen, the card is written from measured figures."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import safetensors.torch
import torch
from quicksilver.engine import Engine, RoutedEngine, SamplerConfig
from quicksilver.engine.machine import describe_cpu
from quicksilver.models.reasoner_tiny import router, ship
from quicksilver.models.reasoner_tiny.corpus import SKILLS
from quicksilver.models.reasoner_tiny.evaluate import evaluate
from quicksilver.models.reasoner_tiny.train import build_engine

SHIPPED = Path(ship.__file__).parent
SMALL = ["--per-skill", "1", "--validation-per-skill", "1"]
SMALL += ["--in-order-per-skill", "1", "--unsure-per-skill", "1"]


def test_ship_writes_fp16_weights_and_a_card_of_measured_figures(tmp_path, capsys):
    run, target = tmp_path / "run", tmp_path / "shipped"
    engine = build_engine(seed=0, d_model=32, n_layers=1, n_heads=2)
    engine.sampler = dataclasses.replace(engine.sampler, max_new_tokens=48)
    engine.save(run)
    (run / "training.json").write_text(json.dumps({"step": 7, "batch_size": 4, "lr": 1e-3}))

    assert ship.main([str(run), "--to", str(target), *SMALL]) == 0

    weights = safetensors.torch.load_file(target / "model.safetensors")
    assert {tensor.dtype for tensor in weights.values()} == {torch.float16}
    shipped = Engine.load(target, device="cpu")
    assert shipped.sampler.steps == 16
    assert shipped.unsure_below is not None  # chosen on the validation draws, stored
    card = (target / ship.CARD).read_text()
    assert "{" not in card.replace("{w}", "")  # every placeholder was filled
    assert "7 steps of batch 4" in card
    assert "answers with it; the default is reasoner-tiny-routed." in card  # a trial build
    header = next(line for line in card.splitlines() if line.startswith("| skill |"))
    assert header == (
        "| skill | 8 steps | 16 steps | 32 steps | 16 steps, follow-up "
        "| 16 steps, trained phrasings | in reading order |"
    )
    for skill in SKILLS:
        assert f"| {skill} |" in card
    assert "| latency p50 / p90 (ms) |" in card
    assert f"latency per answer on\n{describe_cpu()}, one thread" in card  # which machine
    assert "## When it is not sure" in card and "| **all** |" in card
    assert "sampler:" in capsys.readouterr().out
    assert "| forward passes per answer |" not in card  # a routed card's row
    with pytest.raises(SystemExit):  # --routed insists on a routed build
        ship.main([str(run), "--routed", "--to", str(tmp_path / "elsewhere"), *SMALL])
    assert not (tmp_path / "elsewhere").exists()


def test_of_samplers_within_one_answer_of_the_best_the_fastest_is_chosen():
    """168 validation answers (12 per skill): one answer moves the mean by 1/168."""
    means = {"plain": 0.5178571428571429, "padding": 0.51785714285714285, "blocks": 0.45}
    p50s = {"plain": 263.0, "padding": 152.0, "blocks": 90.0}
    assert ship.best_candidate(means, p50s, 168) == "padding"
    one_answer_better = means | {"plain": means["padding"] + 1 / 168}
    assert ship.best_candidate(one_answer_better, p50s, 168) == "padding"
    two_answers_better = means | {"plain": means["padding"] + 2 / 168}
    assert ship.best_candidate(two_answers_better, p50s, 168) == "plain"
    assert ship.best_candidate(means, p50s | {"blocks": 9.0}, 168) == "padding"


def test_a_members_own_sampler_stays_unless_another_is_clearly_better_or_faster():
    """Identical samplers' p50s land a few percent apart side by side: a re-ship of an
    unchanged member keeps its sampler through that noise, not through a real gain."""
    means = {"own": 0.80, "decay dropped": 0.80 + 1 / 120, "blocks": 0.70}
    p50s = {"own": 100.0, "decay dropped": 97.0, "blocks": 50.0}
    assert ship.best_candidate(means, p50s, 120) == "decay dropped"  # no sampler to keep
    assert ship.best_candidate(means, p50s, 120, keep="own") == "own"  # 3% is noise
    clearly_faster = p50s | {"decay dropped": 100.0 * (1 - ship.CLEARLY_FASTER) - 1}
    assert ship.best_candidate(means, clearly_faster, 120, keep="own") == "decay dropped"
    clearly_better = means | {"decay dropped": 0.80 + 2 / 120}
    assert ship.best_candidate(clearly_better, p50s, 120, keep="own") == "decay dropped"
    assert ship.best_candidate(means, p50s, 120, keep="blocks") == "decay dropped"  # worse
    own_settings = "own settings: position_decay -0.01"  # a sampler no candidate is
    assert ship.best_candidate(means, p50s, 120, keep=own_settings) == "decay dropped"


def test_each_skill_chooses_one_shipped_members_sampler_and_the_ship_can_keep_it():
    """Every skill is in exactly one member's validation draws, and every member runs one
    of the candidates by name: the ship keeps a member's sampler only then."""
    routed = Engine.load(SHIPPED / "routed", device="cpu")
    members = ship.sampled_members(routed, with_default=True)
    assert set(members) == {*routed.experts, "default"}
    chosen_on = sorted(skill for _member, skills in members.values() for skill in skills)
    assert chosen_on == sorted(SKILLS)
    names = {name: ship.sampler_name(member.sampler) for name, (member, _) in members.items()}
    assert set(names.values()) <= set(ship.CANDIDATES), names


def test_the_candidates_answer_side_by_side_and_score_as_evaluate_does():
    """Every item is answered by every candidate in turn, so that a slower minute of the
    machine slows them all; the accuracy is the same as each one's own evaluation."""
    engine = Engine.load(SHIPPED / "routed" / "experts" / "numbers", device="cpu")
    run_sampler = engine.sampler
    used: list[SamplerConfig] = []
    answer = engine.answer

    def recording(*args, **kwargs):
        used.append(engine.sampler)
        return answer(*args, **kwargs)

    engine.answer = recording
    skills, seeds = ["comparison", "ordering"], [7, 11]
    chosen, sampler, means = ship.choose_sampler(engine, 2, skills, seeds)
    candidates = len(ship.CANDIDATES)
    assert len(used) == 2 * 2 * 2 * candidates
    turns = range(0, len(used), candidates)  # one item each
    assert all(len({id(s) for s in used[i : i + candidates]}) == candidates for i in turns)
    assert used[0] != used[candidates]  # the order rotates from one item to the next
    assert engine.sampler is run_sampler and sampler == ship.candidate_sampler(
        run_sampler, ship.CANDIDATES[chosen]
    )
    engine.answer = answer
    for name in ("plain", "padding settled at p 0.9, delayed canvas cache"):
        engine.sampler = ship.candidate_sampler(run_sampler, ship.CANDIDATES[name])
        own = [evaluate(engine, 2, steps=16, skills=skills, seed=seed) for seed in seeds]
        assert means[name] == pytest.approx(sum(result.mean for result in own) / len(own))


def test_each_candidate_is_what_its_name_says_whatever_the_run_settled_on():
    """A run that already settles padding and caches its canvas is still tried plain."""
    run = SamplerConfig(
        steps=64,
        max_new_tokens=135,
        padding_threshold=0.5,
        canvas_cache="delayed",
        position_decay=-0.1,
        block_length=8,
    )
    plain = ship.candidate_sampler(run, ship.CANDIDATES["plain"])
    assert plain == SamplerConfig(steps=16, max_new_tokens=135)
    name = "padding settled at p 0.9, position decay -0.003, delayed canvas cache"
    chosen = ship.candidate_sampler(run, ship.CANDIDATES[name])
    assert (chosen.padding_threshold, chosen.position_decay) == (0.9, -0.003)
    assert (chosen.canvas_cache, chosen.block_length, chosen.max_new_tokens) == (
        "delayed",
        None,
        135,
    )
    assert ship.sampler_name(chosen) == name
    assert ship.sampler_name(dataclasses.replace(plain, steps=8)) == "plain"
    assert ship.sampler_name(run) == (
        "own settings: block_length 8, padding_threshold 0.5, canvas_cache delayed, "
        "position_decay -0.1"
    )


def assemble_small(folder: Path, link_default: bool) -> Path:
    """The shipped router, which routes for real, in front of a small random default model
    and numbers expert that read prompts as it does, assembled in ``folder/plain/routed``.
    The expert (and a default of the build's own) runs a sampler no candidate is, so that
    the one its ship chooses differs from it."""
    tokenizer = Engine.load(SHIPPED, device="cpu").tokenizer
    plain, numbers = folder / "plain", folder / "numbers"
    for member, seed in ((plain, 0), (numbers, 1)):
        engine = build_engine(seed, tokenizer, d_model=32, n_layers=1, n_heads=2)
        chosen_here = member == numbers or not link_default
        own = {"position_decay": 0.5} if chosen_here else {}
        engine.sampler = dataclasses.replace(engine.sampler, max_new_tokens=48, **own)
        engine.save(member)
    (plain / ship.CARD).write_text("# plain\n")
    return router.assemble(
        SHIPPED / "routed" / "router",
        {"numbers": numbers},
        plain,
        plain / "routed",
        route_above=0.7,
        link_default=link_default,
    )


@pytest.fixture
def routed_build(tmp_path) -> Path:
    """A routed build laid out as reasoner-tiny-routed is: its default model the folder
    above it (``..``), another build with a ship of its own."""
    return assemble_small(tmp_path, link_default=True)


def test_a_routed_build_is_measured_whole_and_shipped_where_it_lies(routed_build, capsys):
    plain = routed_build.parent
    files = {path: path.read_bytes() for path in plain.iterdir() if path.is_file()}
    routing = json.loads((routed_build / "routing.json").read_text())
    assert routing["unsure_below"] is None
    expert = routed_build / routing["experts"]["numbers"]
    expert_files = {path.name: path.read_bytes() for path in expert.iterdir()}

    elsewhere = plain.parent / "card"  # a trial: the card there, the build unchanged
    assert ship.main([str(routed_build), "--to", str(elsewhere), *SMALL]) == 0
    assert json.loads((routed_build / "routing.json").read_text()) == routing
    assert (elsewhere / ship.CARD).is_file() and not (routed_build / ship.CARD).exists()
    assert {path.name: path.read_bytes() for path in expert.iterdir()} == expert_files

    assert ship.main([str(routed_build), "--routed", *SMALL]) == 0
    assert {path: path.read_bytes() for path in plain.iterdir() if path.is_file()} == files
    engine = Engine.load(routed_build, device="cpu")
    assert isinstance(engine, RoutedEngine)
    assert engine.unsure_below is not None  # chosen on the validation draws, stored
    assert json.loads((routed_build / "routing.json").read_text()) == routing | {
        "unsure_below": engine.unsure_below
    }
    # the expert's sampler, chosen on its own skills, is the one part of it written
    assert ship.sampler_name(engine.experts["numbers"].sampler) in ship.CANDIDATES
    config = json.loads((expert / "config.json").read_text())
    before = json.loads(expert_files["config.json"])
    assert config["sampler"] != before["sampler"]
    assert config == before | {"sampler": dataclasses.asdict(engine.experts["numbers"].sampler)}
    assert {p.name: p.read_bytes() for p in expert.iterdir() if p.name != "config.json"} == {
        name: data for name, data in expert_files.items() if name != "config.json"
    }
    card = (routed_build / ship.CARD).read_text()
    assert "{" not in card.replace("{w}", "")  # every placeholder was filled
    assert card.startswith("# routed\n\nplain with a router in front")
    assert "`quicksilver ask --model routed` answers with it; the default is" in card
    assert "| `..` (default) | plain ([its card](../MODEL_CARD.md)):" in card
    assert f"latency per answer on\n{describe_cpu()}, one thread" in card  # which machine
    lines = card.splitlines()
    headers = [line for line in lines if line.startswith("| skill |")]
    assert headers[:2] == [
        "| skill | first turn | follow-up | trained phrasings |",
        "| skill | 8 steps | 16 steps | 32 steps | 16 steps, follow-up "
        "| 16 steps, trained phrasings | in reading order |",
    ]
    # the router's pass on top of each step budget, as the answers count it
    assert "| forward passes per answer | 9 | 17 | 33 | 17 | 17 | |" in lines
    assert "in 1 pass on a 12-token canvas" in card
    # which model answered: the shipped router sends number questions to the expert
    routes = lines[lines.index(headers[0]) : lines.index(headers[1])]
    assert "| addition | default | default | default |" in routes
    assert "| ordering | numbers | numbers | numbers |" in routes
    for skill in SKILLS:
        assert sum(line.startswith(f"| {skill} |") for line in lines) >= 2
    assert "## When it is not sure" in card and "| **all** |" in card
    assert f"Below **{engine.unsure_below:.3f}** (`unsure_below`\nin `routing.json`)" in card
    assert "the default's is plain's, chosen by its own ship" in card  # not re-chosen
    assert "Each expert's is chosen by this ship on the validation draws of its own" in card
    assert "unsure_below" in capsys.readouterr().out


def test_a_routed_build_with_a_default_of_its_own_chooses_that_sampler_too(tmp_path, monkeypatch):
    """A default model copied into the build (trained for it, not another build) is a
    member like the experts: its sampler is chosen on the skills no expert covers and
    written to its ``config.json``, and the card describes it, with no card to link."""
    build = assemble_small(tmp_path, link_default=False)
    routing = json.loads((build / "routing.json").read_text())
    assert routing["default"] == "default"
    default = build / "default"
    before = json.loads((default / "config.json").read_text())
    weights = (default / "model.safetensors").read_bytes()
    asked = []  # the skills each member's sampler is chosen on
    choose = ship.choose_sampler

    def choose_sampler(member, per_skill, skills, seeds):
        asked.append(tuple(skills))
        return choose(member, per_skill, skills, seeds)

    monkeypatch.setattr(ship, "choose_sampler", choose_sampler)

    assert ship.main([str(build), *SMALL]) == 0
    engine = Engine.load(build, device="cpu")
    assert ship.sampler_name(engine.default.sampler) in ship.CANDIDATES
    config = json.loads((default / "config.json").read_text())
    assert config["sampler"] != before["sampler"]
    assert config == before | {"sampler": dataclasses.asdict(engine.default.sampler)}
    assert (default / "model.safetensors").read_bytes() == weights
    # its sampler was chosen on every skill the numbers expert leaves to it
    left = [skill for skill in SKILLS if skill not in ("comparison", "ordering", "conversion")]
    assert ship.default_skills(engine.experts) == tuple(left)
    assert sorted(asked) == sorted([tuple(left), ("comparison", "ordering", "conversion")])
    shipped = ship.default_skills(router.FAMILIES)  # every family has an expert
    assert shipped == ("conversation", "out of scope")
    card = (build / ship.CARD).read_text()
    assert "{" not in card.replace("{w}", "")
    assert card.startswith("# routed\n\nA general model of its own with a router in front")
    row = next(line for line in card.splitlines() if line.startswith("| `default` (default)"))
    assert row.startswith("| `default` (default) | its own general model, for every other ")
    assert "(1 layers × d32, 2 heads), `model.safetensors` " in row
    assert row.endswith(" MB; no training record |")
    assert f"the default's on the skills no expert covers ({', '.join(left)})" in card
    assert "chosen by its own ship" not in card and "its card" not in card
