"""Shared fixtures: real speech, real models, a real virtual sound server.

Speech is made with espeak-ng (``-v en-us -s 130``) and sox; models are the bundled
Whisper tiny.en and Piper en_US-joe-medium; devices are PortAudio devices on a PulseAudio
server started here with a null sink (the speaker) and a FIFO pipe-source (the
microphone), stopped by its process id.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from benchmarks.pulse import PulseServer, running_pulse

# A suite started in the background by a non-interactive shell (`nohup pytest &`) inherits
# SIGINT ignored, and so would every program it starts: the tests that press Ctrl-C need it
# delivered, as in a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

RATE = 16000

# One torch thread, here and in the processes the tests start (unless the caller chose):
# the tests' models are small, and with a thread per core every small kernel waits for a
# thread that another process has preempted. On this 2-core machine, with other work on
# it, the engine tests' 300 training steps took 86 s on 2 threads and 5 s on 1. Nothing
# a test checks depends on the thread count. Torch is first imported after this line.
os.environ.setdefault("OMP_NUM_THREADS", "1")


def _require(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is missing: apt-get install {package} (see .ci/run)")
    return path


@pytest.fixture(scope="session")
def espeak():
    """``espeak(text) -> 16 kHz mono float32`` speech, cut to the spoken part."""
    from quicksilver.audio.synthetic_speech import espeak as say
    from quicksilver.audio.synthetic_speech import trim

    _require("espeak-ng", "espeak-ng")
    _require("sox", "sox")
    cache: dict[str, np.ndarray] = {}

    def make(text: str) -> np.ndarray:
        if text not in cache:
            cache[text] = trim(say(text, "en-us", 130))
        return cache[text].copy()

    return make


def silence(seconds: float) -> np.ndarray:
    return np.zeros(round(seconds * RATE), dtype=np.float32)


def digits_in(text: str) -> set[str]:
    return set(re.findall(r"\d+", text))


@pytest.fixture(scope="session")
def transcriber():
    from quicksilver.audio.stt import Transcriber

    return Transcriber()


@pytest.fixture(scope="session")
def voice():
    from quicksilver.audio.tts import Voice

    return Voice()


# ------------------------------------------------------------------ virtual sound server


@pytest.fixture(scope="session")
def pulse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulseServer]:
    """The virtual sound server (``benchmarks/pulse.py``); PortAudio in this process
    talks to it."""
    _require("pulseaudio", "pulseaudio")
    _require("pactl", "pulseaudio-utils")
    with running_pulse(tmp_path_factory.mktemp("pulse")) as server:
        yield server


# ------------------------------------------------------------------ the shipped model


@pytest.fixture(scope="session")
def reasoner():
    """The shipped reasoning model, loaded once for the whole run."""
    from quicksilver.engine import Engine

    return Engine.load("bundled", device="cpu")


@pytest.fixture(scope="session")
def silent_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real tiny checkpoint trained to reply with nothing at all: no reasoning, no words.

    It stands for a model that settles its whole canvas as padding, which the shipped one
    does on some questions it cannot work out.
    """
    from quicksilver.engine import Engine, ModelConfig
    from quicksilver.engine.train import Example, TrainConfig, train

    config = ModelConfig(vocab_size=272, d_model=32, n_layers=1, n_heads=2, max_seq_len=96)
    engine = Engine.random(config, seed=0)
    questions = ["hello", "what is 2 plus 2", "tell me 187 divided by 11", "spell cat"]
    examples = [Example(question, "", "") for question in questions]
    train(engine, examples, TrainConfig(steps=40, batch_size=8, lr=1e-2, warmup_steps=5,
                                        reply_length=16, progress=False))  # fmt: skip
    return engine.save(tmp_path_factory.mktemp("silent"))
