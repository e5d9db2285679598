"""Properties of the fixed-step diffusion sampler, on small real engines."""

from __future__ import annotations

import dataclasses
from itertools import pairwise

import pytest
import torch
from quicksilver.engine import Engine, SamplerConfig
from quicksilver.engine.sampler import OPTIONAL_SETTINGS, denoise
from quicksilver.engine.tokenizer import MASK_GLYPH

from .conftest import MEMORISED, MEMORISED_REPLY_TOKENS, tiny_config

QUESTION = "what is 17 times 3"


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.random(tiny_config(), seed=0)


@pytest.mark.parametrize("max_new_tokens", [32, 128, 512])
@pytest.mark.parametrize("steps", [8, 16])
def test_passes_equal_steps_whatever_the_length(engine, count_passes, steps, max_new_tokens):
    counter = count_passes(engine)
    answer = engine.answer(QUESTION, steps=steps, max_new_tokens=max_new_tokens)
    assert counter.passes == steps
    assert answer.forward_passes == answer.steps == steps
    assert len(answer.tokens) == max_new_tokens
    assert engine.tokenizer.mask_id not in answer.tokens


def test_more_steps_than_tokens_uses_one_pass_per_token(engine, count_passes):
    counter = count_passes(engine)
    answer = engine.answer(QUESTION, steps=64, max_new_tokens=20)
    assert counter.passes == answer.forward_passes == answer.steps == 20


def _masks_after_each_pass(engine: Engine, config: SamplerConfig) -> list[torch.Tensor]:
    """The canvas's mask after every pass of :func:`denoise` on ``QUESTION``."""
    prompt = torch.tensor(engine.tokenizer.prompt_ids(QUESTION))
    tok = engine.tokenizer
    with torch.inference_mode():
        states = denoise(engine.model, prompt, config, mask_id=tok.mask_id, end_id=tok.end_id)
        return [state.masked.clone() for state in states]


@pytest.mark.parametrize("block_length", [8, 32, 48])
def test_blocks_keep_the_budget_and_decode_left_to_right(engine, block_length):
    config = SamplerConfig(steps=16, max_new_tokens=96, block_length=block_length)
    blocks = config.blocks
    states = _masks_after_each_pass(engine, config)
    assert len(states) == 16
    for masked in states:
        # A block is touched only once every block before it is complete.
        open_blocks = [i for i, (s, e) in enumerate(blocks) if masked[s:e].any()]
        first_open = open_blocks[0] if open_blocks else len(blocks)
        for s, e in blocks[first_open + 1 :]:
            assert masked[s:e].all()
    assert not states[-1].any()


def test_too_few_steps_for_the_blocks_is_refused():
    with pytest.raises(ValueError, match="cannot cover 4 blocks"):
        SamplerConfig(steps=3, max_new_tokens=64, block_length=16)


def test_masked_count_never_rises_and_every_position_ends_committed(engine):
    frames = list(engine.stream(QUESTION, steps=16, max_new_tokens=64))
    masked = [frame.masked for frame in frames]
    assert masked == sorted(masked, reverse=True)
    assert all(a > b for a, b in pairwise(masked))  # every pass commits something
    assert sum(frame.committed for frame in frames) == 64
    assert masked[-1] == 0
    assert [frame.step for frame in frames] == list(range(1, 17))
    assert all(frame.total_steps == 16 for frame in frames)


def test_stream_ends_with_the_answer(engine):
    frames = list(engine.stream(QUESTION, steps=8, max_new_tokens=32))
    answer = engine.answer(QUESTION, steps=8, max_new_tokens=32)
    last = frames[-1]
    assert last.answer is not None and all(f.answer is None for f in frames[:-1])
    assert last.text == answer.text == last.answer.text
    assert last.thinking == answer.thinking
    assert last.answer.tokens == answer.tokens
    assert MASK_GLYPH in frames[0].thinking + frames[0].text


def test_stream_shows_the_answer_materialising(trained_engine):
    example = MEMORISED[0]
    frames = list(
        trained_engine.stream(example.conversation, steps=8, max_new_tokens=MEMORISED_REPLY_TOKENS)
    )
    assert frames[-1].text == example.answer
    assert frames[-1].thinking == example.thinking
    assert MASK_GLYPH in frames[0].thinking + frames[0].text
    assert MASK_GLYPH not in frames[-1].thinking + frames[-1].text


