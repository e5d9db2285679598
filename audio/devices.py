"""Microphone and speaker on PortAudio (sounddevice), and device listing.

The stream callbacks only copy blocks in or out of thread-safe buffers; resampling,
framing and everything else happen in the caller's thread. Every PortAudio problem
(library missing, no device, device gone) becomes an :class:`AudioDeviceError` whose
message says what to do.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass
from types import ModuleType
from typing import Literal

import numpy as np
from quicksilver.audio.resample import Resampler

Kind = Literal["input", "output"]
log = logging.getLogger(__name__)


class AudioDeviceError(RuntimeError):
    """A sound device problem; the message says what to do."""


def _sd() -> ModuleType:
    """Import sounddevice, turning a missing PortAudio into an actionable error."""
    try:
        import sounddevice
    except OSError as error:  # raised at import when libportaudio cannot be loaded
        raise AudioDeviceError(
            f"PortAudio could not be loaded ({error}): install it, e.g. "
            "`sudo apt-get install libportaudio2` (Debian/Ubuntu), `brew install portaudio` "
            "(macOS)"
        ) from error
    return sounddevice


@dataclass(frozen=True)
class DeviceInfo:
    """One PortAudio device as the user sees it."""

    index: int
    name: str
    hostapi: str
    input_channels: int
    output_channels: int
    default_rate: float
    is_default_input: bool
    is_default_output: bool


def list_devices() -> list[DeviceInfo]:
    """All PortAudio devices (empty when there is no sound server or card)."""
    sd = _sd()
    try:
        devices = sd.query_devices()
        hostapis = sd.query_hostapis()
        default_in, default_out = sd.default.device
    except sd.PortAudioError as error:
        raise AudioDeviceError(f"could not list sound devices: {error}") from error
    if default_in is None or default_in < 0:
        default_in = next((h["default_input_device"] for h in hostapis), -1)
    if default_out is None or default_out < 0:
        default_out = next((h["default_output_device"] for h in hostapis), -1)
    return [
        DeviceInfo(
            index=d["index"],
            name=d["name"],
            hostapi=hostapis[d["hostapi"]]["name"],
            input_channels=d["max_input_channels"],
            output_channels=d["max_output_channels"],
            default_rate=float(d["default_samplerate"]),
            is_default_input=d["index"] == default_in,
            is_default_output=d["index"] == default_out,
        )
        for d in devices
    ]


def find_device(spec: int | str | None, kind: Kind) -> DeviceInfo:
    """The device to use: by index, by (case-insensitive) name substring, or the default."""
    devices = list_devices()
    channels = "input_channels" if kind == "input" else "output_channels"
    usable = [d for d in devices if getattr(d, channels) > 0]
    if not usable:
        raise AudioDeviceError(
            f"no {kind} device found: connect a "
            f"{'microphone' if kind == 'input' else 'speaker or headphones'}, or check that "
            "the sound server (PulseAudio/PipeWire) is running; `quicksilver devices` lists "
            "what PortAudio sees"
        )
    if spec is None or spec == "":
        default = next((d for d in usable if getattr(d, f"is_default_{kind}")), None)
        return default or usable[0]
    if isinstance(spec, int) or str(spec).isdigit():
        index = int(spec)
        match = next((d for d in usable if d.index == index), None)
        if match is None:
            raise AudioDeviceError(
                f"there is no {kind} device with index {index}; run `quicksilver devices` "
                "to see the indices"
            )
        return match
    matches = [d for d in usable if str(spec).lower() in d.name.lower()]
    if not matches:
        names = ", ".join(repr(d.name) for d in usable)
        raise AudioDeviceError(f"no {kind} device name contains {spec!r}; available: {names}")
    exact = [d for d in matches if d.name.lower() == str(spec).lower()]
    return (exact or matches)[0]


def _open_rate(sd: ModuleType, device: DeviceInfo, rate: int, kind: Kind) -> int:
    """``rate`` if the device accepts it, else the device's own default rate."""
    check = sd.check_input_settings if kind == "input" else sd.check_output_settings
    try:
        check(device=device.index, samplerate=rate, channels=1, dtype="float32")
        return rate
    except Exception:  # PortAudioError or ValueError: "invalid sample rate"
        return int(device.default_rate)


