"""A private PulseAudio server for the device benchmarks.

A null sink ``vspeaker`` (the speaker; its monitor is recorded) and a FIFO pipe-source
``fifomic`` (the microphone), reached through a unix socket in a temporary folder and
stopped by process id. The tests start theirs in ``tests/conftest.py``; benchmarks do not
import the tests.
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
from pathlib import Path

import numpy as np

CONFIG = """\
load-module module-null-sink sink_name=vspeaker rate=48000
load-module module-native-protocol-unix auth-anonymous=1 socket={root}/native
load-module module-pipe-source source_name=fifomic file={root}/mic.fifo format=s16le rate=16000 channels=1
set-default-sink vspeaker
set-default-source fifomic
"""  # noqa: E501


class Server:
    """A running server; PortAudio in this process talks to it while it runs."""

    def __init__(self, root: Path, process: subprocess.Popen) -> None:
        self.root, self.process = root, process
        self.env = {**os.environ, "PULSE_SERVER": f"unix:{root / 'native'}"}

    def answers(self) -> bool:
        info = subprocess.run(["pactl", "info"], env=self.env, capture_output=True, timeout=10)
        return info.returncode == 0

    def record_speaker(self) -> Recording:
        """Record the null sink's monitor (16 kHz mono) until ``Recording.stop``."""
        command = ["parec", "-d", "vspeaker.monitor", "--rate=16000", "--channels=1",
                   "--format=s16le", "--latency-msec=20"]  # fmt: skip
        return Recording(subprocess.Popen(command, stdout=subprocess.PIPE, env=self.env))

    def feed_mic(self) -> threading.Event:
        """Write silence into the FIFO microphone at real-time pace until the returned
        event is set or the server goes away (a pipe-source without a writer delivers
        nothing)."""
        done = threading.Event()

        def write() -> None:
            block = bytes(640)  # 20 ms of 16-bit mono at 16 kHz
            fd = os.open(self.root / "mic.fifo", os.O_WRONLY)
            try:
                start, blocks = time.monotonic(), 0
                while not done.is_set():
                    os.write(fd, block)
                    blocks += 1
                    time.sleep(max(0.0, start + blocks * 0.02 - time.monotonic()))
            except OSError:
                pass  # the server went away
            finally:
                os.close(fd)

        threading.Thread(target=write, daemon=True).start()
        return done

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


class Recording:
    """A parec process drained by a thread (a pipe holds only about 2 s of audio)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process, self._data = process, bytearray()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while block := self.process.stdout.read1(65536):
            self._data += block

    def stop(self) -> np.ndarray:
        """Everything heard, as float32 at 16 kHz."""
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=10)
        self._thread.join(timeout=10)
        data = bytes(self._data[: len(self._data) // 2 * 2])
        return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768


@contextmanager
def pulse_server() -> Iterator[Server]:
    """Start a server, point ``PULSE_SERVER`` and PortAudio at it, stop it on exit."""
    root = Path(tempfile.mkdtemp(prefix="quicksilver-pulse-"))
    (root / "home").mkdir()
    (root / "runtime").mkdir()
    (root / "default.pa").write_text(CONFIG.format(root=root))
    env = {**os.environ, "HOME": str(root / "home"), "XDG_RUNTIME_DIR": str(root / "runtime")}
    env.pop("PULSE_SERVER", None)
    process = subprocess.Popen(
        ["pulseaudio", "-n", "-F", str(root / "default.pa"), "--daemonize=no",
         "--exit-idle-time=-1", "--disallow-exit", "--use-pid-file=no", "--disable-shm=yes"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    server = Server(root, process)
    previous = os.environ.get("PULSE_SERVER")
    try:
        deadline = time.monotonic() + 20
        while not server.answers():
            if process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("PulseAudio did not start (apt-get install pulseaudio)")
            time.sleep(0.2)
        os.environ["PULSE_SERVER"] = server.env["PULSE_SERVER"]
        refresh_portaudio()
        yield server
    finally:
        server.stop()
        if previous is None:
            os.environ.pop("PULSE_SERVER", None)
        else:
            os.environ["PULSE_SERVER"] = previous


def refresh_portaudio() -> None:
    """Make PortAudio list devices again (it scans once, at initialisation)."""
    sd = sys.modules.get("sounddevice")
    if sd is not None:
        sd._terminate()
        sd._initialize()


def loud_spans(heard: np.ndarray, threshold: float = 0.1) -> list[float]:
    """Seconds of each stretch of sound on a 16 kHz recording, in 10 ms frames."""
    frames = np.abs(heard[: heard.size // 160 * 160]).reshape(-1, 160).max(axis=1) > threshold
    edges = np.flatnonzero(np.diff(np.concatenate([[0], frames.astype(int), [0]])))
    return [(end - start) / 100 for start, end in zip(edges[::2], edges[1::2], strict=True)]