@pytest.mark.parametrize("confidence", ["probability", "margin", "entropy"])
@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_same_seed_same_answer(engine, confidence, temperature):
    options = dict(steps=8, max_new_tokens=48, confidence=confidence, temperature=temperature)
    first = engine.answer(QUESTION, seed=3, **options)
    again = engine.answer(QUESTION, seed=3, **options)
    assert first.tokens == again.tokens
    assert engine.tokenizer.mask_id not in first.tokens


def test_temperature_samples_differ_between_seeds(engine):
    answers = {
        engine.answer(QUESTION, steps=8, max_new_tokens=48, temperature=1.0, seed=s).tokens
        for s in range(4)
    }
    assert len(answers) > 1
    greedy = {engine.answer(QUESTION, steps=8, max_new_tokens=48, seed=s).tokens for s in range(4)}
    assert len(greedy) == 1


def test_confidence_measures_change_the_order_of_commits(engine):
    orders = set()
    for confidence in ("probability", "margin", "entropy"):
        frames = engine.stream(QUESTION, steps=8, max_new_tokens=48, confidence=confidence)
        orders.add(next(iter(frames)).thinking)
    assert len(orders) > 1


@pytest.mark.parametrize(("decay", "order"), [(10.0, "reading"), (-10.0, "reversed")])
@pytest.mark.parametrize("confidence", ["probability", "margin", "entropy"])
def test_strong_position_decay_commits_in_canvas_order(engine, decay, order, confidence):
    # A weight of exp(-10) per position outweighs any gap in confidence, so each pass
    # commits the leftmost (or rightmost) masked positions: the masked ones are always a
    # suffix (or prefix) of the canvas.
    config = SamplerConfig(steps=8, max_new_tokens=48, confidence=confidence, position_decay=decay)
    passes = [masked.tolist() for masked in _masks_after_each_pass(engine, config)]
    assert len(passes) == 8
    for masked in passes[:-1]:
        assert 0 < sum(masked) < 48
        if order == "reversed":
            masked.reverse()
        assert masked == sorted(masked)  # all False, then all True


def test_position_decay_changes_the_order_of_commits_only(engine):
    plain = _masks_after_each_pass(engine, SamplerConfig(steps=8, max_new_tokens=48))
    decayed = _masks_after_each_pass(
        engine, SamplerConfig(steps=8, max_new_tokens=48, position_decay=-0.5)
    )
    assert [int(m.sum()) for m in plain] == [int(m.sum()) for m in decayed]
    assert any(not torch.equal(a, b) for a, b in zip(plain, decayed, strict=True))


@pytest.mark.parametrize("threshold", [1.0, 0.5, 0.05])
def test_threshold_never_exceeds_the_budget(trained_engine, count_passes, threshold):
    counter = count_passes(trained_engine)
    for example in MEMORISED:
        answer = trained_engine.answer(
            example.conversation,
            steps=12,
            max_new_tokens=MEMORISED_REPLY_TOKENS,
            threshold=threshold,
        )
        assert answer.forward_passes <= 12
        assert trained_engine.tokenizer.mask_id not in answer.tokens
    assert counter.passes <= 12 * len(MEMORISED)
    if threshold <= 0.5:  # a model sure of its memorised answers finishes early
        assert counter.passes < 12 * len(MEMORISED)


def test_threshold_keeps_memorised_answers(trained_engine):
    for example in MEMORISED:
        answer = trained_engine.answer(
            example.conversation, steps=12, max_new_tokens=MEMORISED_REPLY_TOKENS, threshold=0.9
        )
        assert (answer.thinking, answer.text) == (example.thinking, example.answer)


def test_stop_at_end_finishes_early_with_the_same_answer(trained_engine):
    passes = []
    for example in MEMORISED:
        full = trained_engine.answer(example.conversation, steps=16, max_new_tokens=32)
        early = trained_engine.answer(
            example.conversation, steps=16, max_new_tokens=32, stop_at_end=True
        )
        assert full.forward_passes == 16
        assert early.forward_passes <= 16
        assert (early.thinking, early.text) == (example.thinking, example.answer)
        end = trained_engine.tokenizer.end_id
        first_end = early.tokens.index(end)
        assert set(early.tokens[first_end:]) == {end}
        passes.append(early.forward_passes)
    assert sum(passes) < 16 * len(MEMORISED)