class Microphone:
    """Mono float32 frames at ``sample_rate`` from an input device.

    Frames are ``frame_samples`` long (default 512 = 32 ms at 16 kHz, Silero's size).
    If the device does not offer ``sample_rate`` (many offer only 44.1/48 kHz) it runs at
    its own rate and the audio is resampled in :meth:`read`, not in the callback.
    """

    def __init__(
        self,
        device: int | str | None = None,
        *,
        sample_rate: int = 16000,
        frame_samples: int = 512,
        max_buffer_s: float = 10.0,
        stall_timeout_s: float = 2.0,
        device_rate: int | None = None,
    ) -> None:
        self._sd = _sd()
        self.device = find_device(device, "input")
        self.sample_rate = sample_rate
        self.frame_samples = frame_samples
        self.stall_timeout_s = stall_timeout_s
        # device_rate forces the device's rate (for devices that misreport what they accept)
        self.device_rate = device_rate or _open_rate(self._sd, self.device, sample_rate, "input")
        self._resampler = Resampler(self.device_rate, sample_rate)
        block = max(1, round(self.device_rate * 0.02))  # 20 ms device blocks
        self._blocks: queue.Queue[np.ndarray] = queue.Queue(
            maxsize=max(1, int(max_buffer_s / 0.02))
        )
        self._pending = np.zeros(0, dtype=np.float32)
        self._finished = threading.Event()
        self.overflows = 0  # blocks dropped because the reader fell behind
        self.dropouts = 0  # callbacks that reported an input overflow in PortAudio
        try:
            self._stream = self._sd.InputStream(
                device=self.device.index,
                samplerate=self.device_rate,
                channels=1,
                dtype="float32",
                blocksize=block,
                callback=self._callback,
                finished_callback=self._finished.set,
            )
            self._stream.start()
        except Exception as error:
            raise AudioDeviceError(
                f"could not open the microphone {self.device.name!r}: {error}; check that it is "
                "connected and not used exclusively by another program"
            ) from error

    def _callback(self, indata: np.ndarray, frames: int, time_info: object, status) -> None:
        if status.input_overflow:
            self.dropouts += 1
        block = indata[:, 0].copy()
        try:
            self._blocks.put_nowait(block)
        except queue.Full:  # the reader is too slow: drop the oldest audio, keep the newest
            self.overflows += 1
            with contextlib.suppress(queue.Empty):
                self._blocks.get_nowait()
            self._blocks.put_nowait(block)

    def read(self) -> np.ndarray:
        """The next frame; raises :class:`AudioDeviceError` if the device stops delivering."""
        while self._pending.size < self.frame_samples:
            self._pending = np.concatenate([self._pending, self._resampler.process(self._next())])
        frame, self._pending = (
            self._pending[: self.frame_samples],
            self._pending[self.frame_samples :],
        )
        return frame

    def _next(self) -> np.ndarray:
        deadline = time.monotonic() + self.stall_timeout_s
        while True:
            try:
                return self._blocks.get(timeout=0.05)
            except queue.Empty:
                if self._finished.is_set():
                    raise AudioDeviceError(
                        f"the microphone {self.device.name!r} stopped (unplugged, or the sound "
                        "server went away); reconnect it and start listening again"
                    ) from None
                if time.monotonic() > deadline:
                    raise AudioDeviceError(
                        f"the microphone {self.device.name!r} delivered no audio for "
                        f"{self.stall_timeout_s:g} s; check that it is connected and not muted"
                    ) from None

    def __iter__(self) -> Microphone:
        return self

    def __next__(self) -> np.ndarray:
        return self.read()

    def close(self) -> None:
        """Stop at once: ``abort`` does not wait for a device that may be gone."""
        try:
            self._stream.abort()
        finally:
            self._stream.close()

    def __enter__(self) -> Microphone:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


HANDOVER_HISTORY = 256  # output callbacks remembered: 5 s of 20 ms blocks, above any latency


