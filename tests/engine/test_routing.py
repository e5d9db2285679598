"""Routed checkpoints: a real (tiny, trained) router picks real experts per question."""

from __future__ import annotations

import json
import logging
import threading
import time
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import torch
from quicksilver.engine import (
    ChatTemplate,
    Engine,
    RoutedEngine,
    RoutedScheduler,
    SamplerConfig,
    Tokenizer,
    routing,
    scheduler_for,
)
from quicksilver.engine import preparation as preparation_module
from quicksilver.engine.routing import Routing
from quicksilver.engine.scheduler import Scheduler
from quicksilver.engine.train import Example, TrainConfig, train

from .conftest import tiny_config

# What the router learns to say: two experts' names, the default's, and a name no
# routing.json holds (which must reach the default model too).
ROUTES = {
    "spell cat": "letters",
    "spell the word dog": "letters",
    "what is 2 plus 2": "arithmetic",
    "what is 7 times 3": "arithmetic",
    "hello": "default",
    "tell me a joke": "nobody",
}
EXPECTED = {q: name if name != "nobody" else "default" for q, name in ROUTES.items()}
EXPERT_SAMPLER = SamplerConfig(steps=4, max_new_tokens=16)
CONTEXT = 256
PREPARATIONS = preparation_module.ENTRY_POINTS


def _expert(seed: int, **overrides) -> Engine:
    config = tiny_config(max_seq_len=CONTEXT, prompt_sees_reply=False)
    return Engine.random(config, seed=seed, sampler=overrides.pop("sampler", EXPERT_SAMPLER))


@pytest.fixture(scope="module")
def parts(tmp_path_factory) -> Path:
    """Checkpoint folders: a router trained (in seconds) to name the expert, two random
    experts and a random default model, all on one byte-level tokenizer."""
    folder = tmp_path_factory.mktemp("parts")
    torch.manual_seed(0)
    config = tiny_config(max_seq_len=CONTEXT, prompt_sees_reply=False)
    router = Engine.random(config, seed=0, sampler=SamplerConfig(steps=1, max_new_tokens=12))
    examples = [Example(question, name) for question, name in ROUTES.items()]
    settings = TrainConfig(steps=500, batch_size=16, lr=4e-3, warmup_steps=20, progress=False)
    train(router, examples, settings)
    router.save(folder / "router")
    _expert(1).save(folder / "letters")
    _expert(2).save(folder / "arithmetic")
    default = _expert(3)
    default.unsure_below = 0.9  # its own threshold, not the routed system's
    default.save(folder / "general")
    return folder


def routed_folder(parts: Path, target: Path, **changes) -> Path:
    """A routed checkpoint in ``target`` whose models live in ``parts``."""
    target.mkdir(parents=True, exist_ok=True)
    up = Path("..") / parts.name if target.parent == parts.parent else parts
    settings = dict(
        router=str(up / "router"),
        experts={"letters": str(up / "letters"), "arithmetic": str(up / "arithmetic")},
        default=str(up / "general"),
    )
    Routing(**(settings | changes)).write(target)
    return target


@pytest.fixture(scope="module")
def routed(parts) -> RoutedEngine:
    engine = Engine.load(routed_folder(parts, parts.parent / "routed"), device="cpu")
    assert isinstance(engine, RoutedEngine)
    return engine


def test_the_router_picks_the_expert_and_unknown_names_go_to_the_default(routed, caplog):
    with caplog.at_level(logging.DEBUG, logger="quicksilver.engine.routing"):
        picked = {question: routed.route(question) for question in ROUTES}
    assert picked == EXPECTED
    assert "'nobody'" in caplog.text  # the unknown name is logged
    assert routed.engine_for("letters") is routed.experts["letters"]
    assert routed.engine_for("default") is routed.default


