"""The transformer: options, attention modes and the KV cache."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from quicksilver.engine.model import KVCache, ModelConfig, Scattered, Transformer

from .conftest import tiny_config


def build(config: ModelConfig, seed: int = 0) -> Transformer:
    model = Transformer(config).eval()
    model.init_weights(torch.Generator().manual_seed(seed))
    return model


def tokens(length: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 256, (1, length), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"n_kv_heads": 2},
        {"n_kv_heads": 1, "qkv_bias": True},
        {"qk_norm": True},
        {"tie_embeddings": True},
        {"n_kv_heads": 2, "qkv_bias": True, "qk_norm": True, "tie_embeddings": True},
    ],
)
def test_options_build_run_and_count_their_parameters(options):
    config = tiny_config(**options)
    model = build(config)
    unique = {id(p): p.numel() for p in model.parameters()}
    assert sum(unique.values()) == config.parameter_count()
    logits = model(tokens(12))
    assert logits.shape == (1, 12, config.vocab_size)
    assert torch.isfinite(logits).all()


def test_llada_shape_matches_the_published_size():
    assert 8.0e9 < ModelConfig.llada_8b().parameter_count() < 8.1e9


def test_wide_heads_count_as_qwen3_06b_is_published():
    """Qwen3-0.6B: 0.44B parameters besides its (tied) embedding; its heads are 128 wide,
    twice hidden_size / heads."""
    qwen3 = ModelConfig(
        vocab_size=151_936, d_model=1024, n_layers=28, n_heads=16, n_kv_heads=8,
        head_size=128, mlp_hidden=3072, qk_norm=True, tie_embeddings=True,
    )  # fmt: skip
    embedding = 151_936 * 1024
    assert 0.43e9 < qwen3.parameter_count() - embedding < 0.45e9
    small = dataclasses.replace(qwen3, vocab_size=64, n_layers=1, d_model=32, max_seq_len=16)
    logits = build(small)(torch.randint(64, (1, 5)))
    assert logits.shape == (1, 5, 64) and torch.isfinite(logits).all()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"d_model": 65}, "not divisible by n_heads"),
        ({"n_kv_heads": 3}, "not divisible by n_kv_heads"),
        ({"d_model": 12, "n_heads": 4}, "must be even"),
        ({"head_size": 15}, "head dimension 15 must be even"),
        ({"n_layers": 0}, "n_layers must be at least 1"),
    ],
)
def test_bad_config_is_a_clear_error(options, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**options)


def test_attention_is_bidirectional():
    model = build(tiny_config())
    x = tokens(10)
    changed = x.clone()
    changed[0, -1] = (changed[0, -1] + 1) % 256
    # The first position's prediction depends on a token after it.
    assert not torch.allclose(model(x)[0, 0], model(changed)[0, 0])


@pytest.mark.parametrize("prompt_sees_reply", [True, False])
def test_prompt_isolation(prompt_sees_reply):
    model = build(tiny_config(prompt_sees_reply=prompt_sees_reply))
    x = tokens(16)
    changed = x.clone()
    changed[0, 12:] = (changed[0, 12:] + 1) % 256  # change only the reply (prompt = 10)
    before, after = model(x, prompt_len=10), model(changed, prompt_len=10)
    prompt_unchanged = torch.allclose(before[0, :10], after[0, :10], atol=1e-6)
    assert prompt_unchanged is not prompt_sees_reply
    # Reply positions always see the whole sequence.
    assert not torch.allclose(before[0, 10:12], after[0, 10:12])


def test_per_row_prompt_lengths_match_single_rows():
    model = build(tiny_config(prompt_sees_reply=False))
    batch = torch.cat([tokens(14, seed=1), tokens(14, seed=2)])
    together = model(batch, prompt_len=torch.tensor([5, 9]))
    alone = torch.cat([model(batch[:1], prompt_len=5), model(batch[1:], prompt_len=9)])
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("options", [{}, {"n_kv_heads": 2, "qk_norm": True}])
def test_causal_kv_cache_decoding_matches_a_full_causal_pass(options):
    config = tiny_config(**options)
    model = build(config)
    x = tokens(20)
    full = model(x, causal=True)
    cache = KVCache(config, 1, 20, "cpu", torch.float32)
    steps = [model(x[:, :8], causal=True, cache=cache)]  # prefill
    steps += [model(x[:, i : i + 1], start=i, causal=True, cache=cache) for i in range(8, 14)]
    steps.append(model(x[:, 14:], start=14, causal=True, cache=cache))  # a chunk of 6
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


def test_a_deepened_model_computes_what_it_did_and_its_new_layers_train():
    """Copies of blocks with their output projections zeroed add nothing, on a full pass
    and through the KV cache (each block keeps its own cache slot); the first gradient
    step makes them count."""
    config = tiny_config()
    model = build(config)
    x = tokens(20)
    before = model(x)
    model.deepen([0, 1, 1])
    assert model.config.n_layers == 5 == len(model.blocks)
    assert [block.attn.layer for block in model.blocks] == [0, 1, 2, 3, 4]
    torch.testing.assert_close(model(x), before, atol=1e-6, rtol=1e-6)
    cache = KVCache(model.config, 1, 20, "cpu", torch.float32)
    steps = [model(x[:, :8], causal=True, cache=cache)]
    steps += [model(x[:, i : i + 1], start=i, causal=True, cache=cache) for i in range(8, 20)]
    torch.testing.assert_close(torch.cat(steps, dim=1), model(x, causal=True), atol=1e-5, rtol=1e-5)

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(x).logsumexp(-1).mean().backward()
    optimizer.step()
    assert model.blocks[1].attn.o_proj.weight.abs().sum() > 0  # a copy, no longer silent
    assert not torch.allclose(model(x), before)
    with pytest.raises(ValueError, match=r"blocks are 0\.\.4"):
        model.deepen([5])


def test_exact_prompt_cache_gives_the_same_logits():
    config = tiny_config(prompt_sees_reply=False)
    model = build(config)
    x = tokens(24)
    cache = KVCache(config, 1, 24, "cpu", torch.float32)
    full = model(x, prompt_len=10, cache=cache)
    x[0, 15:] = 7  # the canvas changes between steps; the cached prompt stays valid
    reference = model(x, prompt_len=10)
    from_cache = model(x[:, 10:], start=10, prompt_len=10, cache=cache)
    torch.testing.assert_close(from_cache, reference[:, 10:], atol=1e-5, rtol=1e-5)
    assert not torch.allclose(full[:, 10:], reference[:, 10:])


@pytest.mark.parametrize("prompt_sees_reply", [True, False])
def test_a_scattered_pass_over_unchanged_tokens_matches_the_whole_pass(prompt_sees_reply):
    config = tiny_config(prompt_sees_reply=prompt_sees_reply)
    model = build(config)
    x = tokens(24)
    cache = KVCache(config, 1, 24, "cpu", torch.float32)
    whole = model(x, prompt_len=10, cache=cache)
    positions = torch.tensor([20, 3, 11, 17, 9])  # any order, prompt positions included
    scattered = model(x[:, positions], start=Scattered(positions, 24), prompt_len=10, cache=cache)
    torch.testing.assert_close(scattered, whole[:, positions], atol=1e-5, rtol=1e-5)


def test_a_scattered_pass_writes_its_keys_and_values():
    """In one layer a position's keys/values depend on its own token only, so after a
    scattered pass over the changed positions the cache is exact again."""
    config = tiny_config(n_layers=1, prompt_sees_reply=False)
    model = build(config)
    x = tokens(24)
    cache = KVCache(config, 1, 24, "cpu", torch.float32)
    model(x, prompt_len=10, cache=cache)
    changed = torch.tensor([12, 18, 19])
    x[0, changed] = 5
    model(x[:, changed], start=Scattered(changed, 24), prompt_len=10, cache=cache)
    untouched = torch.tensor([10, 11, 13, 23])  # they read the changed ones from the cache
    from_cache = model(x[:, untouched], start=Scattered(untouched, 24), prompt_len=10, cache=cache)
    reference = model(x, prompt_len=10)[:, untouched]
    torch.testing.assert_close(from_cache, reference, atol=1e-5, rtol=1e-5)


def test_a_scattered_pass_needs_a_cache_no_causal_mask_and_positions_in_its_context():
    model = build(tiny_config())
    where = Scattered(torch.tensor([1, 2]), 4)
    with pytest.raises(ValueError, match="needs a KV cache"):
        model(tokens(2), start=where)
    cache = KVCache(model.config, 1, 4, "cpu", torch.float32)
    with pytest.raises(ValueError, match="bidirectional"):
        model(tokens(2), start=where, causal=True, cache=cache)
    with pytest.raises(ValueError, match="position 3 lies outside the context of 3"):
        model(tokens(2), start=Scattered(torch.tensor([1, 3]), 3), cache=cache)


def test_context_overflow_is_a_clear_error():
    model = build(tiny_config(max_seq_len=16))
    with pytest.raises(ValueError, match="exceeds the model's context of 16"):
        model(tokens(17))
