"""Continuous batching: conversations come and go while one batch keeps running."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import CancelledError

import pytest
from quicksilver.engine import Engine
from quicksilver.engine.scheduler import Scheduler

from .conftest import MEMORISED, MEMORISED_REPLY_TOKENS, tiny_config

QUESTIONS = ["hi", "what is 17 times 3", "name three colours of the rainbow", "and 4 plus 4?"]
OPTIONS = {"steps": 8, "max_new_tokens": 32}


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine.random(tiny_config(prompt_sees_reply=False), seed=0)


def test_answers_from_many_threads_equal_single_answers(engine):
    """Six conversations from six threads through a batch of three: some wait, rows join
    and leave at different steps, two sampler settings run side by side."""
    conversations = [(q, OPTIONS) for q in QUESTIONS] + [
        (QUESTIONS[1], {"steps": 12, "max_new_tokens": 48, "block_length": 16}),
        (QUESTIONS[2], {**OPTIONS, "canvas_cache": "delayed"}),
    ]
    alone = [engine.answer(q, **options).tokens for q, options in conversations]
    results: dict[int, tuple[int, ...]] = {}
    with Scheduler(engine, max_batch=3) as scheduler:

        def ask(index: int) -> None:
            question, options = conversations[index]
            results[index] = scheduler.submit(question, **options).result(timeout=60).tokens

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(conversations))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    assert [results[i] for i in range(len(conversations))] == alone


def test_an_arrival_mid_run_is_admitted_at_the_next_step_boundary(engine, count_passes):
    scheduler = Scheduler(engine, max_batch=4, start=False)
    counter = count_passes(engine)
    first = scheduler.submit(QUESTIONS[0], **OPTIONS)
    for _ in range(3):
        scheduler.step()
    second = scheduler.submit(QUESTIONS[2], **OPTIONS)  # a longer prompt: the batch widens
    assert scheduler.waiting == 1
    scheduler.step()
    assert scheduler.running == 2 and scheduler.waiting == 0
    assert [f.step for f in drain(first)] == [1, 2, 3, 4]
    assert [f.step for f in drain(second)] == [1]
    while scheduler.step():
        pass
    # One pass a step for both rows: 8 steps for the first, the second 3 behind it.
    assert counter.passes == scheduler.passes == 8 + 3
    assert first.result().tokens == engine.answer(QUESTIONS[0], **OPTIONS).tokens
    assert second.result().tokens == engine.answer(QUESTIONS[2], **OPTIONS).tokens
    assert first.result().forward_passes == second.result().forward_passes == 8


def test_a_cancelled_row_frees_its_slot_at_once(engine):
    scheduler = Scheduler(engine, max_batch=1, start=False)
    first = scheduler.submit(QUESTIONS[1], **OPTIONS)
    second = scheduler.submit(QUESTIONS[3], **OPTIONS)
    scheduler.step()
    scheduler.step()
    assert (scheduler.running, scheduler.waiting) == (1, 1)
    first.cancel()
    scheduler.step()  # the freed row goes to the waiting conversation in this very step
    assert (scheduler.running, scheduler.waiting) == (1, 0)
    assert [f.step for f in drain(second)] == [1]
    assert [f.step for f in first.frames()] == [1, 2]  # and then no more
    assert first.done and first.cancelled
    with pytest.raises(CancelledError):
        first.result()
    while scheduler.step():
        pass
    assert second.result().tokens == engine.answer(QUESTIONS[3], **OPTIONS).tokens


def test_a_waiting_conversation_can_be_cancelled_before_it_runs(engine):
    scheduler = Scheduler(engine, max_batch=1, start=False)
    first, second = (scheduler.submit(q, **OPTIONS) for q in QUESTIONS[:2])
    second.cancel()
    assert scheduler.waiting == 1  # the first only
    while scheduler.step():
        pass
    assert first.result().forward_passes == 8
    assert list(second.frames()) == []


def test_the_batch_is_bounded_and_the_queue_first_come_first_served(engine, count_passes):
    scheduler = Scheduler(engine, max_batch=2, start=False)
    counter = count_passes(engine)
    handles = [scheduler.submit(q, **OPTIONS) for q in [*QUESTIONS, QUESTIONS[0]]]
    biggest, admitted_at, step = 0, {}, 0
    while scheduler.step():
        step += 1
        biggest = max(biggest, scheduler.running)
        for handle in handles:
            if handle.id not in admitted_at and not handle._frames.empty():
                admitted_at[handle.id] = step
    assert biggest == 2
    assert [admitted_at[h.id] for h in handles] == [1, 1, 9, 9, 17]
    assert counter.passes == 8 * 3  # full batches of two, then the fifth alone
    assert all(h.result().forward_passes == 8 for h in handles)


def test_rows_that_finish_early_retire_early(trained_engine):
    scheduler = Scheduler(trained_engine, max_batch=4, start=False)
    options = {"steps": 12, "max_new_tokens": MEMORISED_REPLY_TOKENS, "padding_threshold": 0.9}
    handles = [scheduler.submit(e.conversation, **options) for e in MEMORISED]
    while scheduler.step():
        pass
    alone = [trained_engine.answer(e.conversation, **options) for e in MEMORISED]
    assert [h.result().tokens for h in handles] == [a.tokens for a in alone]
    assert [h.result().forward_passes for h in handles] == [a.forward_passes for a in alone]
    assert scheduler.passes == max(a.forward_passes for a in alone)


def test_frames_and_answers_can_be_awaited(engine):
    async def ask(scheduler: Scheduler) -> tuple[list[int], tuple[int, ...]]:
        handle = scheduler.submit(QUESTIONS[1], **OPTIONS)
        steps = [frame.step async for frame in handle]
        return steps, (await handle.answer()).tokens

    with Scheduler(engine, max_batch=2) as scheduler:
        steps, tokens = asyncio.run(ask(scheduler))
    assert steps == list(range(1, 9))
    assert tokens == engine.answer(QUESTIONS[1], **OPTIONS).tokens


def test_drafts_off_gives_the_answer_frame_only(engine):
    with Scheduler(engine) as scheduler:
        frames = list(scheduler.submit(QUESTIONS[0], drafts=False, **OPTIONS).frames(timeout=60))
    assert len(frames) == 1 and frames[0].answer is not None and frames[0].step == 8


def test_bad_input_raises_at_submit_and_a_closed_scheduler_refuses(engine):
    with pytest.raises(ValueError, match="max_batch must be at least 1"):
        Scheduler(engine, max_batch=0, start=False)
    scheduler = Scheduler(engine, start=False)
    with pytest.raises(ValueError, match="question is empty"):
        scheduler.submit("")
    with pytest.raises(ValueError, match="steps must be at least 1"):
        scheduler.submit("hi", steps=0)
    waiting = scheduler.submit("hi")
    scheduler.close()
    assert waiting.cancelled
    with pytest.raises(RuntimeError, match="scheduler is closed"):
        scheduler.submit("hi")


def drain(handle):
    """The frames a handle holds now, without waiting."""
    frames = []
    while not handle._frames.empty():
        frame = handle._frames.get_nowait()
        if hasattr(frame, "step"):  # not the end marker
            frames.append(frame)
    return frames
