"""The websocket protocol: JSON messages in, session commands; session events, JSON out.

Names follow the OpenAI Realtime API where the meaning is the same, so an existing
client needs little change; ``docs/protocol.md`` documents every field. Nothing here
does I/O, so the whole mapping can be read (and tested) in one place.

=====================================  ==================================================
client → server                        what the session is told
=====================================  ==================================================
``session.update``                     ``UpdateSettings`` (live settings: steps, …); audio
                                       formats and the voice are the connection's
``input_audio_buffer.append``          base64 audio in the input format → the microphone
``input_audio_buffer.commit``          the utterance ends now (a hang-over of silence)
``input_audio_buffer.clear``           unheard audio dropped (``Mute`` then ``Unmute``)
``conversation.item.create``           ``SubmitText`` (a user message's ``input_text``)
``response.create``                    nothing (answers start by themselves)
``response.cancel``                    ``CancelTurn``
=====================================  ==================================================

=====================================  ==================================================
session event                          server → client
=====================================  ==================================================
``SettingsChanged``                    ``session.updated``
``SpeechStarted``                      ``input_audio_buffer.speech_started``
``PartialTranscript``                  ``conversation.item.input_audio_transcription.delta``
``FinalTranscript`` (voice, file)      ``input_audio_buffer.speech_stopped``, then
                                       ``conversation.item.input_audio_transcription.completed``
``FinalTranscript`` (text)             ``conversation.item.created``
first of a turn's answer events        ``response.created``
``Denoise``                            ``response.draft`` (extension: the whole draft)
``AnswerReady``                        ``response.text.done``
audio played (see the server)          ``response.audio.delta``
``SpeakingFinished``, ``Interrupted``  ``response.audio.done`` (once audio was sent)
``TurnCompleted``                      ``response.done`` (status, per-stage timings)
``Error``                              ``error``
=====================================  ==================================================
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any

from quicksilver.assistant.commands import CancelTurn, Command, SubmitText
from quicksilver.assistant.config import LIVE_SETTINGS
from quicksilver.assistant.events import (
    AnswerReady,
    Denoise,
    Error,
    Event,
    FinalTranscript,
    Interrupted,
    PartialTranscript,
    SettingsChanged,
    SpeakingFinished,
    SpeakingStarted,
    SpeechStarted,
    TurnCompleted,
)


class ProtocolError(ValueError):
    """A client message the server cannot act on; sent back as an ``error`` event."""

    def __init__(self, code: str, message: str, event_id: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.event_id = event_id


@dataclass(frozen=True)
class Append:
    """Audio for the microphone, as the client sent it (its input format's bytes)."""

    data: bytes


@dataclass(frozen=True)
class UpdateSession:
    """``session.update``: the session's live ``settings``, and what the connection
    itself holds: the audio formats (``audio``) and the voice asked for."""

    settings: dict[str, Any]
    audio: dict[str, Any]
    voice: str | None = None


@dataclass(frozen=True)
class Commit:
    """End the utterance in progress now."""


@dataclass(frozen=True)
class Clear:
    """Drop the audio not yet heard."""


@dataclass(frozen=True)
class CreateResponse:
    """A client asks for an answer; accepted, since every question gets one by itself."""


Request = Command | Append | Commit | Clear | CreateResponse | UpdateSession

AUDIO_FIELDS = {
    "input_audio_format": str,
    "input_sample_rate": int,
    "output_audio_format": str,
    "output_sample_rate": int,
}


def error_message(code: str, message: str, event_id: str | None = None, **extra: Any) -> dict:
    return {
        "type": "error",
        "error": {"code": code, "message": message, "event_id": event_id, **extra},
    }


def parse(raw: str | bytes) -> Request:
    """What a client message asks for; raises :class:`ProtocolError` when it is unusable."""
    if isinstance(raw, bytes):
        raise ProtocolError("invalid_json", "binary frames are not accepted; send JSON text")
    try:
        message = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ProtocolError("invalid_json", f"not JSON: {error}") from error
    if not isinstance(message, dict):
        raise ProtocolError("invalid_json", "a message is a JSON object")
    event_id = message.get("event_id")
    event_id = event_id if isinstance(event_id, str) else None
    kind = message.get("type")
    handler = _HANDLERS.get(kind) if isinstance(kind, str) else None
    if handler is None:
        raise ProtocolError("unknown_type", f"unknown message type {kind!r}", event_id)
    try:
        return handler(message)
    except ProtocolError as error:
        raise ProtocolError(error.code, str(error), event_id) from error


def _field(message: dict, name: str, kind: type) -> Any:
    value = message.get(name)
    if not isinstance(value, kind):
        raise ProtocolError("missing_field", f"{message['type']} needs {name!r} ({kind.__name__})")
    return value


def _session_update(message: dict) -> Request:
    changes = dict(_field(message, "session", dict))
    audio = {name: changes.pop(name) for name in AUDIO_FIELDS if name in changes}
    for name, value in audio.items():
        if not isinstance(value, AUDIO_FIELDS[name]) or isinstance(value, bool):
            kind = "a whole number of Hz" if AUDIO_FIELDS[name] is int else "a format's name"
            raise ProtocolError("invalid_field", f"{name} must be {kind}, not {value!r}")
    voice = changes.pop("voice", None)
    if voice is not None and not isinstance(voice, str):
        raise ProtocolError("invalid_field", f"voice is a name, not {voice!r}")
    fixed = sorted(set(changes) - LIVE_SETTINGS)
    if fixed:
        changeable = sorted(LIVE_SETTINGS | set(AUDIO_FIELDS) | {"voice"})
        raise ProtocolError(
            "invalid_field",
            f"cannot change {', '.join(fixed)} on a live session; "
            f"these can: {', '.join(changeable)}",
        )
    return UpdateSession(changes, audio, voice)


def _append(message: dict) -> Request:
    try:
        return Append(base64.b64decode(_field(message, "audio", str), validate=True))
    except binascii.Error as error:
        raise ProtocolError("invalid_audio", f"audio is not base64: {error}") from error


def _item_create(message: dict) -> Request:
    item = _field(message, "item", dict)
    content = item.get("content")
    texts = [
        part.get("text")
        for part in (content if isinstance(content, list) else [])
        if isinstance(part, dict) and part.get("type") in ("input_text", "text")
    ]
    if (
        item.get("role", "user") != "user"
        or not texts
        or not all(isinstance(text, str) for text in texts)
    ):
        raise ProtocolError(
            "missing_field",
            'conversation.item.create needs item: {"type": "message", "role": "user", '
            '"content": [{"type": "input_text", "text": "..."}]}',
        )
    return SubmitText(" ".join(texts))


_HANDLERS = {
    "session.update": _session_update,
    "input_audio_buffer.append": _append,
    "input_audio_buffer.commit": lambda message: Commit(),
    "input_audio_buffer.clear": lambda message: Clear(),
    "conversation.item.create": _item_create,
    "response.create": lambda message: CreateResponse(),
    "response.cancel": lambda message: CancelTurn(),
}


def response_id(turn: int) -> str:
    return f"resp_{turn}"


def item_id(turn: int) -> str:
    return f"item_{turn}"


@dataclass
class Translator:
    """Session events → server messages for one connection; remembers which responses
    were announced (``response.created``) and which sent audio."""

    created: set[int] = field(default_factory=set)
    with_audio: set[int] = field(default_factory=set)
    speaking: int = 0  # the turn whose answer the output plays

    def messages(self, event: Event) -> list[dict]:
        turn = event.turn
        if isinstance(event, SpeakingStarted):
            self.speaking = turn
            return []
        if isinstance(event, SettingsChanged):
            return [{"type": "session.updated", "session": event.changes}]
        if isinstance(event, SpeechStarted):
            return [{"type": "input_audio_buffer.speech_started", "item_id": item_id(turn)}]
        if isinstance(event, PartialTranscript):
            return [{
                "type": "conversation.item.input_audio_transcription.delta",
                "item_id": item_id(turn), "transcript": event.text,
            }]  # fmt: skip
        if isinstance(event, FinalTranscript) and event.source == "text":
            item = {"id": item_id(turn), "type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": event.text}]}  # fmt: skip
            return [{"type": "conversation.item.created", "item": item}]
        if isinstance(event, FinalTranscript):
            # the session has no event of its own for the endpoint; its final transcript
            # follows it, so speech_stopped is sent then (late by the transcription)
            return [{"type": "input_audio_buffer.speech_stopped", "item_id": item_id(turn)}, {
                "type": "conversation.item.input_audio_transcription.completed",
                "item_id": item_id(turn), "transcript": event.text,
            }]  # fmt: skip
        if isinstance(event, Denoise):
            return self._response(turn, {
                "type": "response.draft", "step": event.step,
                "total_steps": event.total_steps, "text": event.text,
                "masked": event.masked, "step_ms": event.step_ms,
            })  # fmt: skip
        if isinstance(event, AnswerReady):
            return self._response(turn, {
                "type": "response.text.done", "text": event.text, "steps": event.steps,
                "forward_passes": event.forward_passes, "engine_ms": event.engine_ms,
                "prompt_tokens": event.prompt_tokens, "confidence": event.confidence,
                "withheld": event.withheld,
            })  # fmt: skip
        if isinstance(event, SpeakingFinished | Interrupted) and turn in self.with_audio:
            self.with_audio.discard(turn)
            return self._response(turn, {"type": "response.audio.done"})
        if isinstance(event, TurnCompleted):
            record = event.record
            self.with_audio.discard(turn)
            done = self._response(turn, {
                "type": "response.done",
                "response": {
                    "id": response_id(turn),
                    "status": "cancelled" if record.interrupted else "completed",
                    "text": record.answer, "spoken": record.spoken,
                    "timings": record.metrics,
                },
            })  # fmt: skip
            self.created.discard(turn)
            return done
        if isinstance(event, Error):
            code = "invalid_command" if event.stage == "command" else f"{event.stage}_failed"
            return [error_message(code, event.message, None, hint=event.hint)]
        return []

    def audio(self, delta: str) -> list[dict]:
        """Answer audio the output was given (the turn that started speaking last),
        already encoded in the connection's output format."""
        self.with_audio.add(self.speaking)
        delta = {"type": "response.audio.delta", "delta": delta}
        return self._response(self.speaking, delta)

    def _response(self, turn: int, message: dict) -> list[dict]:
        message = {**message, "response_id": response_id(turn)}
        if turn in self.created:
            return [message]
        self.created.add(turn)
        created = {"type": "response.created",
                   "response": {"id": response_id(turn), "status": "in_progress"}}  # fmt: skip
        return [created, message]
