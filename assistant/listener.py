"""The ear of a session: a thread that reads microphone frames and runs voice activity.

Only the cheap work happens here (Silero VAD, one frame at a time), so endpoints are
seen on time even while Whisper or the engine keep the CPU busy; what the VAD decides
is posted to the session's event loop as small signals. Times are ``perf_counter``
seconds, mapped from the stream's clock at the moment each frame was read.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from quicksilver.audio.devices import AudioDeviceError
from quicksilver.audio.streaming import PartialSchedule
from quicksilver.audio.vad import SAMPLE_RATE, SpeechEnd, SpeechStart, VoiceActivity


class FrameSource(Protocol):
    """Where 16 kHz mono float32 frames come from (``audio.Microphone`` is one). A
    source fed from elsewhere (a websocket client) may return an empty frame when
    nothing came for a while, so the ear can act on verdicts meanwhile."""

    def read(self) -> np.ndarray: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class ListenConfig:
    """When the ear reports what it hears."""

    speculative_ms: int | None = 50  # silence that starts an answer early; None: never
    partial_interval_s: float | None = 0.5  # speech between partial transcripts; None: none
    min_partial_audio_s: float = 0.6
    level_interval_s: float = 0.1  # how often the loudness is reported


@dataclass(frozen=True)
class Level:
    rms: float
    speech_probability: float


@dataclass(frozen=True)
class Began:
    """Speech confirmed (after the VAD's minimum speech)."""


@dataclass(frozen=True)
class Growing:
    """The open utterance so far, for a partial transcript."""

    audio: np.ndarray


@dataclass(frozen=True)
class Paused:
    """The speaker has been silent for ``speculative_ms``: the utterance may be over.
    ``pause`` numbers the pauses, for :meth:`Listener.end_pause` and
    :meth:`Listener.limit_pause`."""

    audio: np.ndarray
    silence_began: float  # wall time the silence began
    pause: int = 0


@dataclass(frozen=True)
class Resumed:
    """Speech came back after a :class:`Paused`: the utterance goes on."""


@dataclass(frozen=True)
class Ended:
    """The endpoint: the hang-over of silence confirmed the end of the utterance."""

    end: SpeechEnd
    speech_ended: float  # wall time of the end of speech
    detected: float  # wall time the endpoint was decided


@dataclass(frozen=True)
class Held:
    """Push-to-talk released: everything heard while the key was down."""

    audio: np.ndarray
    released: float  # wall time the key went up


@dataclass(frozen=True)
class Failed:
    """The source stopped delivering audio; the ear has stopped."""

    error: Exception


Signal = Level | Began | Growing | Paused | Resumed | Ended | Held | Failed


class Listener:
    """Reads ``source`` in a thread and posts :data:`Signal` s to ``inbox`` on ``loop``.

    While :attr:`gated` (the assistant is talking through loudspeakers) or :attr:`muted`
    (the user said so) is set, frames are read and thrown away; when both are clear
    again, the VAD starts afresh. Between :meth:`hold` and :meth:`release` (push-to-talk)
    every frame is kept, whatever the gate, and posted as one :class:`Held` utterance.
    """

    def __init__(
        self,
        source: FrameSource,
        vad: VoiceActivity,
        inbox: asyncio.Queue[Signal],
        loop: asyncio.AbstractEventLoop,
        config: ListenConfig | None = None,
    ) -> None:
        self.source = source
        self.vad = vad
        self.config = config or ListenConfig()
        self._verdicts: queue.SimpleQueue[tuple[int, int | None]] = queue.SimpleQueue()
        self.gated = False
        self.muted = False
        self._holding = False
        self._inbox = inbox
        self._loop = loop
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="quicksilver-ear", daemon=True)

    def start(self) -> None:
        self.vad.reset()
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop reading; the caller closes the source, which unblocks a pending read."""
        self._stopping.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def hold(self) -> None:
        """Keep every frame from now on (the talk key went down)."""
        self._holding = True

    def release(self) -> None:
        """Post what was kept since :meth:`hold` as a :class:`Held` (the key went up)."""
        self._holding = False

    def end_pause(self, pause: int) -> None:
        """The session has ended the utterance at ``pause`` (judged finished): close
        it, if that pause is still going on, without an :class:`Ended` (from any
        thread). Speech after it is a new utterance."""
        self._verdicts.put((pause, None))

    def limit_pause(self, pause: int, hangover_ms: int) -> None:
        """Let ``pause`` end the utterance after ``hangover_ms`` of silence in all."""
        self._verdicts.put((pause, hangover_ms))

    def _ended(self, end: SpeechEnd, now: float) -> Ended:
        """The endpoint, its times mapped from the stream's clock to the wall clock."""
        return Ended(end, speech_ended=now - (self.vad.time_s - end.end_s), detected=now)

    def _post(self, signal: Signal) -> None:
        try:
            self._loop.call_soon_threadsafe(self._inbox.put_nowait, signal)
        except RuntimeError:  # the loop is closed: the session is over
            self._stopping.set()

    def _run(self) -> None:
        vad = self.vad
        partials = PartialSchedule(self.config.partial_interval_s, self.config.min_partial_audio_s)
        was_gated = False
        pause_from: float | None = None  # stream time the current silence began
        paused = False
        pauses = 0  # Paused signals so far: the number of the latest
        last_level = 0.0
        held: list[np.ndarray] | None = None
        while not self._stopping.is_set():
            try:
                frame = self.source.read()
            except AudioDeviceError as error:
                if not self._stopping.is_set():
                    self._post(Failed(error))
                return
            now = time.perf_counter()
            config = self.config  # a settings update may replace it between frames
            if self._holding:
                held = held if held is not None else []
                held.append(frame)
                was_gated = True  # the VAD starts afresh after the key goes up
                continue
            if held is not None:
                self._post(Held(np.concatenate(held), released=now))
                held = None
            if self.gated or self.muted:
                was_gated = True
                continue
            if was_gated:
                was_gated, pause_from, paused = False, None, False
                vad.reset()
                last_level = 0.0
                partials.restart(vad)
            for event in vad.process(frame):
                if isinstance(event, SpeechStart):
                    partials.restart(vad)
                    self._post(Began())
                elif isinstance(event, SpeechEnd):
                    pause_from, paused = None, False
                    self._post(self._ended(event, now))
            while not self._verdicts.empty():
                pause, hangover_ms = self._verdicts.get()
                if pause != pauses or not (paused and vad.in_pause):
                    continue  # about a pause that is over
                if hangover_ms is None:  # the session has ended the utterance itself
                    vad.flush()
                    pause_from, paused = None, False
                    continue
                for event in vad.limit_pause(hangover_ms):
                    pause_from, paused = None, False
                    self._post(self._ended(event, now))
            if vad.in_pause:
                if pause_from is None:
                    pause_from = vad.time_s - frame.size / SAMPLE_RATE
                silent_s = vad.time_s - pause_from
                if (
                    not paused
                    and config.speculative_ms is not None
                    and silent_s * 1000 >= config.speculative_ms
                ):
                    paused, pauses = True, pauses + 1
                    self._post(Paused(vad.utterance_audio(), now - silent_s, pauses))
            elif vad.in_speech:
                if paused:
                    self._post(Resumed())
                pause_from, paused = None, False
                audio = partials.due(vad)
                if audio is not None:
                    self._post(Growing(audio))
            if vad.time_s - last_level >= config.level_interval_s:
                last_level = vad.time_s
                rms = float(np.sqrt(np.mean(np.square(frame)))) if frame.size else 0.0
                self._post(Level(rms, vad.probability))
