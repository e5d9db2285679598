"""Small real engines shared by the engine tests."""

from __future__ import annotations

import pytest
import torch
from quicksilver.engine import Engine, ModelConfig
from quicksilver.engine.train import Example, TrainConfig, TrainResult, train


def tiny_config(**overrides) -> ModelConfig:
    """A 2-layer model, big enough for the byte-level vocabulary and long canvases."""
    settings = dict(vocab_size=272, d_model=64, n_layers=2, n_heads=4, max_seq_len=1024)
    settings.update(overrides)
    return ModelConfig(**settings)


class PassCounter:
    """Counts real forward passes of a model and the query lengths they ran on."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.query_lengths: list[int] = []
        self._handle = model.register_forward_hook(self._hook)

    def _hook(self, module, args, output) -> None:
        self.query_lengths.append(args[0].shape[1])

    @property
    def passes(self) -> int:
        return len(self.query_lengths)

    def close(self) -> None:
        self._handle.remove()


@pytest.fixture
def count_passes():
    counters: list[PassCounter] = []

    def attach(engine: Engine) -> PassCounter:
        counters.append(PassCounter(engine.model))
        return counters[-1]

    yield attach
    for counter in counters:
        counter.close()


MEMORISED = [
    Example("what is 2 plus 2", "Four.", "2+2=4"),
    Example("hello", "Hi there!", ""),
    Example("name a colour", "Blue.", "the sky"),
    Example("what is 3 times 3", "Nine.", "3*3=9"),
]
MEMORISED_REPLY_TOKENS = 16


@pytest.fixture(scope="session")
def trained() -> tuple[Engine, TrainResult]:
    """A tiny model trained to memorise MEMORISED (prompt isolated: its cache is exact)."""
    engine = Engine.random(tiny_config(prompt_sees_reply=False, max_seq_len=128), seed=0)
    result = train(
        engine,
        MEMORISED,
        TrainConfig(
            steps=300,
            batch_size=16,
            lr=3e-3,
            warmup_steps=20,
            reply_length=MEMORISED_REPLY_TOKENS,
            progress=False,
        ),
    )
    return engine, result


@pytest.fixture(scope="session")
def trained_engine(trained) -> Engine:
    return trained[0]
