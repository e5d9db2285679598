"""The masked-diffusion objective really trains a model, and training resumes exactly."""

from __future__ import annotations

import pytest
import torch
from quicksilver.engine import Engine, Tokenizer
from quicksilver.engine.train import (
    EncodedData,
    Example,
    TrainConfig,
    answer_span,
    diffusion_loss,
    learning_rate,
    marker_id,
    noise_mask,
    train,
)

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
        batch = data.sample(16, generator, bucketed=True)
        tokens, prompt_lens = batch.tokens, batch.prompt_lens
        kind = "short" if int((tokens != engine.tokenizer.end_id).sum(1).max()) < 20 else "long"
        widths[kind].append(tokens.shape[1] - int(prompt_lens.max()))
    assert min(widths["short"]) < 10 and max(widths["short"]) > 70
    assert any(30 <= width <= 60 for width in widths["short"])  # any width, not two modes
    assert min(widths["long"]) >= 60 and max(widths["long"]) > 70


def test_suffix_masking_hides_the_reply_from_a_cut_to_its_end():
    """Rows masked from a cut on must predict each token from its left: everything after
    the cut is hidden (so nothing can be copied back from the answer), the padding keeps
    the usual ratio, and the prompt stays clean."""
    engine = Engine.random(tiny_config(max_seq_len=128), seed=0)
    examples = [
        Example(f"question {i}", "an answer of some length " * (1 + i % 3)) for i in range(64)
    ]
    data = EncodedData.build(engine, examples, reply_length=90)
    cuts, padding_masked, padding = [], 0, 0
    for step in range(20):
        batch = data.sample(16, torch.Generator().manual_seed(step), bucketed=False)
        masked, weights = noise_mask(batch, torch.Generator().manual_seed(step), 1.0)
        for row in range(16):
            prompt, end = int(batch.prompt_lens[row]), int(batch.reply_ends[row])
            assert not masked[row, :prompt].any()
            reply = masked[row, prompt:end]
            clean = (~reply).nonzero()
            cut = int(clean[-1]) + 1 if len(clean) else 0
            assert reply[cut:].all() and cut < end - prompt  # at least the last token hidden
            cuts.append(cut / (end - prompt))
            padding_masked += int(masked[row, end:].sum())
            padding += batch.tokens.shape[1] - end
        assert bool((weights[masked] == 1).all())
    assert min(cuts) < 0.2 and max(cuts) > 0.8  # the cut falls anywhere in the reply
    assert 0.2 < padding_masked / padding < 0.8  # padding is not swept into the suffix


def test_without_suffix_masking_the_last_reply_token_is_often_visible():
    """The contrast that makes the test above able to fail: plain uniform masking."""
    engine = Engine.random(tiny_config(max_seq_len=128), seed=0)
    examples = [Example(f"question {i}", "an answer of some length") for i in range(64)]
    data = EncodedData.build(engine, examples, reply_length=40)
    batch = data.sample(256, torch.Generator().manual_seed(0), bucketed=False)
    masked, _ = noise_mask(batch, torch.Generator().manual_seed(0), 0.0)
    last = masked[torch.arange(256), batch.reply_ends - 1].float().mean()
    assert 0.35 < float(last) < 0.65


def test_result_hidden_rows_hide_the_reply_from_its_last_marker_on():
    """A result-hidden row shows no token from its reasoning's last marker to the end of
    its reply, and masks the tokens before it at the row's ratio (some shown, some not);
    a row without the marker is masked as a uniform row."""
    engine = Engine.random(tiny_config(max_seq_len=128), seed=0)
    marker = marker_id(engine, "=")
    examples = [
        Example(f"question {i}", "so it is done", thinking="one two = three four = five six")
        for i in range(48)
    ] + [Example(f"plain {i}", "no marker in this reply at all") for i in range(16)]
    data = EncodedData.build(engine, examples, reply_length=60)
    batch = data.sample(64, torch.Generator().manual_seed(2), bucketed=False)
    masked, weights = noise_mask(batch, torch.Generator().manual_seed(2), 0.0, 1.0, marker)
    before_shown = before_hidden = plain_rows_shown = 0
    for row in range(len(batch.tokens)):
        prompt, end = int(batch.prompt_lens[row]), int(batch.reply_ends[row])
        reply = batch.tokens[row, prompt:end].tolist()
        hidden = masked[row, prompt:end].tolist()
        assert not masked[row, :prompt].any()
        if marker not in reply:
            plain_rows_shown += not hidden[-1]  # uniform: the last token is often shown
            continue
        last = len(reply) - 1 - reply[::-1].index(marker)
        assert all(hidden[last:])
        assert bool((weights[row, prompt + last : end] == 1).all())
        before_shown += hidden[:last].count(False)
        before_hidden += hidden[:last].count(True)
    assert before_shown > 100 and before_hidden > 100
    assert plain_rows_shown > 0
    with pytest.raises(ValueError, match="must be one token"):
        marker_id(engine, "two tokens")
    with pytest.raises(ValueError, match="needs the result_marker"):
        TrainConfig(result_hidden_share=0.5)