def test_an_answer_is_the_experts_with_the_routers_passes_and_time(routed, count_passes):
    router_passes = count_passes(routed.router)
    for question, name in EXPECTED.items():
        alone = routed.engine_for(name).answer(question)
        started = time.perf_counter()
        answer = routed.answer(question)
        wall = time.perf_counter() - started
        assert answer.tokens == alone.tokens and answer.text == alone.text
        assert answer.expert == name
        assert (answer.router_passes, answer.forward_passes) == (1, alone.forward_passes + 1)
        assert answer.steps == alone.steps == EXPERT_SAMPLER.steps
        assert 0 < answer.latency_s <= wall
    assert router_passes.passes == len(EXPECTED)  # one router pass per answer
    # The experts differ: routing matters to the answer.
    question = "spell cat"
    assert routed.answer(question).tokens != routed.default.answer(question).tokens


def test_router_steps_from_routing_json_are_counted(parts, tmp_path):
    engine = Engine.load(routed_folder(parts, tmp_path / "two", router_steps=2), device="cpu")
    answer = engine.answer("what is 2 plus 2")
    assert (answer.expert, answer.router_passes) == ("arithmetic", 2)
    assert answer.forward_passes == EXPERT_SAMPLER.steps + 2


def test_a_batch_answers_in_order_as_single_answers_do(routed):
    questions = ["hello", "spell cat", "what is 7 times 3", "tell me a joke", "spell the word dog"]
    batch = routed.answer_batch(questions)
    single = [routed.answer(q) for q in questions]
    assert [a.expert for a in batch] == [EXPECTED[q] for q in questions]
    assert [a.tokens for a in batch] == [a.tokens for a in single]
    assert all(a.router_passes == 1 for a in batch)
    frames = list(routed.stream_batch(questions))
    finals = {f.conversation: f.answer for f in frames if f.answer is not None}
    assert [finals[i].tokens for i in range(len(questions))] == [a.tokens for a in single]
    with pytest.raises(ValueError, match="no conversations"):
        routed.answer_batch([])


def test_stream_gives_the_experts_frames_then_the_routed_answer(routed, count_passes):
    frames = list(routed.stream("spell cat"))
    assert [f.step for f in frames] == list(range(1, EXPERT_SAMPLER.steps + 1))
    assert all(f.answer is None for f in frames[:-1]) and frames[-1].answer is not None
    assert frames[-1].answer.tokens == routed.answer("spell cat").tokens
    assert frames[-1].answer.expert == "letters" and frames[-1].answer.router_passes == 1
    counter = count_passes(routed.router)
    with pytest.raises(ValueError, match="unknown sampler options"):
        routed.stream("spell cat", stepz=3)  # raised at the call, before the router runs
    assert counter.passes == 0


def test_what_callers_read_comes_from_the_default_model(routed):
    conversation = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hi"}]
    conversation.append({"role": "user", "content": "spell cat"})
    assert routed.count_prompt_tokens(conversation) == routed.default.count_prompt_tokens(
        conversation
    )
    assert routed.model.config.max_seq_len - routed.sampler.max_new_tokens == CONTEXT - 16
    assert routed.tokenizer is routed.default.tokenizer and routed.device.type == "cpu"
    answer = routed.answer(conversation, steps=2)  # options go to the expert
    assert (answer.steps, answer.forward_passes) == (2, 3)
    assert answer.expert == routed.route(conversation)


def test_unsure_below_is_the_routed_systems_own(parts, routed, tmp_path):
    assert routed.default.unsure_below == 0.9
    assert routed.unsure_below is None  # not measured on the routed system
    engine = Engine.load(routed_folder(parts, tmp_path / "u", unsure_below=0.5), device="cpu")
    assert engine.unsure_below == 0.5


def test_a_route_the_router_is_unsure_of_goes_to_the_default(parts, routed, tmp_path):
    sure = {q: routed.router.answer(q, steps=1).confidence for q in ROUTES}
    question = "spell cat"
    above = Engine.load(
        routed_folder(parts, tmp_path / "a", route_above=sure[question] / 2), device="cpu"
    )
    assert above.route(question) == "letters"
    doubtful = Engine.load(
        routed_folder(parts, tmp_path / "d", route_above=min(1.0, sure[question] * 1.001)),
        device="cpu",
    )
    if sure[question] < 1.0:  # (a router sure to the last bit cannot be doubted)
        assert doubtful.route(question) == "default"
        answer = doubtful.answer(question)
        assert (answer.expert, answer.router_passes) == ("default", 1)  # the router still ran
        assert answer.tokens == routed.default.answer(question).tokens
    written = json.loads((tmp_path / "a" / "routing.json").read_text())
    assert written["route_above"] == sure[question] / 2
    assert written["format_version"] == routing.FORMAT_VERSION


