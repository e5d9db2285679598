"""A private PulseAudio server: real PortAudio devices on a machine with no sound card.

A null sink ``vspeaker`` (the speaker; its monitor is recorded) and a FIFO pipe-source
``fifomic`` (the microphone, fed speech at real-time pace), reached through a unix
socket in a folder of the caller's and stopped by process id. The device benchmarks and
the tests (``tests/conftest.py``) use this one copy; it imports nothing of either.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

RATE = 16000  # the FIFO microphone's and the recordings' sample rate
CONFIG = """\
load-module module-null-sink sink_name=vspeaker rate=48000
load-module module-native-protocol-unix auth-anonymous=1 socket={root}/native
load-module module-pipe-source source_name=fifomic file={root}/mic.fifo format=s16le rate=16000 channels=1
set-default-sink vspeaker
set-default-source fifomic
"""  # noqa: E501


def pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


@dataclass
class PulseServer:
    """A running server in ``root``."""

    root: Path
    process: subprocess.Popen

    @property
    def address(self) -> str:
        return f"unix:{self.root / 'native'}"

    @property
    def fifo(self) -> Path:
        return self.root / "mic.fifo"

    def pactl(self, *args: str) -> str:
        env = {**os.environ, "PULSE_SERVER": self.address}
        result = subprocess.run(["pactl", *args], env=env, capture_output=True, text=True,
                                timeout=10, check=True)  # fmt: skip
        return result.stdout

    def recording_speaker(self) -> Recording:
        """Record the null sink's monitor (16 kHz mono) until ``Recording.stop``."""
        env = {**os.environ, "PULSE_SERVER": self.address}
        command = ["parec", "-d", "vspeaker.monitor", "--rate=16000", "--channels=1",
                   "--format=s16le", "--latency-msec=20"]  # fmt: skip
        return Recording(subprocess.Popen(command, stdout=subprocess.PIPE, env=env))

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

    def speak_into_mic(
        self, samples: np.ndarray, lead_s: float = 0.5, tail_s: float = 1.5
    ) -> threading.Thread:
        """Write speech, with silence around it, into the FIFO at real-time pace from a
        thread that then closes the FIFO (the microphone then stalls)."""
        lead, tail = np.zeros(round(lead_s * RATE)), np.zeros(round(tail_s * RATE))
        pcm = pcm16(np.concatenate([lead, samples, tail]))

        def write() -> None:
            step = 640  # 20 ms of 16-bit mono
            fd = os.open(self.fifo, os.O_WRONLY)
            try:
                start = time.monotonic()
                for offset in range(0, len(pcm), step):
                    os.write(fd, pcm[offset : offset + step])
                    time.sleep(max(0.0, start + (offset + step) / (2 * RATE) - time.monotonic()))
            except OSError:
                pass  # the server went away (a vanishing-device test kills it)
            finally:
                os.close(fd)

        thread = threading.Thread(target=write, daemon=True)
        thread.start()
        return thread

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
        self._pending = np.zeros(0, np.float32)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, daemon=True)
        self._thread.start()

    def say(self, samples: np.ndarray) -> None:
        """Queue speech; it starts after what is already queued."""
        with self._lock:
            self._pending = np.concatenate([self._pending, np.asarray(samples, np.float32)])

    def _next_block(self, size: int) -> np.ndarray:
        with self._lock:
            block, self._pending = self._pending[:size], self._pending[size:]
        return np.pad(block, (0, size - block.size))

    def _write(self) -> None:
        step = RATE // 50  # 20 ms
        fd = os.open(self._fifo, os.O_WRONLY)
        try:
            start, blocks = time.monotonic(), 0
            while not self._stop.is_set():
                os.write(fd, pcm16(self._next_block(step)))
                blocks += 1
                time.sleep(max(0.0, start + blocks * step / RATE - time.monotonic()))
        except OSError:
            pass  # the server went away
        finally:
            os.close(fd)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class Recording:
    """A parec process drained by a thread: a pipe holds only about 2 s of 16 kHz audio,
    and parec drops what does not fit."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process, self._data = process, bytearray()
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


def start_pulse(root: Path) -> PulseServer:
    """Start PulseAudio in ``root`` (a new folder) and wait until it answers; a
    ``RuntimeError`` with the end of its log when it does not."""
    (root / "home").mkdir(parents=True)
    (root / "runtime").mkdir()
    (root / "default.pa").write_text(CONFIG.format(root=root))
    env = {**os.environ, "HOME": str(root / "home"), "XDG_RUNTIME_DIR": str(root / "runtime")}
    env.pop("PULSE_SERVER", None)
    with (root / "pulse.log").open("w") as log:
        process = subprocess.Popen(
            ["pulseaudio", "-n", "-F", str(root / "default.pa"), "--daemonize=no",
             "--exit-idle-time=-1", "--disallow-exit", "--use-pid-file=no", "--disable-shm=yes"],
            env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = PulseServer(root, process)
    deadline = time.monotonic() + 20
    while process.poll() is None and time.monotonic() < deadline:
        try:
            server.pactl("info")
            return server
        except subprocess.SubprocessError:
            time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"PulseAudio did not start: {(root / 'pulse.log').read_text()[-2000:]}")


def refresh_portaudio() -> None:
    """Make PortAudio list devices again (it scans once, at initialisation)."""
    sd = sys.modules.get("sounddevice")
    if sd is not None:
        sd._terminate()
        sd._initialize()


@contextmanager
def running_pulse(root: Path | None = None) -> Iterator[PulseServer]:
    """A server (in ``root``, else a temporary folder) that PortAudio in this process
    reaches through ``PULSE_SERVER``, stopped on exit."""
    server = start_pulse(root or Path(tempfile.mkdtemp(prefix="quicksilver-pulse-")))
    previous = os.environ.get("PULSE_SERVER")
    os.environ["PULSE_SERVER"] = server.address
    refresh_portaudio()
    try:
        yield server
    finally:
        server.stop()
        if previous is None:
            os.environ.pop("PULSE_SERVER", None)
        else:
            os.environ["PULSE_SERVER"] = previous


def loud_spans(heard: np.ndarray, threshold: float = 0.1) -> list[float]:
    """Seconds of each stretch of sound on a 16 kHz recording, in 10 ms frames."""
    frames = np.abs(heard[: heard.size // 160 * 160]).reshape(-1, 160).max(axis=1) > threshold
    edges = np.flatnonzero(np.diff(np.concatenate([[0], frames.astype(int), [0]])))
    return [(end - start) / 100 for start, end in zip(edges[::2], edges[1::2], strict=True)]
