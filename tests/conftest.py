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
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from quicksilver.audio.wavfile import read_wav

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
def speech_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("speech")


@pytest.fixture(scope="session")
def espeak(speech_dir: Path):
    """``espeak(text) -> 16 kHz mono float32`` speech, cut to the spoken part."""
    espeak_ng = _require("espeak-ng", "espeak-ng")
    sox = _require("sox", "sox")
    cache: dict[str, np.ndarray] = {}

    def make(text: str) -> np.ndarray:
        if text not in cache:
            name = re.sub(r"\W+", "_", text)[:40] + f"_{len(cache)}"
            raw, wav = speech_dir / f"{name}_22k.wav", speech_dir / f"{name}.wav"
            subprocess.run([espeak_ng, "-v", "en-us", "-s", "130", "-w", str(raw), text],
                           check=True, timeout=60)  # fmt: skip
            subprocess.run([sox, str(raw), "-r", str(RATE), "-c", "1", "-b", "16", str(wav)],
                           check=True, timeout=60)  # fmt: skip
            cache[text] = trim(read_wav(wav))
        return cache[text].copy()

    return make


def trim(samples: np.ndarray, level: float = 0.01) -> np.ndarray:
    """Cut leading and trailing silence, so the speech's true extent is known."""
    loud = np.nonzero(np.abs(samples) > level)[0]
    return samples[loud[0] : loud[-1] + 1] if loud.size else samples[:0]


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


@dataclass
class PulseServer:
    """A PulseAudio server with a null sink ``vspeaker`` and a FIFO microphone ``fifomic``."""

    root: Path
    process: subprocess.Popen
    fifo: Path = field(init=False)

    def __post_init__(self) -> None:
        self.fifo = self.root / "mic.fifo"

    @property
    def address(self) -> str:
        return f"unix:{self.root / 'native'}"

    def pactl(self, *args: str) -> str:
        env = {**os.environ, "PULSE_SERVER": self.address}
        result = subprocess.run(["pactl", *args], env=env, capture_output=True, text=True,
                                timeout=10, check=True)  # fmt: skip
        return result.stdout

    def speak_into_mic(self, samples: np.ndarray, lead_s: float = 0.5,
                       tail_s: float = 1.5) -> threading.Thread:  # fmt: skip
        """Write speech into the FIFO at real-time pace, in a background thread."""
        audio = np.concatenate([silence(lead_s), samples, silence(tail_s)])
        pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2").tobytes()

        def write() -> None:
            step = 640  # 20 ms of 16-bit mono
            fd = os.open(self.fifo, os.O_WRONLY)
            try:
                start = time.monotonic()
                for offset in range(0, len(pcm), step):
                    os.write(fd, pcm[offset : offset + step])
                    delay = start + (offset + step) / (2 * RATE) - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
            except OSError:
                pass  # the server went away (the vanishing-device test kills it)
            finally:
                os.close(fd)

        thread = threading.Thread(target=write, daemon=True)
        thread.start()
        return thread

    @contextmanager
    def feeding_mic(self) -> Iterator[MicFeed]:
        """Keep the FIFO microphone delivering (silence, or speech given to ``say``).

        The pipe-source delivers nothing while no writer holds the FIFO, and a microphone
        that delivers nothing for 2 s counts as gone; a conversation needs it open.
        """
        feed = MicFeed(self.fifo)
        try:
            yield feed
        finally:
            feed.close()

    def record_speaker(self) -> subprocess.Popen:
        """Start recording the null sink's monitor (16 kHz mono s16le on stdout)."""
        env = {**os.environ, "PULSE_SERVER": self.address}
        return subprocess.Popen(
            ["parec", "-d", "vspeaker.monitor", "--rate=16000", "--channels=1",
             "--format=s16le", "--latency-msec=20"],
            stdout=subprocess.PIPE, env=env,
        )  # fmt: skip

    def recording_speaker(self) -> Recording:
        """Record the null sink's monitor for as long as needed (drained by a thread)."""
        return Recording(self.record_speaker())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


