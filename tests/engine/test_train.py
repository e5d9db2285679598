"""The masked-diffusion objective really trains a model, and training resumes exactly."""

from __future__ import annotations

import pytest
import torch

from engine import Engine
from engine.train import EncodedData, Example, TrainConfig, train

from .conftest import MEMORISED, MEMORISED_REPLY_TOKENS, tiny_config


def test_training_drives_the_loss_down(trained):
    _, result = trained
    first, last = sum(result.losses[:10]) / 10, sum(result.losses[-20:]) / 20
    assert len(result.losses) == result.steps == 300
    assert last < 0.05 * first


@pytest.mark.parametrize("steps", [8, 16])
def test_trained_model_reproduces_the_memorised_answers(trained_engine, steps):
    for example in MEMORISED:
        answer = trained_engine.answer(
            example.conversation, steps=steps, max_new_tokens=MEMORISED_REPLY_TOKENS
        )
        assert (answer.thinking, answer.text) == (example.thinking, example.answer)


def test_untrained_model_does_not_know_them():
    engine = Engine.random(tiny_config(prompt_sees_reply=False, max_seq_len=128), seed=0)
    hits = sum(
        engine.answer(e.conversation, steps=8, max_new_tokens=MEMORISED_REPLY_TOKENS).text
        == e.answer
        for e in MEMORISED
    )
    assert hits == 0


def small_run(out_dir, **options) -> TrainConfig:
    settings = dict(steps=30, batch_size=8, lr=3e-3, warmup_steps=5, progress=False)
    return TrainConfig(out_dir=str(out_dir), **(settings | options))


def test_a_run_split_in_three_equals_one_long_run(tmp_path):
    whole = Engine.random(tiny_config(max_seq_len=128), seed=1)
    straight = train(whole, MEMORISED, small_run(tmp_path / "straight"))

    split = Engine.random(tiny_config(max_seq_len=128), seed=1)
    first = train(split, MEMORISED, small_run(tmp_path / "split", stop_after=12))
    assert (first.first_step, first.steps) == (0, 12)
    # Each later call starts from the saved state, even in a freshly built engine.
    second_engine = Engine.random(tiny_config(max_seq_len=128), seed=99)
    second = train(second_engine, MEMORISED, small_run(tmp_path / "split", stop_after=10))
    assert (second.first_step, second.steps) == (12, 22)
    third = train(second_engine, MEMORISED, small_run(tmp_path / "split"))
    assert (third.first_step, third.steps) == (22, 30)

    losses = first.losses + second.losses + third.losses
    assert losses == pytest.approx(straight.losses, rel=1e-4)
    for name, tensor in whole.model.state_dict().items():
        torch.testing.assert_close(
            second_engine.model.state_dict()[name], tensor, rtol=1e-4, atol=1e-5
        )


def test_a_finished_run_resumes_to_nothing(tmp_path):
    engine = Engine.random(tiny_config(max_seq_len=128), seed=1)
    train(engine, MEMORISED, small_run(tmp_path, steps=5))
    again = train(engine, MEMORISED, small_run(tmp_path, steps=5))
    assert (again.first_step, again.steps, again.losses) == (5, 5, [])


def test_checkpoint_written_by_training_loads_and_answers(tmp_path, trained_engine):
    engine = Engine.random(tiny_config(prompt_sees_reply=False, max_seq_len=128), seed=0)
    config = TrainConfig(
        steps=20,
        batch_size=8,
        out_dir=str(tmp_path / "run"),
        progress=False,
        reply_length=MEMORISED_REPLY_TOKENS,
        checkpoint_dtype="float16",
    )
    result = train(engine, MEMORISED, config)
    assert result.checkpoint == tmp_path / "run"
    loaded = Engine.load(result.checkpoint)
    question = MEMORISED[0].conversation
    assert loaded.answer(question, steps=8).canvas_tokens == engine.sampler.max_new_tokens


def test_a_reply_longer_than_the_canvas_is_refused():
    engine = Engine.random(tiny_config(max_seq_len=128), seed=0)
    with pytest.raises(ValueError, match="raise reply_length"):
        train(engine, [Example("q", "a long answer")], TrainConfig(steps=1, reply_length=4))


def test_no_examples_is_refused():
    engine = Engine.random(tiny_config(), seed=0)
    with pytest.raises(ValueError, match="no training examples"):
        train(engine, [], TrainConfig(steps=1))


def test_bucketed_batches_hide_the_reply_length_in_their_width():
    """Short replies must also meet the full canvas, or the model learns the length
    from the width and writes garbage into the full canvas it is given at inference."""
    engine = Engine.random(tiny_config(max_seq_len=128), seed=0)
    short = [Example(f"q{i}", "ok", "") for i in range(256)]
    long = [Example(f"q{i}", "a much longer answer " * 3, "") for i in range(64)]
    data = EncodedData.build(engine, short + long, reply_length=80)
    widths = {"short": [], "long": []}
    for step in range(200):
        generator = torch.Generator().manual_seed(step)
        tokens, prompt_lens = data.sample(16, generator, bucketed=True)
        kind = "short" if int((tokens != engine.tokenizer.end_id).sum(1).max()) < 20 else "long"
        widths[kind].append(tokens.shape[1] - int(prompt_lens.max()))
    assert min(widths["short"]) < 10 and max(widths["short"]) > 70
    assert any(30 <= width <= 60 for width in widths["short"])  # any width, not two modes
    assert min(widths["long"]) >= 60 and max(widths["long"]) > 70
