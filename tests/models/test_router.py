"""reasoner-tiny's router: its labels, its shape and the routed folder it assembles."""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections import Counter
from pathlib import Path

import pytest
import torch
from quicksilver.engine import Engine, RoutedEngine
from quicksilver.models.reasoner_tiny import corpus, router
from quicksilver.models.reasoner_tiny.blend import load
from quicksilver.models.reasoner_tiny.compare import candidates, measure
from quicksilver.models.reasoner_tiny.corpus import SKILLS
from quicksilver.models.reasoner_tiny.normalise import normalise_spoken
from quicksilver.models.reasoner_tiny.slots import numbers_in

SHIPPED = Path(router.__file__).parent


def test_every_skill_has_a_family_or_goes_to_the_default():
    assert {skill for skills in router.FAMILIES.values() for skill in skills} <= set(SKILLS)
    assert router.family("letter count") == "letters" and router.family("calendar") == "calendar"
    assert router.family("spelling") == router.family("backwards") == "spelling"
    assert router.family("conversation") == router.family("out of scope") == "default"
    with pytest.raises(ValueError, match="no skill named"):
        router.family("poetry")


def test_examples_answer_with_the_family_name_only():
    examples = router.routing_examples(400, seed=3)
    names = {example.answer for example in examples}
    assert names == {*router.FAMILIES, "default"}
    assert all(example.thinking == "" for example in examples)
    follow_ups = [e for e in examples if len(e.conversation) > 2]
    assert follow_ups  # earlier exchanges, as in the assistant's memory


def test_a_skill_weight_changes_the_routing_mix():
    """``--weight`` gives a skill another share of the router's questions, as it does an
    expert's: the chat a continued router drifts away from can be given more room."""

    def default_share(**weights: float) -> float:
        examples = router.routing_examples(600, seed=3, weights=weights)
        return sum(example.answer == "default" for example in examples) / len(examples)

    plain, more_chat = default_share(), default_share(conversation=8.0)
    assert plain < 0.2 and more_chat > 2 * plain
    # what is left is arithmetic with its operation swapped for an unknown word: refused
    assert default_share(conversation=0.0, **{"out of scope": 0.0}) < plain / 2


