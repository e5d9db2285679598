"""The step loop without host synchronisation, and the compiled step (issue 25)."""

from __future__ import annotations

import pytest
import torch
from quicksilver.engine import Engine, SamplerConfig
from quicksilver.engine.compiled import BUCKET

from .conftest import MEMORISED, PLAIN_SCHEDULES, HostReads, tiny_config

PROMPTS = ["hi", "what is 17 times 3", "please name three colours of the rainbow, and why"]


@pytest.fixture(scope="module", params=[True, False], ids=["bidirectional", "isolated-prompt"])
def engine(request) -> Engine:
    return Engine.random(tiny_config(prompt_sees_reply=request.param), seed=0)


def passes_with_reads(engine: Engine, prompts: list[str], **options) -> list[list[str]]:
    """Denoise ``prompts`` together; per pass, the host reads it made (admitting the rows
    happens before, outside the count)."""
    canvases = engine.canvases(engine.sampler_config(**options))
    for index, prompt in enumerate(prompts):
        canvases.add(index, torch.tensor(engine.tokenizer.prompt_ids(prompt)))
    per_pass = []
    with torch.inference_mode():
        while canvases:
            with HostReads() as reads:
                finished = [state.finished for state in canvases.step()]
            per_pass.append((any(finished), reads.reads))
    return per_pass


@pytest.mark.parametrize(
    "options",
    [*PLAIN_SCHEDULES.values(), {"steps": 8, "max_new_tokens": 32, "temperature": 0.8}],
    ids=[*PLAIN_SCHEDULES, "sampled"],
)
def test_the_plain_schedule_never_waits_for_the_device(engine, options):
    """Every pass but the last (where finished rows leave the batch) queues its work and
    reads nothing back, for one row and for rows of different prompt lengths."""
    for prompts in (PROMPTS[:1], PROMPTS):
        per_pass = passes_with_reads(engine, prompts, **options)
        assert len(per_pass) == options["steps"]
        assert [reads for _, reads in per_pass[:-1]] == [[]] * (options["steps"] - 1)
        assert per_pass[-1][0]  # the rows finished together, at the last pass


def test_data_dependent_options_read_back_each_pass(trained_engine):
    """The counter sees the reads it claims to count: a threshold decides on the host
    whether a row is done, from a count read back after every pass."""
    prompts = [example.conversation for example in MEMORISED[:2]]
    per_pass = passes_with_reads(trained_engine, prompts, steps=8, max_new_tokens=16, threshold=0.9)
    assert all(reads for _, reads in per_pass)


def test_compile_is_on_for_cuda_only_by_default():
    config = tiny_config()
    assert Engine.random(config).compiled is None
    assert Engine.random(config, compile=True).compiled is not None
    if torch.cuda.is_available():
        assert Engine.random(config, device="cuda").compiled is not None


@pytest.fixture(scope="module")
def engines() -> tuple[Engine, Engine]:
    """The same weights eager and compiled (prompt isolated, so the exact cache runs)."""
    eager = Engine.random(tiny_config(prompt_sees_reply=False), seed=1)
    return eager, Engine(eager.model, eager.tokenizer, eager.sampler, compile=True)


def test_compiled_answers_equal_eager_answers(engines):
    """Prompts of different lengths, alone and batched, with the exact prompt cache (a
    whole first pass, then canvas-only passes): the compiled, bucketed passes commit the
    eager tokens, in the same number of passes."""
    eager, compiled = engines
    options = {"steps": 8, "max_new_tokens": 32}
    alone = [eager.answer(prompt, **options).tokens for prompt in PROMPTS]
    answers = [compiled.answer(prompt, **options) for prompt in PROMPTS]
    answers += compiled.answer_batch(PROMPTS, **options)
    assert [a.tokens for a in answers] == alone * 2
    assert {a.forward_passes for a in answers} == {options["steps"]}


def test_compiled_prompt_columns_are_whole_buckets(engines):
    """Prompts of different lengths in one bucket run passes of one shape."""
    _, compiled = engines
    lengths = set()
    for prompt in PROMPTS:
        canvases = compiled.canvases(SamplerConfig(steps=4, max_new_tokens=16))
        canvases.add(0, torch.tensor(compiled.tokenizer.prompt_ids(prompt)))
        lengths.add(canvases.sequence.shape[1])
    assert lengths == {BUCKET + 16}


def test_rows_joining_and_leaving_keep_whole_buckets_and_their_answers(engines):
    """A long prompt widens the batch to two buckets; a short one joins mid-run; once
    the long one leaves, the columns shrink back to one bucket, and the short row's
    answer is what it gets alone, eagerly."""
    eager, compiled = engines
    config = SamplerConfig(steps=8, max_new_tokens=32)
    long, short = "word " * 20, PROMPTS[0]
    assert BUCKET < len(compiled.tokenizer.prompt_ids(long)) <= 2 * BUCKET
    canvases = compiled.canvases(config)
    with torch.inference_mode():
        canvases.add("long", torch.tensor(compiled.tokenizer.prompt_ids(long)))
        for _ in range(3):
            canvases.step()
        canvases.add("short", torch.tensor(compiled.tokenizer.prompt_ids(short)))
        widths, finished = [], {}
        while canvases:
            for state in canvases.step():
                if state.finished:
                    finished[state.key] = tuple(state.canvas.tolist())
            widths.append(canvases.width)
    assert widths[0] == 2 * BUCKET and widths[-2:] == [BUCKET, 0]
    assert finished["short"] == eager.answer(short, steps=8, max_new_tokens=32).tokens
    assert finished["long"] == eager.answer(long, steps=8, max_new_tokens=32).tokens
