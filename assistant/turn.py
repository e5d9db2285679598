"""One attempt at answering a turn, and the clock that times its stages.

A spoken turn may be attempted early (at a pause, before the endpoint) and dropped if
the user goes on speaking; the session tells attempts apart by object and turn id, so
whatever a dropped attempt still delivers is simply ignored.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from dataclasses import dataclass, field

import numpy as np
from quicksilver.assistant.events import Event, TurnMetrics
from quicksilver.assistant.stages import Rehearsal, Speech
from quicksilver.assistant.transcript import Source, TurnRecord, now_iso
from quicksilver.engine import Answer


@dataclass
class TurnClock:
    """``perf_counter`` times of the turn's milestones; ``None`` where there was none."""

    speech_ended: float | None = None  # the user stopped speaking (spoken turns)
    endpoint: float | None = None  # the end of the question was decided
    transcribed: float | None = None
    answered: float | None = None
    first_audio: float | None = None

    def metrics(
        self, turn: int, answer: Answer | None, speculative: bool, voice_ahead: bool = False
    ) -> TurnMetrics:
        """Per-stage milliseconds; work done before the endpoint counts from it."""
        ready = self.answered
        if ready is not None and self.endpoint is not None:
            ready = max(ready, self.endpoint)
        transcribed = self.transcribed
        if transcribed is not None and self.endpoint is not None:
            transcribed = max(transcribed, self.endpoint)
        return TurnMetrics(
            turn,
            endpoint_ms=_ms(self.speech_ended, self.endpoint),
            transcript_ms=_ms(self.endpoint, transcribed),
            engine_ms=round(answer.latency_s * 1000, 1) if answer else None,
            steps=answer.steps if answer else None,
            first_audio_ms=_ms(ready, self.first_audio),
            voice_to_voice_ms=_ms(self.speech_ended, self.first_audio),
            speculative=speculative,
            voice_ahead=voice_ahead,
        )


def _ms(start: float | None, end: float | None) -> float | None:
    if start is None or end is None:
        return None
    return round(max(end - start, 0.0) * 1000, 1)


@dataclass(eq=False)
class Turn:
    """The question (audio to transcribe, or text), its answer and its speech, as they come.

    Events of an attempt that is not yet ``confirmed`` (a speculative start) are held in
    ``pending`` and published only if the endpoint confirms it.
    """

    id: int
    source: Source
    audio: np.ndarray | None = None
    transcript: str | None = None
    speculative: bool = False
    pause: int = 0  # for a speculative start: the listener's number of its pause
    started_at: str = field(default_factory=now_iso)
    clock: TurnClock = field(default_factory=TurnClock)
    answer: Answer | None = None  # as said (see stages.spoken_answer)
    withheld: str = ""  # the model's own answer, when too unsure to be said
    speech: Speech | None = None
    rehearsal: Rehearsal | None = None  # its first piece, synthesised ahead of the answer
    confirmed: bool = False
    recorded: bool = False
    cancelled: threading.Event = field(default_factory=threading.Event)
    pending: list[Event] = field(default_factory=list)
    tasks: list[asyncio.Task] = field(default_factory=list)

    def cancel(self) -> None:
        self.cancelled.set()
        for task in self.tasks:
            task.cancel()

    def metrics(self) -> TurnMetrics:
        ahead = self.speech is not None and self.speech.rehearsed
        return self.clock.metrics(self.id, self.answer, self.speculative, ahead)

    def record(self, metrics: TurnMetrics, *, interrupted: bool, spoken: str) -> TurnRecord:
        answer = self.answer
        return TurnRecord(
            turn=self.id,
            user=self.transcript or "",
            started_at=self.started_at,
            thinking=answer.thinking if answer else "",
            answer=answer.text if answer else "",
            confidence=round(answer.confidence, 4) if answer else None,
            withheld=self.withheld,
            interrupted=interrupted,
            spoken=spoken,
            source=self.source,
            metrics={k: v for k, v in dataclasses.asdict(metrics).items() if k != "turn"},
        )