NAMES = ["letters", "arithmetic", "default", "nobody"]  # every name the router learnt


def test_a_router_read_as_a_choice_among_its_names(parts, routed, tmp_path, count_passes):
    """One pass scores each name's whole canvas: the route is always one of the names,
    the confidence its share of their probability, and the routes are the trained ones."""
    engine = Engine.load(routed_folder(parts, tmp_path / "n", router_names=NAMES), device="cpu")
    assert engine.router_names == tuple(NAMES)
    counter = count_passes(engine.router)
    questions = [*ROUTES, "spell dog"]  # two prompts of one length share a pass
    chosen = routing.choose_names(engine.router, questions, NAMES)
    lengths = {engine.router.count_prompt_tokens(question) for question in questions}
    assert counter.passes == len(lengths) < len(questions)
    alone = [routing.choose_names(engine.router, [q], NAMES)[0] for q in questions]
    assert [(a.text, a.tokens) for a in alone] == [(c.text, c.tokens) for c in chosen]
    assert [a.confidence for a in alone] == pytest.approx([c.confidence for c in chosen])
    for (question, trained), answer in zip(ROUTES.items(), chosen[: len(ROUTES)], strict=True):
        assert answer.text == trained and answer.forward_passes == 1
        assert 0.5 < answer.confidence <= 1.0
        assert answer.tokens == tuple(routing.name_canvases(engine.router, [trained])[0].tolist())
        assert engine.route(question) == EXPECTED[question]
    answer = engine.answer("spell cat")
    assert (answer.expert, answer.router_passes) == ("letters", 1)
    written = json.loads((tmp_path / "n" / "routing.json").read_text())
    assert written["router_names"] == NAMES
    # A question between two families: still one of the names, whatever their order.
    mixed = routing.choose_names(engine.router, ["spell 2 plus cat"], NAMES)[0]
    assert mixed.text in NAMES and 0.0 < mixed.confidence <= 1.0
    shares = [
        routing.choose_names(engine.router, ["spell 2 plus cat"], [name, other])[0]
        for name, other in (("letters", "arithmetic"), ("arithmetic", "letters"))
    ]
    assert shares[0].text == shares[1].text  # the same choice whichever name comes first
    assert shares[0].confidence == pytest.approx(shares[1].confidence)


def test_a_router_name_longer_than_its_canvas_is_refused(parts, tmp_path):
    folder = routed_folder(parts, tmp_path / "long", router_names=["letters", "x" * 40])
    with pytest.raises(ValueError, match="cannot be one of its router_names"):
        Engine.load(folder, device="cpu")


def test_the_scheduler_routes_each_conversation(routed):
    questions = list(ROUTES) * 2
    alone = [routed.answer(q) for q in questions]
    results: dict[int, object] = {}
    scheduler = scheduler_for(routed, max_batch=2)
    assert isinstance(scheduler, RoutedScheduler)
    with scheduler:

        def ask(index: int) -> None:
            results[index] = scheduler.submit(questions[index]).result(timeout=60)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(questions))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert scheduler.passes >= len(questions)  # the router's passes are counted
    answers = [results[i] for i in range(len(questions))]
    assert [a.tokens for a in answers] == [a.tokens for a in alone]
    assert [a.expert for a in answers] == [a.expert for a in alone]
    assert all(a.router_passes == 1 and a.forward_passes == 5 for a in answers)


