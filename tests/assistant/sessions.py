"""Helpers for the session tests: what the shipped model should say, event capture, and
two named fakes for session logic without a sound server.

``EXPECTED`` is the one place to adjust when the shipped model changes: each spoken or
typed question with words, one of which its answer must contain (compared after the
shipped model's normaliser, so "fifty-one" and "51" agree).

``ScriptedMicrophone`` (a fake microphone) delivers 32 ms frames of a script at
real-time pace, silence between; ``ClockedOutput`` (a fake speaker) "plays" what it is
given at real-time pace by the clock, so barge-in, gating and cut-off words behave as
on a device while nothing depends on PulseAudio.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import numpy as np
from quicksilver.assistant.commands import SubmitText
from quicksilver.assistant.config import Settings
from quicksilver.assistant.events import Event
from quicksilver.assistant.factory import Wiring, build_session
from quicksilver.assistant.session import Session
from quicksilver.assistant.transcript import TranscriptLog, TurnRecord
from quicksilver.audio.devices import AudioDeviceError
from quicksilver.audio.vad import FRAME_SAMPLES, SAMPLE_RATE
from quicksilver.models.reasoner_tiny.normalise import normalise_spoken

EXPECTED: dict[str, tuple[str, ...]] = {
    "hello": ("hello", "hi"),
    "thank you": ("welcome",),
    "what can you do": ("arithmetic", "spell", "convert", "date"),
    "what is seventeen times three": ("51",),
}
LONG_ANSWER_QUESTION = "what can you do"  # its answer takes seconds to speak: for barge-in
_BY_QUESTION = {normalise_spoken(q): words for q, words in EXPECTED.items()}


def answers(question: str, answer: str) -> bool:
    """Whether ``answer`` says what the shipped model should say to ``question``."""
    words = normalise_spoken(answer).split()
    return any(w in words for w in _BY_QUESTION[normalise_spoken(question)])


@dataclass
class Recorder:
    """Collects every event with the monotonic time it was published."""

    events: list[Event] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        self.times.append(time.monotonic())

    def of(self, kind: type[Event], turn: int | None = None) -> list:
        return [e for e in self.events if isinstance(e, kind) and turn in (None, e.turn)]

    def time_of(self, event: Event) -> float:
        return self.times[next(i for i, e in enumerate(self.events) if e is event)]

    def types(self, turn: int | None = None, skip: tuple[str, ...] = ("AudioLevel",)) -> list:
        return [e.type for e in self.events if turn in (None, e.turn) and e.type not in skip]

    async def wait_for(self, kind: type[Event], count: int = 1, timeout: float = 60) -> Event:
        deadline = time.monotonic() + timeout
        while len(self.of(kind)) < count:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"no {count} {kind.__name__} within {timeout} s; got {self.types()}"
                )
            await asyncio.sleep(0.02)
        return self.of(kind)[count - 1]


class ScriptedMicrophone:
    """A fake microphone: queued speech, else silence, in 32 ms frames at real-time pace."""

    def __init__(self) -> None:
        self._pending = np.zeros(0, np.float32)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._failed = threading.Event()
        self._next = time.monotonic()

    def say(self, samples: np.ndarray, after_s: float = 0.3) -> None:
        """Queue ``samples`` after ``after_s`` of silence, behind what is already queued."""
        gap = np.zeros(round(after_s * SAMPLE_RATE), np.float32)
        with self._lock:
            self._pending = np.concatenate([self._pending, gap, samples.astype(np.float32)])

    def unplug(self) -> None:
        """The device goes away: the next read fails as a vanished microphone does."""
        self._failed.set()

    def read(self) -> np.ndarray:
        if self._closed.is_set() or self._failed.is_set():
            raise AudioDeviceError("the scripted microphone was unplugged")
        self._next += FRAME_SAMPLES / SAMPLE_RATE
        time.sleep(max(self._next - time.monotonic(), 0.0))
        with self._lock:
            frame, self._pending = self._pending[:FRAME_SAMPLES], self._pending[FRAME_SAMPLES:]
        return np.pad(frame, (0, FRAME_SAMPLES - frame.size))

    def close(self) -> None:
        self._closed.set()


class ClockedOutput:
    """A fake speaker: what is queued "plays" at real-time pace from when it is queued."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self.closed = False
        self.stops = 0
        self._base = 0.0  # seconds played before the current run
        self._queued = 0.0  # seconds queued in the current run
        self._since: float | None = None  # when the current run started

    def play(self, samples: np.ndarray) -> None:
        if self._since is None or self._played_in_run() >= self._queued:
            self._base += self._queued if self._since is not None else 0.0
            self._since, self._queued = time.monotonic(), 0.0
        self._queued += len(samples) / self.sample_rate

    def _played_in_run(self) -> float:
        return 0.0 if self._since is None else min(time.monotonic() - self._since, self._queued)

    @property
    def played_s(self) -> float:
        return self._base + self._played_in_run()

    @property
    def busy(self) -> bool:
        return self._since is not None and self._played_in_run() < self._queued

    def stop(self) -> float:
        self.stops += 1
        self._base += self._played_in_run()
        self._since, self._queued = None, 0.0
        return self._base

    def wait(self, timeout: float | None = None) -> bool:
        while self.busy:
            time.sleep(0.01)
        return True

    def close(self) -> None:
        self.closed = True


def typed_session(engine, settings: Settings | None = None, **parts) -> Session:
    """A session with no microphone and text-only answers (unless ``parts`` give an
    ``output`` and a ``voice``), built by the factory from parts already loaded. It
    keeps a transcript log only where ``settings.log_path`` says (never the user's)."""
    settings = settings or Settings()
    speech = "transcriber" in parts
    wiring = Wiring(
        microphone=False, speech=speech, output="none", log=settings.log_path is not None
    )
    return build_session(settings, wiring, engine=engine, **parts)


@contextlib.asynccontextmanager
async def running(session: Session) -> AsyncIterator[Recorder]:
    """The session running, its events recorded; stopped (as by Ctrl-C) on exit."""
    recorder = Recorder()
    session.subscribe(recorder)
    task = asyncio.create_task(session.run())
    try:
        yield recorder
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        session.close()


def voice_session(reasoner, transcriber, voice, **settings):
    """A session on the fake microphone and fake speaker, built by the factory."""
    microphone, output = ScriptedMicrophone(), ClockedOutput(voice.sample_rate)
    session = build_session(
        Settings(steps=16, **settings),
        Wiring(log=False),
        engine=reasoner,
        transcriber=transcriber,
        voice=voice,
        microphone=microphone,
        output=output,
    )
    return session, microphone, output


async def ask_all(session: Session, questions: list[str]) -> Recorder:
    """Send typed questions, wait until every one is answered, stop; the events."""
    async with running(session) as recorder:
        for question in questions:
            session.send(SubmitText(question))
        await session.idle()
        await asyncio.sleep(0.05)  # the log writer's thread reports back on the loop
    return recorder


async def logged(log: TranscriptLog, count: int, timeout: float = 10) -> list[TurnRecord]:
    """The log's turns once it holds ``count`` (its writer thread may still be at it)."""
    deadline = time.monotonic() + timeout
    while len(records := log.read_recent(100)[0]) < count:
        assert time.monotonic() < deadline, f"{log.path} holds {len(records)} of {count} turns"
        await asyncio.sleep(0.05)
    return records