class MicFeed:
    """Writes the FIFO at real-time pace from a thread: queued speech, else silence."""

    def __init__(self, fifo: Path) -> None:
        self._fifo = fifo
        self._speech: list[np.ndarray] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, daemon=True)
        self._thread.start()

    def say(self, samples: np.ndarray) -> None:
        """Queue speech; it starts after what is already queued."""
        with self._lock:
            self._speech.append(np.asarray(samples, dtype=np.float32))

    def _next_block(self, size: int) -> np.ndarray:
        with self._lock:
            pending = np.concatenate(self._speech) if self._speech else silence(0)
            block, rest = pending[:size], pending[size:]
            self._speech = [rest] if rest.size else []
        return np.pad(block, (0, size - block.size))

    def _write(self) -> None:
        step = RATE // 50  # 20 ms
        fd = os.open(self._fifo, os.O_WRONLY)
        try:
            start, blocks = time.monotonic(), 0
            while not self._stop.is_set():
                block = self._next_block(step)
                os.write(fd, (np.clip(block, -1, 1) * 32767).astype("<i2").tobytes())
                blocks += 1
                delay = start + blocks * step / RATE - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        except OSError:
            pass  # the server went away
        finally:
            os.close(fd)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class Recording:
    """A ``record_speaker`` process whose output a thread keeps reading: a pipe holds
    only about 2 s of 16 kHz audio, and parec drops what does not fit."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self._data = bytearray()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while block := self.process.stdout.read1(65536):
            self._data += block

    def stop(self) -> np.ndarray:
        """Stop recording; everything heard, as float32 at 16 kHz."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=10)
        self._thread.join(timeout=10)
        data = bytes(self._data[: len(self._data) // 2 * 2])
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768


def stop_recording(recorder: subprocess.Popen) -> np.ndarray:
    """Stop a ``record_speaker`` process and return what it heard as float32."""
    recorder.send_signal(signal.SIGTERM)
    out, _ = recorder.communicate(timeout=10)
    return np.frombuffer(out[: len(out) // 2 * 2], dtype="<i2").astype(np.float32) / 32768


def start_pulse(root: Path) -> PulseServer:
    """Start PulseAudio in ``root`` and wait until it answers."""
    _require("pulseaudio", "pulseaudio")
    _require("pactl", "pulseaudio-utils")
    (root / "home").mkdir(parents=True)
    (root / "runtime").mkdir()
    config = root / "default.pa"
    config.write_text(
        "load-module module-null-sink sink_name=vspeaker rate=48000\n"
        f"load-module module-native-protocol-unix auth-anonymous=1 socket={root / 'native'}\n"
        f"load-module module-pipe-source source_name=fifomic file={root / 'mic.fifo'} "
        "format=s16le rate=16000 channels=1\n"
        "set-default-sink vspeaker\n"
        "set-default-source fifomic\n"
    )
    env = {**os.environ, "HOME": str(root / "home"), "XDG_RUNTIME_DIR": str(root / "runtime")}
    env.pop("PULSE_SERVER", None)
    log = (root / "pulse.log").open("w")
    process = subprocess.Popen(
        ["pulseaudio", "-n", "-F", str(config), "--daemonize=no", "--exit-idle-time=-1",
         "--disallow-exit", "--use-pid-file=no", "--disable-shm=yes"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    server = PulseServer(root, process)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"PulseAudio exited: {(root / 'pulse.log').read_text()[-2000:]}")
        try:
            server.pactl("info")
            return server
        except subprocess.SubprocessError:
            time.sleep(0.2)
    server.stop()
    pytest.fail("PulseAudio did not start within 20 s")


def refresh_portaudio() -> None:
    """Make PortAudio list devices again (it scans once, at initialisation)."""
    sd = sys.modules.get("sounddevice")
    if sd is not None:
        sd._terminate()
        sd._initialize()


@contextmanager
def running_pulse(root: Path) -> Iterator[PulseServer]:
    """A PulseAudio server that clients in this process reach, stopped on exit."""
    server = start_pulse(root)
    previous = os.environ.get("PULSE_SERVER")
    os.environ["PULSE_SERVER"] = server.address
    try:
        yield server
    finally:
        server.stop()
        if previous is None:
            os.environ.pop("PULSE_SERVER", None)
        else:
            os.environ["PULSE_SERVER"] = previous


@pytest.fixture(scope="session")
def pulse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PulseServer]:
    """The virtual sound server; PortAudio in this process talks to it."""
    with running_pulse(tmp_path_factory.mktemp("pulse")) as server:
        refresh_portaudio()
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
