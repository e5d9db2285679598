"""The one place a session is built: settings in, a wired :class:`Session` out.

Every face (the command line, ``converse``, the Textual app, the websocket server, the
tests) calls :func:`build_session` with the user's :class:`Settings` and a
:class:`Wiring` that says where questions come from and where answers go; none of them
loads models or opens devices itself. Everything that can be checked cheaply (devices,
an output file) is checked before the slow model loads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import date
from typing import Literal, TypeVar

from quicksilver.assistant.config import Settings
from quicksilver.assistant.listener import FrameSource
from quicksilver.assistant.loading import (
    StartupError,
    load_engine,
    load_transcriber_for,
    load_turn_model,
    load_voice,
)
from quicksilver.assistant.memory import Memory
from quicksilver.assistant.playback import AudioOutput, WavOutput
from quicksilver.assistant.session import Session
from quicksilver.assistant.stages import Speak, Think, Transcribe
from quicksilver.assistant.transcript import TranscriptLog
from quicksilver.assistant.transcript_writer import TranscriptWriter
from quicksilver.assistant.wiring import Output, Progress, Wiring
from quicksilver.audio.devices import AudioDeviceError, Microphone, Speaker, find_device
from quicksilver.audio.stt import Transcriber
from quicksilver.audio.tts import Voice
from quicksilver.audio.turn import SmartTurn
from quicksilver.audio.wavfile import AudioFileError, check_output_path
from quicksilver.engine import Engine

T = TypeVar("T")


def engine_memory(engine: Engine, settings: Settings) -> Memory:
    """A memory whose prompts always leave room for the engine's reply canvas."""
    room = engine.model.config.max_seq_len - engine.sampler.max_new_tokens
    return Memory(engine.count_prompt_tokens, settings.context_tokens, settings.max_turns, room)


def build_session(
    settings: Settings,
    wiring: Wiring | None = None,
    *,
    engine: Engine | None = None,
    transcriber: Transcriber | None = None,
    voice: Voice | None = None,
    microphone: FrameSource | None = None,
    output: AudioOutput | None = None,
    turn_model: SmartTurn | None = None,
    today: Callable[[], date] = date.today,
    progress: Callable[[Progress], None] = lambda update: None,
) -> Session:
    """A session wired as asked; raises :class:`StartupError` (naming the component)
    when something it needs is missing. A missing speaker is not fatal: the answers are
    then text only. ``progress`` hears how each part is doing as it loads (it is called
    from the thread that builds the session). ``engine``, ``transcriber``, ``voice`` and
    ``turn_model`` reuse models already loaded (one engine serving several sessions, the tests);
    ``microphone`` and ``output`` are a frame source and an audio output to use instead
    of the devices the settings name (a face with its own audio, the tests)."""
    wiring = wiring or Wiring()
    if microphone is not None:
        wiring = dataclasses.replace(wiring, microphone=True)
    if wiring.microphone and microphone is None:
        _step(progress, "microphone", lambda: _device(settings.input_device, "input"), False)
    kind = "given" if output is not None else _check_output(settings, wiring, progress)
    engine = engine or _step(
        progress, "engine", lambda: load_engine(settings.model, settings.device, settings.threads)
    )
    if not (wiring.microphone or wiring.speech):
        transcriber = None
    elif transcriber is None:
        transcriber = _step(progress, "whisper", lambda: load_transcriber_for(settings))
    speak = None
    if kind != "none":
        voice = voice or _step(
            progress, "voice", lambda: load_voice(settings.voice, settings.threads)
        )
        speak = Speak(voice, output or _open_output(settings, wiring, kind, voice.sample_rate))
    if wiring.microphone and microphone is None:
        try:
            microphone = _step(progress, "microphone", lambda: _microphone(settings))
        except StartupError:
            if speak is not None:
                speak.output.close()
            raise
    if wiring.microphone and settings.semantic_turns and turn_model is None:
        turn_model = _step(progress, "turn", lambda: load_turn_model(settings.threads))
    session = Session(
        Think(engine, engine_memory(engine, settings), today),
        transcribe=Transcribe(transcriber) if transcriber is not None else None,
        speak=speak,
        microphone=microphone,
        settings=settings,
        turn_model=turn_model,
    )
    if wiring.log:
        session.subscribe(TranscriptWriter(TranscriptLog(settings.log_path), session.report))
    return session


def _step(
    progress: Callable[[Progress], None],
    component: str,
    load: Callable[[], T],
    done: bool = True,
) -> T:
    """``load()``, with its progress told; ``done=False`` for a check before the load."""
    progress(Progress(component, "loading"))
    try:
        result = load()
    except StartupError as error:
        progress(Progress(component, "failed", str(error)))
        raise
    if done:
        progress(Progress(component, "ready"))
    return result


def _microphone(settings: Settings) -> Microphone:
    try:
        return Microphone(settings.input_device)
    except AudioDeviceError as error:
        raise StartupError("microphone", str(error)) from error


def _check_output(
    settings: Settings, wiring: Wiring, progress: Callable[[Progress], None]
) -> Output:
    if wiring.output == "file":
        if wiring.output_path is None:
            raise ValueError("Wiring(output='file') needs an output_path")
        try:
            check_output_path(wiring.output_path)
        except AudioFileError as error:
            raise StartupError("output", str(error)) from error
    if wiring.output == "speaker":
        try:
            _device(settings.output_device, "output")
        except StartupError as error:
            detail = f"no speaker, so the answers are text only: {error}"
            progress(Progress("speaker", "fallback", detail))
            return "none"
    return wiring.output


def _device(spec: str | None, kind: Literal["input", "output"]) -> None:
    try:
        find_device(spec, kind)
    except AudioDeviceError as error:
        raise StartupError("microphone" if kind == "input" else "speaker", str(error)) from error


def _open_output(settings: Settings, wiring: Wiring, output: Output, rate: int) -> AudioOutput:
    if output == "file":
        return WavOutput(wiring.output_path, rate)
    try:
        return Speaker(settings.output_device, sample_rate=rate)
    except AudioDeviceError as error:
        raise StartupError("speaker", str(error)) from error
