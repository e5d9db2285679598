"""Small real engines shared by the engine tests."""

from __future__ import annotations

import os
import traceback

import pytest
import torch
from quicksilver.engine import Engine, ModelConfig
from quicksilver.engine.train import Example, TrainConfig, TrainResult, train
from torch.utils._python_dispatch import TorchDispatchMode

# Sampler settings whose schedule is fixed in advance (no threshold or early finish):
# the cases that batched and compiled answers must reproduce exactly.
PLAIN_SCHEDULES: dict[str, dict] = {
    "plain": {"steps": 8, "max_new_tokens": 32},
    "blocks": {"steps": 12, "max_new_tokens": 48, "block_length": 16},
    "no-cache": {"steps": 8, "max_new_tokens": 32, "prompt_cache": "off"},
    "approximate": {"steps": 8, "max_new_tokens": 32, "block_length": 8,
                    "prompt_cache": "approximate"},
    "margin-decay": {"steps": 8, "max_new_tokens": 32, "confidence": "margin",
                     "position_decay": 0.1},
}  # fmt: skip


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


class HostReads(TorchDispatchMode):
    """Records every operation that would make the host wait for a GPU: a value read
    back (``item``, ``bool``/``int`` of a tensor, ``nonzero``, boolean indexing,
    ``tolist``) or host data copied onto the device (``torch.tensor(list)``). It counts
    on the CPU what ``torch.cuda.set_sync_debug_mode`` reports only on CUDA."""

    SYNCING = frozenset(
        {
            torch.ops.aten.item,
            torch.ops.aten._local_scalar_dense,
            torch.ops.aten.is_nonzero,
            torch.ops.aten.nonzero,
            torch.ops.aten.masked_select,
            torch.ops.aten.lift_fresh,
            torch.ops.aten.equal,
            torch.ops.aten._unique2,
        }
    )

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        indices = args[1] if func.overloadpacket is torch.ops.aten.index else ()
        boolean_index = any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices or ()
        )
        if func.overloadpacket in self.SYNCING or boolean_index:
            self.reads.append(f"{func} at {_caller()}")
        return func(*args, **(kwargs or {}))

    def __enter__(self) -> HostReads:
        self._tolist = torch.Tensor.tolist
        reads, tolist = self.reads, self._tolist

        def counted(tensor: torch.Tensor):
            reads.append(f"Tensor.tolist at {_caller()}")
            return tolist(tensor)

        torch.Tensor.tolist = counted
        return super().__enter__()

    def __exit__(self, *exc) -> None:
        torch.Tensor.tolist = self._tolist
        super().__exit__(*exc)


def _caller() -> str:
    """The innermost engine line on the stack: where a read happened."""
    for frame in reversed(traceback.extract_stack()):
        if f"{os.sep}engine{os.sep}" in frame.filename and "tests" not in frame.filename:
            return f"{os.path.basename(frame.filename)}:{frame.lineno} {frame.line}"
    return "outside the engine"