class Speaker:
    """Plays chunks of mono float32 audio as they come; ``stop()`` cuts at once.

    Chunks at ``sample_rate`` are queued with :meth:`play`; the output callback copies
    20 ms blocks from that queue. Stopping drops the queue and aborts the stream, which
    discards what the device still buffers, then opens a fresh one (about 20 ms): nothing
    already handed over keeps sounding. Each callback's time and sample count is noted, so
    :attr:`played_s` tells what has actually left the speaker (handed over more than
    the device latency ago), which is what barge-in keeps as heard.
    """

    def __init__(
        self,
        device: int | str | None = None,
        *,
        sample_rate: int = 22050,
        block_ms: float = 20,
        latency_s: float = 0.1,
    ) -> None:
        self._sd = _sd()
        self.device = find_device(device, "output")
        self.sample_rate = sample_rate
        self.device_rate = _open_rate(self._sd, self.device, sample_rate, "output")
        self._resampler = Resampler(sample_rate, self.device_rate)
        self._chunks: deque[np.ndarray] = deque()
        self._offset = 0  # position in the first queued chunk
        self._lock = threading.Lock()
        self._played_device = 0  # device-rate samples handed to PortAudio
        # (callback time, samples handed before it, samples it handed), for played_s
        self._handovers: deque[tuple[float, int, int]] = deque(maxlen=HANDOVER_HISTORY)
        self._drained = threading.Event()
        self._drained.set()
        self._finished = threading.Event()
        self._restarting = False  # stop() aborts on purpose: not a vanished device
        self._block = max(1, round(self.device_rate * block_ms / 1000))
        self._latency_s = latency_s
        self._stream = self._open_stream()

    def _open_stream(self):  # -> sounddevice.OutputStream, started
        try:
            stream = self._sd.OutputStream(
                device=self.device.index,
                samplerate=self.device_rate,
                channels=1,
                dtype="float32",
                blocksize=self._block,
                latency=self._latency_s,
                callback=self._callback,
                finished_callback=self._on_finished,
            )
            stream.start()
        except Exception as error:
            raise AudioDeviceError(
                f"could not open the speaker {self.device.name!r}: {error}; check that it is "
                "connected and not used exclusively by another program"
            ) from error
        return stream

    def _callback(self, outdata: np.ndarray, frames: int, time_info: object, status) -> None:
        out = outdata[:, 0]
        filled = 0
        with self._lock:
            while filled < frames and self._chunks:
                chunk = self._chunks[0]
                take = min(frames - filled, chunk.size - self._offset)
                out[filled : filled + take] = chunk[self._offset : self._offset + take]
                filled += take
                self._offset += take
                if self._offset >= chunk.size:
                    self._chunks.popleft()
                    self._offset = 0
            self._handovers.append((time.monotonic(), self._played_device, filled))
            self._played_device += filled
            if not self._chunks:
                self._drained.set()
        out[filled:] = 0.0

    def play(self, samples: np.ndarray) -> None:
        """Queue a chunk at ``sample_rate``; returns at once."""
        if self._finished.is_set():
            raise AudioDeviceError(
                f"the speaker {self.device.name!r} stopped (unplugged, or the sound server went "
                "away); reconnect it and try again"
            )
        chunk = self._resampler.process(np.asarray(samples, dtype=np.float32).reshape(-1))
        if chunk.size == 0:
            return
        with self._lock:
            self._chunks.append(np.clip(chunk, -1.0, 1.0))
            self._drained.clear()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until everything queued was handed to the device; False on timeout."""
        drained = self._drained.wait(timeout)
        if drained:  # let the device play its own buffer out
            time.sleep(min(float(self._stream.latency), 0.5))
        return drained

    def _on_finished(self) -> None:
        if not self._restarting:
            self._finished.set()

    @property
    def played_s(self) -> float:
        """Seconds of audio heard since the speaker opened (or last stop).

        That is what was handed to the device, less what its buffer still holds: a block
        handed over at time t starts sounding at t + the stream's output latency.
        """
        with self._lock:
            return self._heard_samples(time.monotonic()) / self.device_rate

    def _heard_samples(self, now: float) -> int:
        sounding_since = now - float(self._stream.latency)
        heard = self._handovers[0][1] if self._handovers else self._played_device
        for handed_at, before, count in self._handovers:
            if handed_at > sounding_since:
                break
            heard = before + min(count, int((sounding_since - handed_at) * self.device_rate))
        return heard

    @property
    def busy(self) -> bool:
        return not self._drained.is_set()

    def stop(self) -> float:
        """Silence the speaker now; return the seconds that were heard."""
        with self._lock:
            self._chunks.clear()
            self._offset = 0
            heard = self._heard_samples(time.monotonic())
            buffered = self._played_device > heard
            self._played_device = 0
            self._handovers.clear()
            self._drained.set()
        if buffered:  # abort() drops the device buffer that would keep playing
            self._restarting = True
            try:
                self._stream.abort()
                self._stream.close()
                self._stream = self._open_stream()
            except Exception:  # the device went away: the next play() says so
                log.warning("the speaker %r could not be reopened", self.device.name)
                self._finished.set()
            finally:
                self._restarting = False
        return heard / self.device_rate

    def close(self) -> None:
        try:
            self._stream.abort()
        finally:
            self._stream.close()

    def __enter__(self) -> Speaker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