def test_padding_threshold_settles_the_tail_at_once_and_keeps_the_answer(trained_engine):
    """One step per canvas position: plain decoding commits one token per pass; with
    the option the padding after each short reply goes at once, outside the quota."""
    end, length = trained_engine.tokenizer.end_id, MEMORISED_REPLY_TOKENS
    for example in MEMORISED:
        plain = list(trained_engine.stream(example.conversation, steps=length))
        settled = list(
            trained_engine.stream(example.conversation, steps=length, padding_threshold=0.9)
        )
        assert [frame.committed for frame in plain] == [1] * length
        answer = settled[-1].answer
        padding = length - answer.tokens.index(end)
        assert settled[0].committed >= padding > 1
        assert answer.forward_passes <= length - padding + 1
        assert (answer.thinking, answer.text) == (example.thinking, example.answer)
        assert set(answer.tokens[length - padding :]) == {end}


def test_settled_padding_is_cut_from_later_passes(trained_engine, count_passes):
    counter = count_passes(trained_engine)
    example = MEMORISED[1]  # "hello": the shortest reply
    length = MEMORISED_REPLY_TOKENS
    answer = trained_engine.answer(
        example.conversation, steps=length, max_new_tokens=length, padding_threshold=0.9
    )
    reply = answer.tokens.index(trained_engine.tokenizer.end_id) + 1
    first, *later = counter.query_lengths
    assert first == answer.prompt_tokens + length
    assert later and max(later) <= reply
    assert answer.text == example.answer


def test_padding_threshold_is_checked():
    with pytest.raises(ValueError, match="padding_threshold"):
        SamplerConfig(padding_threshold=1.5)


def test_exact_prompt_cache_runs_only_the_canvas_and_changes_nothing(trained_engine, count_passes):
    counter = count_passes(trained_engine)
    example = MEMORISED[0]
    cached = trained_engine.answer(
        example.conversation, steps=8, max_new_tokens=24, prompt_cache="exact"
    )
    prompt_len = cached.prompt_tokens
    assert counter.query_lengths == [prompt_len + 24] + [24] * 7
    uncached = trained_engine.answer(
        example.conversation, steps=8, max_new_tokens=24, prompt_cache="off"
    )
    assert counter.query_lengths[8:] == [prompt_len + 24] * 8
    assert cached.tokens == uncached.tokens


def test_exact_cache_is_not_used_when_the_prompt_sees_the_reply(engine, count_passes):
    counter = count_passes(engine)
    answer = engine.answer(QUESTION, steps=4, max_new_tokens=16, prompt_cache="exact")
    assert counter.query_lengths == [answer.prompt_tokens + 16] * 4


def test_approximate_cache_refreshes_at_each_block(engine, count_passes):
    counter = count_passes(engine)
    answer = engine.answer(
        QUESTION, steps=8, max_new_tokens=32, block_length=16, prompt_cache="approximate"
    )
    p = answer.prompt_tokens
    # Block 1: a full pass, then 3 passes from the block on; block 2 likewise.
    assert counter.query_lengths == [p + 32, 32, 32, 32, p + 32, 16, 16, 16]
    assert answer.forward_passes == 8
    assert engine.tokenizer.mask_id not in answer.tokens


def test_delayed_canvas_cache_runs_the_masked_and_just_committed_positions(
    trained_engine, count_passes
):
    """24 positions in 8 passes commit 3 a pass; each later pass runs the positions
    still masked and the 3 committed by the pass before, and the answers hold."""
    counter = count_passes(trained_engine)
    for example in MEMORISED:
        answer = trained_engine.answer(
            example.conversation, steps=8, max_new_tokens=24, canvas_cache="delayed"
        )
        assert (answer.thinking, answer.text) == (example.thinking, example.answer)
        assert answer.forward_passes == 8
        assert counter.query_lengths[:8] == [answer.prompt_tokens + 24, 24, 21, 18, 15, 12, 9, 6]
        counter.query_lengths.clear()


def test_canvas_refresh_runs_a_whole_pass_every_n(trained_engine, count_passes):
    counter = count_passes(trained_engine)
    example = MEMORISED[0]
    options = {"steps": 8, "max_new_tokens": 24, "canvas_cache": "delayed"}
    refreshed = trained_engine.answer(example.conversation, canvas_refresh=4, **options)
    assert counter.query_lengths == [refreshed.prompt_tokens + 24, 24, 21, 18, 24, 12, 9, 6]
    every_pass = trained_engine.answer(example.conversation, canvas_refresh=1, **options)
    plain = trained_engine.answer(example.conversation, steps=8, max_new_tokens=24)
    assert every_pass.tokens == plain.tokens