def test_result_only_rows_hide_the_result_and_its_repeat_in_the_answer_and_nothing_more():
    """With the answer marker given, a result-hidden row hides its reasoning from the last
    marker to the answer and the result where the answer repeats it; the answer's other
    tokens are masked at the row's ratio, so its copies from the question are still
    learnt with some of the answer shown."""
    engine = Engine.random(tiny_config(max_seq_len=128), seed=0)
    marker, answer_id = marker_id(engine, "="), engine.tokenizer.answer_id
    examples = [
        Example(f"question {i}", "so it is 42 in all", thinking="six times seven = 42")
        for i in range(64)
    ]
    data = EncodedData.build(engine, examples, reply_length=60)
    batch = data.sample(64, torch.Generator().manual_seed(3), bucketed=False)
    masked, weights = noise_mask(
        batch, torch.Generator().manual_seed(3), 0.0, 1.0, marker, answer_id
    )
    result = engine.tokenizer.encode(" 42")
    answer_shown = answer_hidden = 0
    for row in range(len(batch.tokens)):
        prompt, end = int(batch.prompt_lens[row]), int(batch.reply_ends[row])
        reply = batch.tokens[row, prompt:end].tolist()
        hidden = masked[row, prompt:end].tolist()
        mark, answer = reply.index(marker), reply.index(answer_id)
        repeat = next(
            at for at in range(answer + 1, len(reply)) if reply[at : at + len(result)] == result
        )
        assert all(hidden[mark : answer + 1]) and all(hidden[repeat : repeat + len(result)])
        assert bool((weights[row, prompt + repeat : prompt + repeat + len(result)] == 1).all())
        rest = hidden[answer + 1 : repeat] + hidden[repeat + len(result) :]
        answer_shown += rest.count(False)
        answer_hidden += rest.count(True)
    assert answer_shown > 50 and answer_hidden > 50
    whole, _ = noise_mask(batch, torch.Generator().manual_seed(3), 0.0, 1.0, marker)
    assert bool(whole[masked].all()) and int(whole.sum()) > int(masked.sum())


def test_the_answer_weight_scales_the_answers_tokens_and_only_them():
    """The answer span runs from after the marker to the reply's end token; with the same
    noise the loss is linear in the answer weight, and the answer's part is positive, so
    the weight multiplies exactly the answer's tokens."""
    engine = Engine.random(tiny_config(max_seq_len=128), seed=0)
    answer_id, end_id = engine.tokenizer.answer_id, engine.tokenizer.end_id
    examples = [
        Example(f"question {i}", "the answer is here", thinking="some reasoning first")
        for i in range(24)
    ] + [Example(f"plain {i}", "a reply") for i in range(8)]
    data = EncodedData.build(engine, examples, reply_length=40)
    batch = data.sample(32, torch.Generator().manual_seed(4), bucketed=False)
    span = answer_span(batch, answer_id)
    answers = set()
    for thinking, text in (("some reasoning first", "the answer is here"), ("", "a reply")):
        reply = engine.tokenizer.reply_ids(thinking, text)
        answers.add(tuple(reply[reply.index(answer_id) + 1 :]))  # its end token included
    for row in range(len(batch.tokens)):
        picked = tuple(batch.tokens[row][span[row]].tolist())
        assert picked in answers and picked[-1] == end_id
        assert int(span[row].nonzero()[-1]) == int(batch.reply_ends[row]) - 1

    def loss(weight: float) -> float:
        with torch.no_grad():
            noise = torch.Generator().manual_seed(4)
            return float(diffusion_loss(engine, batch, noise, answer_weight=weight))

    one, two, four = loss(1.0), loss(2.0), loss(4.0)
    assert one < two < 2 * one  # the answer's part grows, the reasoning's does not
    assert four - one == pytest.approx(3 * (two - one), rel=1e-4)
    with pytest.raises(ValueError, match="answer_weight must be positive"):
        TrainConfig(answer_weight=0.0)


def test_an_encoded_corpus_survives_saving_and_joins_in_order(tmp_path):
    engine = Engine.random(tiny_config(max_seq_len=128), seed=0)
    examples = [Example(f"question {i}", "an answer " * (1 + i // 10), "why") for i in range(40)]
    whole = EncodedData.build(engine, examples, None)
    parts = [EncodedData.build(engine, examples[i : i + 15], None) for i in (0, 15, 30)]
    assert len({part.reply_length for part in parts}) > 1  # joined on the widest canvas
    joined = EncodedData.concat(parts, engine.tokenizer.end_id)
    joined.save(tmp_path / "corpus.xz", engine)
    loaded = EncodedData.load(tmp_path / "corpus.xz", engine)
    for data in (joined, loaded):
        assert data.reply_length == whole.reply_length
        for name in ("tokens", "prompt_lens", "lengths", "by_length"):
            assert torch.equal(getattr(data, name), getattr(whole, name)), name


def test_an_encoded_corpus_from_another_tokenizer_or_a_broken_file_is_refused(tmp_path):
    engine = Engine.random(tiny_config(max_seq_len=128), seed=0)
    data = EncodedData.build(engine, [Example("q", "a")], None)
    data.save(tmp_path / "corpus.xz", engine)
    words = Tokenizer.word_level([" another", " word"])
    other = Engine.random(
        tiny_config(vocab_size=words.vocab_size, max_seq_len=128), seed=0, tokenizer=words
    )
    with pytest.raises(ValueError, match="another tokenizer"):
        EncodedData.load(tmp_path / "corpus.xz", other)
    (tmp_path / "broken.xz").write_bytes(b"not a corpus")
    with pytest.raises(ValueError, match="not an encoded corpus"):
        EncodedData.load(tmp_path / "broken.xz", engine)


def test_decay_over_the_time_limit_follows_the_clock_not_the_steps():
    config = TrainConfig(
        steps=10**9, lr=1.0, warmup_steps=2, time_limit_s=100.0, decay_over_time_limit=True
    )
    assert learning_rate(config, 0, 0.0) == pytest.approx(0.5)  # warm-up stays in steps
    assert learning_rate(config, 5, 0.0) == pytest.approx(1.0)
    assert learning_rate(config, 5, 50.0) == pytest.approx(0.55)
    assert learning_rate(config, 5, 100.0) == pytest.approx(config.min_lr_ratio)
    with pytest.raises(ValueError, match="needs time_limit_s"):
        TrainConfig(decay_over_time_limit=True)
