"""The typed event stream of a conversation.

Everything that happens in a session is one frozen dataclass here. The command line,
the Textual app, the websocket server, the transcript log and the tests all read the
same stream, so nothing about a turn is known to one consumer and hidden from another;
every command a face sends (:mod:`quicksilver.assistant.commands`) is answered here too.
``to_dict`` gives the JSON form (with a ``type`` field) the websocket server sends.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from quicksilver.assistant.transcript import Source, TurnRecord


@dataclass(frozen=True)
class Event:
    """Base class: every event carries the turn it belongs to (0 before the first)."""

    turn: int

    @property
    def type(self) -> str:
        return type(self).__name__

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **dataclasses.asdict(self)}


@dataclass(frozen=True)
class Listening(Event):
    """The session waits for the user to speak (or type)."""


@dataclass(frozen=True)
class AudioLevel(Event):
    """Microphone loudness, a few times a second, for a level meter."""

    rms: float
    speech_probability: float


@dataclass(frozen=True)
class SpeechStarted(Event):
    """Voice activity began; a new turn starts."""


@dataclass(frozen=True)
class PartialTranscript(Event):
    text: str


@dataclass(frozen=True)
class FinalTranscript(Event):
    """The question of the turn: what Whisper heard, or the typed text (``source``)."""

    text: str
    source: Source = "voice"


@dataclass(frozen=True)
class Denoise(Event):
    """One denoising step: the whole draft, masked positions shown as ░, and how long the
    step took (``step_ms``: the engine's pass and the draft's decoding)."""

    step: int
    total_steps: int
    thinking: str
    text: str
    masked: int
    step_ms: float


@dataclass(frozen=True)
class AnswerReady(Event):
    text: str
    thinking: str
    steps: int
    forward_passes: int
    engine_ms: float
    prompt_tokens: int = 0  # what the model read: system message, remembered turns, question
    confidence: float | None = None  # the engine's ``Answer.confidence``, in [0, 1]
    withheld: str = ""  # the model's own answer when it was not said (too unsure), else ""


@dataclass(frozen=True)
class SpeakingStarted(Event):
    text: str


@dataclass(frozen=True)
class SpeakingFinished(Event):
    """Playback ended normally; ``text`` is what was spoken."""

    text: str


@dataclass(frozen=True)
class Interrupted(Event):
    """The user barged in: ``spoken`` was heard, ``dropped`` never played."""

    spoken: str
    dropped: str


@dataclass(frozen=True)
class TurnMetrics(Event):
    """Milliseconds per stage of one turn, measured from the end of the user's speech.

    ``endpoint_ms``: end of speech → endpoint decided (the hang-over);
    ``transcript_ms``: endpoint → final transcript; ``engine_ms``: the denoising;
    ``first_audio_ms``: answer ready → first answer audio played;
    ``voice_to_voice_ms``: end of speech → first answer audio; ``voice_ahead``: the
    first piece of audio was synthesised while the engine finished (Settings.voice_ahead).
    A stage that did not happen (typed input, no speaker) is ``None``.
    """

    endpoint_ms: float | None = None
    transcript_ms: float | None = None
    engine_ms: float | None = None
    steps: int | None = None
    first_audio_ms: float | None = None
    voice_to_voice_ms: float | None = None
    speculative: bool = False
    voice_ahead: bool = False


@dataclass(frozen=True)
class TurnCompleted(Event):
    """A turn is over and kept: the transcript log and the memory hold it from now on."""

    record: TurnRecord


@dataclass(frozen=True)
class Muted(Event):
    """The microphone is ignored (``muted``) or heard again; typed input always works."""

    muted: bool


@dataclass(frozen=True)
class ConversationReset(Event):
    """The conversation was forgotten: the next question starts a new one."""


@dataclass(frozen=True)
class SettingsChanged(Event):
    """Settings that an ``UpdateSettings`` command changed, by name, as now in effect."""

    changes: dict[str, Any]


@dataclass(frozen=True)
class Error(Event):
    """Something failed; ``hint`` says what the user can do. The session goes on.

    ``stage`` names what failed: a pipeline stage (``transcribe``, ``think``, ``speak``),
    a device (``microphone``), the ``log``, or a face's command (``command``).
    """

    stage: str
    message: str
    hint: str = ""