@pytest.mark.parametrize("prompt_cache", ["exact", "approximate"])
@pytest.mark.parametrize("extra", [{}, {"padding_threshold": 0.9}, {"stop_at_end": True}])
def test_delayed_canvas_cache_keeps_memorised_answers_in_blocks(
    trained_engine, prompt_cache, extra
):
    """Blocks of 8: later blocks' logits must land on their own positions."""
    options = {"steps": 12, "max_new_tokens": 24, "block_length": 8, "prompt_cache": prompt_cache}
    for example in MEMORISED:
        answer = trained_engine.answer(
            example.conversation, canvas_cache="delayed", **options, **extra
        )
        assert (answer.thinking, answer.text) == (example.thinking, example.answer)
        assert answer.forward_passes <= 12
        assert trained_engine.tokenizer.mask_id not in answer.tokens


def test_delayed_canvas_cache_keeps_the_prompt_that_sees_the_reply(engine, count_passes):
    """A fully bidirectional model: the prompt runs in whole passes only."""
    counter = count_passes(engine)
    answer = engine.answer(QUESTION, steps=4, max_new_tokens=16, canvas_cache="delayed")
    assert counter.query_lengths == [answer.prompt_tokens + 16, 16, 12, 8]
    assert answer.forward_passes == 4
    assert engine.tokenizer.mask_id not in answer.tokens


@pytest.mark.parametrize(
    ("conversation", "options", "message"),
    [
        ("", {}, "question is empty"),
        ("   ", {}, "question is empty"),
        ([], {}, "conversation is empty"),
        ([{"role": "robot", "content": "hi"}], {}, "role 'robot'"),
        (
            [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
            {},
            "last message",
        ),
        ("hi", {"steps": 0}, "steps must be at least 1"),
        ("hi", {"max_new_tokens": 0}, "max_new_tokens must be at least 1"),
        ("hi", {"max_new_tokens": 5000}, "use max_new_tokens ≤"),
        ("word " * 1200, {}, "shorten the question"),
        ("hi", {"temperature": -1}, "temperature"),
        ("hi", {"threshold": 1.5}, "threshold"),
        ("hi", {"confidence": "vibes"}, "confidence"),
        ("hi", {"canvas_cache": "always"}, "canvas_cache must be 'off' or 'delayed'"),
        ("hi", {"canvas_refresh": 0}, "canvas_refresh must be at least 1"),
        ("hi", {"canvas_refresh": 4}, "canvas_refresh needs canvas_cache='delayed'"),
        ("hi", {"position_decay": float("nan")}, "position_decay must be a finite number"),
        ("hi", {"stepz": 4}, "unknown sampler options"),
        ("hi", {"steps": None}, r"steps cannot be None; leave the option out .* \(steps=16\)"),
        ("hi", {"max_new_tokens": None, "seed": None}, "max_new_tokens and seed cannot be None"),
    ],
)
def test_bad_input_is_a_clear_value_error(engine, conversation, options, message):
    with pytest.raises(ValueError, match=message):
        engine.answer(conversation, **options)
    with pytest.raises(ValueError, match=message):
        engine.stream(conversation, **options)  # raises before the first frame


def test_an_option_passed_is_applied_as_given_and_one_left_out_keeps_the_default():
    """None is a value: it switches an optional setting off even where the checkpoint
    turns it on; only an option left out means "the checkpoint's default"."""
    checkpoint = SamplerConfig(
        steps=12,
        max_new_tokens=40,
        block_length=8,
        threshold=0.9,
        padding_threshold=0.9,
        canvas_cache="delayed",
        canvas_refresh=4,
    )
    engine = Engine.random(tiny_config(), seed=0, sampler=checkpoint)
    assert engine.sampler_config() == checkpoint
    assert engine.sampler_config(steps=6) == dataclasses.replace(checkpoint, steps=6)
    off = dict(block_length=None, threshold=None, padding_threshold=None, canvas_refresh=None)
    assert engine.sampler_config(**off) == dataclasses.replace(checkpoint, **off)
    assert set(off) == OPTIONAL_SETTINGS


def test_switching_a_checkpoint_default_off_takes_effect(trained_engine):
    """A checkpoint that finishes early on confident predictions spends its whole step
    budget when the call passes threshold=None."""
    checkpoint = SamplerConfig(steps=12, max_new_tokens=MEMORISED_REPLY_TOKENS, threshold=0.5)
    engine = Engine(trained_engine.model, trained_engine.tokenizer, checkpoint)
    early = [engine.answer(example.conversation).forward_passes for example in MEMORISED]
    full = [engine.answer(e.conversation, threshold=None).forward_passes for e in MEMORISED]
    assert sum(early) < sum(full) == 12 * len(MEMORISED)