def test_scheduler_handles_keep_their_api(routed):
    scheduler = scheduler_for(routed, max_batch=4, start=False)
    first = scheduler.submit("spell cat")
    second = scheduler.submit("what is 2 plus 2", drafts=False)
    cancelled = scheduler.submit("hello")
    assert first.id != second.id and scheduler.waiting == 3
    cancelled.cancel()
    while scheduler.step():
        pass
    frames = list(first.frames(timeout=5))
    assert [f.step for f in frames] == [1, 2, 3, 4]
    assert {f.conversation for f in frames} == {first.id}
    assert frames[-1].answer.expert == "letters" and first.result().router_passes == 1
    assert [f.step for f in second.frames(timeout=5)] == [4]
    assert second.result().tokens == routed.answer("what is 2 plus 2").tokens
    assert cancelled.done and cancelled.cancelled
    assert scheduler.running == 0
    scheduler.close()
    assert isinstance(scheduler_for(routed.default, start=False), Scheduler)


def test_a_plain_folder_loads_as_before(parts):
    engine = Engine.load(parts / "general", device="cpu")
    assert type(engine) is Engine and engine.unsure_below == 0.9
    answer = engine.answer("hello")
    assert (answer.router_passes, answer.expert) == (0, None)


@pytest.mark.parametrize(
    ("contents", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"format": "quicksilver-dllm"}', "is not 'quicksilver-routed'"),
        ('{"format": "quicksilver-routed", "router": "router"}', "lacks default, experts"),
        ('{"format": "quicksilver-routed", "format_version": 9}', "newer than"),
        (
            '{"format": "quicksilver-routed", "router": "r", "experts": {}, "default": "d",'
            ' "routers": 2}',
            r"unknown settings \['routers'\]",
        ),
        (
            '{"format": "quicksilver-routed", "router": "r", "experts": {}, "default": "d",'
            ' "router_steps": 0}',
            "router_steps must be",
        ),
        (
            '{"format": "quicksilver-routed", "router": "r", "experts": {"default": "d"},'
            ' "default": "d"}',
            "expert name 'default'",
        ),
        (
            '{"format": "quicksilver-routed", "router": "r", "experts": {}, "default": "d",'
            ' "unsure_below": 2}',
            "unsure_below must lie",
        ),
        (
            '{"format": "quicksilver-routed", "router": "r", "experts": {}, "default": "d",'
            ' "route_above": 1.5}',
            "route_above is a confidence",
        ),
        (
            '{"format": "quicksilver-routed", "router": "r", "experts": {}, "default": "d",'
            ' "router_names": ["letters", "letters"]}',
            "router_names lists the names",
        ),
        (
            '{"format": "quicksilver-routed", "router": "r", "experts": {}, "default": "d",'
            ' "router_names": ["letters", "default"], "router_steps": 2}',
            "runs 1 pass",
        ),
    ],
)
def test_a_bad_routing_json_is_refused(tmp_path, contents, message):
    (tmp_path / "routing.json").write_text(contents)
    with pytest.raises(ValueError, match=message):
        Engine.load(tmp_path, device="cpu")


def test_a_missing_part_is_named(parts, tmp_path):
    folder = routed_folder(parts, tmp_path / "r", default="nowhere")
    with pytest.raises(FileNotFoundError, match=r"default model folder .*nowhere"):
        Engine.load(folder, device="cpu")
    with pytest.raises(FileNotFoundError, match="no checkpoint folder"):
        Engine.load(tmp_path / "absent", device="cpu")
    (tmp_path / "empty").mkdir()
    folder = routed_folder(parts, tmp_path / "e", experts={"letters": str(tmp_path / "empty")})
    with pytest.raises(FileNotFoundError, match=r"expert 'letters'.*lacks config\.json"):
        Engine.load(folder, device="cpu")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda: Engine.random(
                tiny_config(max_seq_len=CONTEXT, vocab_size=300),
                tokenizer=Tokenizer.word_level(["spell"]),
                sampler=EXPERT_SAMPLER,
            ),
            "expert 'letters''s tokenizer has another vocabulary",
        ),
        (
            lambda: Engine.random(
                tiny_config(max_seq_len=CONTEXT),
                tokenizer=Tokenizer.byte_level(template=ChatTemplate(bos="<|end|>")),
                sampler=EXPERT_SAMPLER,
            ),
            "another chat template",
        ),
        (
            lambda: _expert(4, sampler=SamplerConfig(steps=4, max_new_tokens=24)),
            "expert 'letters' has a context of 256 tokens and a canvas of 24",
        ),
    ],
)
def test_mismatched_experts_are_refused(parts, tmp_path, make, message):
    make().save(tmp_path / "odd")
    folder = routed_folder(parts, tmp_path / "r", experts={"letters": str(tmp_path / "odd")})
    with pytest.raises(ValueError, match=message):
        Engine.load(folder, device="cpu")