@pytest.fixture(scope="module")
def fresh_router(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("router")
    engine = router.build_router(SHIPPED, seed=0, d_model=32, n_layers=1)
    engine.save(folder)
    return folder


def test_a_router_reads_prompts_as_the_shipped_model_does(fresh_router):
    shipped = Engine.load(SHIPPED, device="cpu")
    fresh = Engine.load(fresh_router, device="cpu")
    assert fresh.tokenizer.fingerprint() == shipped.tokenizer.fingerprint()
    assert fresh.sampler.max_new_tokens == router.CANVAS
    assert fresh.sampler.steps == router.STEPS
    room = fresh.model.config.max_seq_len - router.CANVAS
    assert room == shipped.model.config.max_seq_len - shipped.sampler.max_new_tokens
    # The longest family name fits the canvas with its marker and end token.
    longest = max([*router.FAMILIES, "default"], key=len)
    assert len(fresh.tokenizer.reply_ids("", longest)) <= router.CANVAS


def test_assemble_writes_a_routed_folder_that_loads(fresh_router, tmp_path):
    out = tmp_path / "routed"
    experts = router._expert_pairs([f"letters={SHIPPED}"])
    router.assemble(fresh_router, experts, SHIPPED, out, unsure_below=0.8)
    routing = json.loads((out / "routing.json").read_text())
    assert routing["experts"] == {"letters": "experts/letters"}
    assert (routing["router"], routing["default"], routing["router_steps"]) == (
        "router",
        "default",
        1,
    )
    assert (out / "questions.lm.json").is_file()  # where the assistant looks for it
    # the shipped folder is a package holding a routed build: only its checkpoint is copied
    copied = {path.name for path in (out / "default").iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= copied
    assert not any(name.endswith(".py") or name == "routed" for name in copied)
    engine = Engine.load(out, device="cpu")
    assert isinstance(engine, RoutedEngine) and engine.unsure_below == 0.8
    answer = engine.answer("what is 2 plus 2")
    assert answer.router_passes == 1 and answer.expert in {"letters", "default"}
    with pytest.raises(FileExistsError, match="not empty"):
        router.assemble(fresh_router, experts, SHIPPED, out)
    with pytest.raises(ValueError, match="FAMILY=FOLDER"):
        router._expert_pairs(["poetry=somewhere"])


def test_a_routed_checkpoint_is_compared_whole_with_its_own_samplers(fresh_router, tmp_path):
    """Each expert keeps the sampler the ship chose for it: the baseline's would measure
    another build than the one that ships."""
    out = router.assemble(fresh_router, {"letters": SHIPPED}, SHIPPED, tmp_path / "routed")
    baseline = load(SHIPPED)
    baseline.sampler = dataclasses.replace(baseline.sampler, steps=8, position_decay=0.0)
    routed = load(out)
    own = {name: expert.sampler for name, expert in routed.experts.items()}
    own_default = routed.default.sampler
    engines = candidates(baseline, {"routed": routed}, shares=[])
    assert engines["routed"] is routed
    assert {name: expert.sampler for name, expert in routed.experts.items()} == own
    assert routed.default.sampler == own_default != baseline.sampler
    assert routed.router.sampler.steps == router.STEPS  # the router keeps its one pass
    assert measure("routed", routed, per_skill=1, seeds=[7]).accuracy.keys() == SKILLS.keys()
    with pytest.raises(ValueError, match="routed checkpoint"):
        candidates(baseline, {"routed": routed}, shares=[0.5])


def test_the_report_says_where_the_misses_went(fresh_router):
    answers = router.routes(Engine.load(fresh_router, device="cpu"), seeds=[7], per_skill=1)
    routes = router.tally(answers)
    assert set(routes) == {*router.FAMILIES, "default"}
    assert sum(routes["letters"].values()) == 2 * 3  # two skills: first turn, follow-up, trained
    assert set().union(*routes.values()) <= {*router.FAMILIES, "default"}
    # with no experts, or a router that must be surer than sure, all go to the default
    for counts in (router.tally(answers, experts=[]), router.tally(answers, route_above=1.01)):
        assert all(set(sent) == {"default"} for sent in counts.values())
    made_up = {
        "letters": Counter(letters=8, default=1, calendar=1),
        "default": Counter(default=4, numbers=1),
    }
    lines = router.report(made_up).splitlines()
    assert lines[1].split()[:3] == ["letters", "8", "10"] and "default 1, calendar 1" in lines[1]
    assert lines[-2].split()[:3] == ["all", "12", "15"]
    assert lines[-1] == "sent to the wrong expert: 2 (13.3%)"  # calendar and numbers
    # without a calendar expert, the calendar question sent to the default is right
    lines = router.report(made_up, experts=["letters", "numbers"]).splitlines()
    assert lines[1].split()[:3] == ["letters", "8", "10"] and "calendar 1" in lines[1]
    assert lines[-1] == "sent to the wrong expert: 2 (13.3%)"


def test_the_shipped_routed_build_sends_each_family_to_its_expert():
    engine = Engine.load("reasoner-tiny-routed", device="cpu")
    general = Engine.load("reasoner-tiny", device="cpu")
    assert isinstance(engine, RoutedEngine)
    assert set(engine.experts) == {"numbers", "calendar", "arithmetic", "letters", "spelling"}
    stored = json.loads((SHIPPED / "routed" / "routing.json").read_text())
    assert engine.route_above == stored["route_above"] is not None
    assert engine.unsure_below == stored["unsure_below"] is not None  # its own, not the default's
    # its default model is its own, continued from the general one (chat and refusals),
    # reading prompts as the general one does
    assert stored["default"] == "default" and (SHIPPED / "routed" / "default").is_dir()
    assert engine.default.tokenizer.vocab_size == general.tokenizer.vocab_size
    differ = [
        name
        for name, tensor in general.model.state_dict().items()
        if not torch.equal(engine.default.model.state_dict()[name], tensor)
    ]
    assert differ, "the default should be the routed build's own model"
    wanted = {
        "which is bigger 7 or 12": "numbers",
        "what day is it tomorrow": "calendar",
        "hello": "default",
        "what is 17 times 3": "arithmetic",
        "count the letter x in library": "letters",
        "what's the opening letter of forest": "letters",  # a training phrasing
        "spell kitchen": "spelling",
        "give me the spelling of drum": "spelling",
        "read turtle backwards": "spelling",
    }
    assert {question: engine.route(question) for question in wanted} == wanted
    answer = engine.answer("which is bigger 7 or 12")
    assert (answer.text, answer.expert) == ("12 is bigger than 7.", "numbers")
    assert answer.router_passes == 1
    today = {"role": "system", "content": engine.date_context(datetime.date(2026, 12, 2))}
    answer = engine.answer([today, {"role": "user", "content": "what day is it tomorrow"}])
    assert (answer.text, answer.expert) == ("Tomorrow is Thursday, December 3, 2026.", "calendar")


def test_dropped_words_never_take_the_operation_or_a_number_or_make_a_held_out_phrasing():
    """Some drops would make a held-out phrasing ("see you later" less "later" is the
    held-out "see you"; "how many letter p's are there in pepper" less "letter" is one
    of letter count's); those questions stay whole, so no held-out phrasing reaches the
    router's training."""
    examples = router.routing_examples(300, seed=5)
    dropped = router.routing_examples(300, seed=5, drop_words=1.0)
    assert [e.answer for e in dropped] == [e.answer for e in examples]
    changed = [
        (a.conversation[-1]["content"], b.conversation[-1]["content"])
        for a, b in zip(examples, dropped, strict=True)
        if a.conversation != b.conversation
    ]
    assert len(changed) > 200
    for before, after in changed:
        assert len(after.split(" ")) == len(before.split(" ")) - 1
        assert not corpus.is_held_out_phrasing(after), after
        assert numbers_in(normalise_spoken(after)) == numbers_in(normalise_spoken(before))
    assert corpus.is_held_out_phrasing("Hey see you please?")
    assert corpus.is_held_out_phrasing("how many p's are there in pepper")
    assert not corpus.is_held_out_phrasing("see you later")
    for example in dropped:
        if example.answer == "arithmetic":
            words = {w.lower().strip("?.") for w in example.conversation[-1]["content"].split()}
            assert words & router.OPERATION_WORDS


def test_known_framing_swaps_a_frame_word_for_a_neutral_one_and_keeps_the_cues():
    """Conversion and calendar questions keep their units, days and numbers; the word
    swapped in is one of no phrasing (no held-out phrasing can come of it)."""
    plain = router.routing_examples(600, seed=4)
    framed = router.routing_examples(600, seed=4, known_framing=1.0)
    assert [e.answer for e in framed] == [e.answer for e in plain]
    neutral = set(corpus.neutral_words())
    assert neutral and not neutral & corpus.held_out_phrasing_words()
    assert not neutral & set().union(*corpus.KEYWORDS.values())
    changed = 0
    for a, b in zip(plain, framed, strict=True):
        before, after = a.conversation[-1]["content"], b.conversation[-1]["content"]
        if before == after:
            continue
        changed += 1
        assert a.answer in ("numbers", "calendar"), (before, after)
        gone = Counter(before.split()) - Counter(after.split())
        came = Counter(after.rstrip("?.").split()) - Counter(before.rstrip("?.").split())
        assert len(gone) == len(came) == 1 and set(came) <= neutral, (before, after)
        assert not {w.lower() for w in gone} & set().union(*corpus.KEYWORDS.values())
        assert numbers_in(normalise_spoken(after)) == numbers_in(normalise_spoken(before))
    assert changed > 0.5 * sum(e.answer in ("numbers", "calendar") for e in plain) / 2


def test_a_router_can_start_from_the_general_model():
    engine = router.router_from(SHIPPED)
    shipped = Engine.load(SHIPPED, device="cpu")
    assert engine.tokenizer.fingerprint() == shipped.tokenizer.fingerprint()
    assert (engine.sampler.steps, engine.sampler.max_new_tokens) == (1, router.CANVAS)
    assert engine.unsure_below is None and engine.model.config == shipped.model.config


def test_a_router_run_records_what_it_continued_and_its_mix(tmp_path, capsys):
    """The run's ``training.json`` says what it started from and how its questions were
    drawn, so the card can say it and the run can be made again."""
    out = tmp_path / "router"
    argv = ["--init-from", str(SHIPPED), "--out", str(out), "--steps", "2", "--examples", "200"]
    argv += ["--per-skill", "1", "--drop-words", "0.3", "--weight", "conversation=2.5"]
    assert router.main(argv) == 0
    record = json.loads((out / "training.json").read_text())
    assert record["step"] == 2
    assert record["origin"] == {
        "examples": 200,
        "skill_weights": {"conversation": 2.5},
        "drop_words": 0.3,
        "known_framing": 0.0,
        "init_from": str(SHIPPED),
    }
    assert "family" in capsys.readouterr().out  # the routing report of the trained router