class WithSlot:
    """A preparation for the tests: the question ends with a field of its own, as the
    letters expert's prompt ends with the asked letter."""

    def prepare(self, messages, tokenizer):
        *earlier, last = messages
        return [*earlier, {**last, "content": f"{last['content']} | slot"}]

    def date_context(self, today):
        return None


WITH_SLOT = WithSlot()


def test_an_expert_may_prepare_its_prompts_its_own_way(parts, tmp_path, monkeypatch):
    point = EntryPoint(name="with-slot", value=f"{__name__}:WITH_SLOT", group=PREPARATIONS)
    monkeypatch.setattr(
        preparation_module, "entry_points", lambda group: [point] if group == PREPARATIONS else []
    )
    expert = _expert(5)
    expert = Engine(expert.model, expert.tokenizer.with_preparation("with-slot"), EXPERT_SAMPLER)
    expert.save(tmp_path / "slotted")
    folder = routed_folder(parts, tmp_path / "r", experts={"letters": str(tmp_path / "slotted")})
    routed = Engine.load(folder, device="cpu")
    letters = routed.experts["letters"]
    assert letters.tokenizer.template.preparation == "with-slot"
    assert " | slot" in letters.tokenizer.hf.decode(letters.tokenizer.prompt_ids("spell cat"))
    # A prompt counts as the longest any model reads: the slotted expert's, 7 bytes more.
    longest = routed.count_prompt_tokens("spell cat")
    assert longest == letters.count_prompt_tokens("spell cat")
    assert longest == routed.default.count_prompt_tokens("spell cat") + len(" | slot")
    answer = routed.answer("spell cat")
    assert answer.expert == "letters" and answer.router_passes == 1


def test_a_router_with_too_short_a_context_is_refused(parts, tmp_path):
    small = Engine.random(tiny_config(max_seq_len=64), sampler=SamplerConfig(max_new_tokens=12))
    small.save(tmp_path / "router")
    folder = routed_folder(parts, tmp_path / "r", router=str(tmp_path / "router"))
    with pytest.raises(ValueError, match="raise the router's max_seq_len"):
        Engine.load(folder, device="cpu")
    data = json.loads((folder / "routing.json").read_text())
    assert data["format"] == "quicksilver-routed" and data["router_steps"] == 1


def test_ask_on_a_routed_folder_says_who_answered(routed, parts, capsys):
    from quicksilver.ui.cli import main

    folder = parts.parent / "routed"
    assert main(["ask", "spell cat", "--model", str(folder), "--json", "--context", ""]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["expert"], data["router_passes"]) == ("letters", 1)
    assert data["forward_passes"] == EXPERT_SAMPLER.steps + 1
    assert data["answer"] == routed.answer("spell cat").text


def test_a_server_connection_streams_through_the_routed_scheduler(routed):
    from quicksilver.ui.server.sharing import ScheduledEngine

    with scheduler_for(routed, max_batch=2) as scheduler:
        shared = ScheduledEngine(scheduler)
        frames = list(shared.stream("spell cat"))
        assert frames[-1].answer.tokens == routed.answer("spell cat").tokens
        assert frames[-1].answer.expert == "letters"
        assert shared.count_prompt_tokens("hello") == routed.count_prompt_tokens("hello")
        assert shared.sampler.max_new_tokens == EXPERT_SAMPLER.max_new_tokens
