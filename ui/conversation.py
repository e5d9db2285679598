"""The conversation on the command line: ``quicksilver [--no-ui | --text]`` and ``converse``.

The voice loop runs headless here: one readable line per event (what was heard, the
answer, the latency); drafts and partial transcripts only update a status line on a
terminal. Settings come from ``assistant.config`` (defaults, config file, environment),
with the flags below on top.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
from collections.abc import AsyncIterator
from typing import TextIO

from quicksilver.assistant.config import NAMES, Settings, load_settings
from quicksilver.assistant.events import (
    AnswerReady,
    Denoise,
    Error,
    Event,
    FinalTranscript,
    Interrupted,
    PartialTranscript,
    TurnMetrics,
)


def add_session_options(parser: argparse.ArgumentParser) -> None:
    """Flags of the conversation; every one overrides config.toml and QUICKSILVER_*."""
    parser.epilog = (
        "Examples: `quicksilver` talks through the microphone and speaker; `quicksilver "
        "--text` answers typed questions; `quicksilver converse --input question.wav` runs "
        "one turn from a file. The defaults shown can be changed in "
        "~/.config/quicksilver/config.toml or with QUICKSILVER_<NAME> variables; "
        "`quicksilver config` shows what is in effect, `quicksilver history` the past turns."
    )
    mode = parser.add_argument_group(
        "conversation (quicksilver with no command: talk to it; Ctrl-C quits)"
    )
    mode.add_argument(
        "--no-ui",
        action="store_true",
        help="talk through the microphone, printing one line per turn in the terminal "
        "(what is shown today without the flag too)",
    )
    mode.add_argument(
        "--text",
        action="store_true",
        help="type the questions instead of speaking them (no microphone needed); one per "
        "line, Ctrl-D to quit",
    )
    mode.add_argument("--mute", action="store_true", help="print the answers, do not speak them")
    mode.add_argument(
        "--headset",
        action="store_true",
        default=None,
        help="you wear headphones: keep listening while the assistant speaks, so you can "
        "interrupt it (with loudspeakers the microphone is muted then, so it never answers "
        "itself)",
    )
    mode.add_argument(
        "--input-device", metavar="DEVICE", help="microphone: index or part of its name"
    )
    mode.add_argument(
        "--output-device", metavar="DEVICE", help="speaker: index or part of its name"
    )
    mode.add_argument(
        "--hangover-ms",
        type=int,
        metavar="MS",
        help="silence that ends your question, in ms (default 500)",
    )
    mode.add_argument(
        "--speculative-ms",
        type=int,
        metavar="MS",
        help="silence after which the answer is started early, in ms; 0 turns it off (default 200)",
    )
    add_model_options(mode)


def add_model_options(group: argparse._ActionsContainer) -> None:
    group.add_argument(
        "--model",
        metavar="NAME",
        help="reasoning model: a checkpoint folder or a registered name (default: the "
        "shipped model)",
    )
    group.add_argument(
        "--steps", type=int, metavar="N", help="denoising steps per answer (default 16)"
    )
    group.add_argument("--device", help="where the model runs: cpu, cuda or auto (default)")
    group.add_argument(
        "--whisper-model",
        metavar="NAME",
        help="speech recognition: a faster-whisper model name (e.g. base.en) or folder "
        "(default: the bundled tiny.en)",
    )
    group.add_argument(
        "--voice",
        metavar="NAME",
        help="Piper voice name or .onnx path (default: the bundled en_US-joe-medium)",
    )
    group.add_argument(
        "--show-thinking",
        action="store_true",
        default=None,
        help="also print the model's hidden reasoning",
    )


def settings_from(args: argparse.Namespace) -> Settings:
    """Defaults, then config.toml, then QUICKSILVER_* variables, then these flags."""
    overrides = {name: getattr(args, name) for name in NAMES if hasattr(args, name)}
    return load_settings(overrides)[0]


# --------------------------------------------------------------------------- printing


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def format_event(event: Event, show_thinking: bool = False) -> list[str]:
    """The lines an event prints as in the headless conversation (none for most)."""
    if isinstance(event, FinalTranscript):
        return [f"you: {event.text}" if event.text else "(no words heard)"]
    if isinstance(event, AnswerReady):
        thinking = [f"  (thinking) {event.thinking}"] if show_thinking and event.thinking else []
        return [*thinking, f"quicksilver: {event.text}"]
    if isinstance(event, Interrupted):
        heard = f'heard: "{event.spoken}"' if event.spoken else "nothing was heard yet"
        return [f"  (interrupted; {heard})"]
    if isinstance(event, TurnMetrics):
        parts = []
        if event.voice_to_voice_ms is not None:
            parts.append(f"{_ms(event.voice_to_voice_ms)} ms voice-to-voice")
        if event.endpoint_ms is not None:
            parts.append(f"endpoint {_ms(event.endpoint_ms)}")
            parts.append(f"transcript {_ms(event.transcript_ms)}")
        parts.append(f"engine {_ms(event.engine_ms)} ms / {event.steps} steps")
        if event.first_audio_ms is not None:
            parts.append(f"first audio {_ms(event.first_audio_ms)}")
        if event.speculative:
            parts.append("started early")
        return [f"  [{' · '.join(parts)}]"]
    if isinstance(event, Error):
        hint = f" ({event.hint})" if event.hint else ""
        return [f"error in {event.stage}: {event.message}{hint}"]
    return []


class EventPrinter:
    """Prints events as lines; on a terminal, drafts and partials update one status line."""

    def __init__(self, out: TextIO, show_thinking: bool = False) -> None:
        self.out = out
        self.show_thinking = show_thinking
        self.live = out.isatty()
        self._status = False

    def __call__(self, event: Event) -> None:
        if self.live and isinstance(event, PartialTranscript):
            self._show_status(f"… {event.text}")
        elif self.live and isinstance(event, Denoise):
            self._show_status(f"thinking {event.step}/{event.total_steps}: {event.text}")
        for line in format_event(event, self.show_thinking):
            self._clear_status()
            print(line, file=self.out, flush=True)

    def _show_status(self, text: str) -> None:
        self.out.write("\r\033[K" + text[:100])
        self.out.flush()
        self._status = True

    def _clear_status(self) -> None:
        if self._status:
            self.out.write("\r\033[K")
            self._status = False


# --------------------------------------------------------------------------- the loop


async def stdin_lines() -> AsyncIterator[str]:
    """Lines typed on standard input, read by a daemon thread (so Ctrl-C never waits)."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str | None] = asyncio.Queue()

    def read() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, line)
        loop.call_soon_threadsafe(lines.put_nowait, None)

    threading.Thread(target=read, name="quicksilver-stdin", daemon=True).start()
    while (line := await lines.get()) is not None:
        yield line


def _fail(message: str) -> int:
    print(f"quicksilver: {message}", file=sys.stderr)
    return 2


def run_conversation(args: argparse.Namespace) -> int:
    """``quicksilver [--no-ui] [--text]``: the conversation loop, until Ctrl-C or Ctrl-D."""
    from quicksilver.assistant.loading import (
        StartupError,
        load_engine,
        load_transcriber,
        load_voice,
    )
    from quicksilver.assistant.session import Session, SessionConfig, engine_memory
    from quicksilver.assistant.transcript import TranscriptLog
    from quicksilver.audio.devices import AudioDeviceError, Microphone, Speaker, find_device

    settings = settings_from(args)
    typed, speak = args.text, not args.mute
    try:
        if not typed:
            find_device(settings.input_device, "input")
    except AudioDeviceError as error:
        return _fail(f"{error}; or type your questions: quicksilver --text")
    try:
        if speak:
            find_device(settings.output_device, "output")
    except AudioDeviceError as error:
        if not typed:
            return _fail(f"{error}; or answer in text only with --mute")
        print(f"(no speaker, answers are printed only: {error})", file=sys.stderr)
        speak = False
    try:
        engine = load_engine(settings.model, settings.device)
        transcriber = None if typed else load_transcriber(settings.whisper_model)
        voice = load_voice(settings.voice) if speak else None
    except StartupError as error:
        return _fail(str(error))
    speaker = None
    if voice is not None:
        try:
            speaker = Speaker(settings.output_device, sample_rate=voice.sample_rate)
        except AudioDeviceError as error:
            return _fail(f"{error}; or answer in text only with --mute")
    memory = engine_memory(engine, settings.context_tokens, settings.max_turns)
    session = Session(
        engine,
        transcriber=transcriber,
        voice=voice,
        speaker=speaker,
        memory=memory,
        log=TranscriptLog(settings.log_path),
        config=SessionConfig.from_settings(settings),
    )
    session.add_callback(EventPrinter(sys.stdout, settings.show_thinking))
    try:
        if typed:
            print("Type a question and press Enter; Ctrl-D quits.", flush=True)
            asyncio.run(session.run_text(stdin_lines()))
            return 0
        try:
            microphone = Microphone(settings.input_device)
        except AudioDeviceError as error:
            return _fail(f"{error}; or type your questions: quicksilver --text")
        print("Listening: ask a question; Ctrl-C quits.", flush=True)
        try:
            asyncio.run(session.run_voice(microphone))
        except AudioDeviceError:
            return 1  # the Error event has said what happened
        return 0
    finally:
        if speaker is not None:
            speaker.close()


# --------------------------------------------------------------------------- converse


def cmd_converse(args: argparse.Namespace) -> int:
    """One voice turn from a WAV file: VAD, Whisper, the engine, Piper."""
    from quicksilver.assistant.converse import converse
    from quicksilver.assistant.loading import (
        StartupError,
        load_engine,
        load_transcriber,
        load_voice,
    )
    from quicksilver.assistant.session import engine_memory
    from quicksilver.assistant.transcript import TranscriptLog, TurnRecord
    from quicksilver.audio.wavfile import read_wav

    settings = settings_from(args)
    samples = read_wav(args.input)
    try:
        engine = load_engine(settings.model, settings.device)
        transcriber = load_transcriber(settings.whisper_model)
        voice = load_voice(settings.voice)
    except StartupError as error:
        return _fail(str(error))
    memory = engine_memory(engine, settings.context_tokens)
    result = converse(
        samples,
        engine,
        transcriber,
        voice,
        output=args.output,
        steps=settings.steps,
        memory=memory,
    )
    record = TurnRecord(
        turn=1,
        user=result.transcript,
        thinking=result.thinking,
        answer=result.answer,
        spoken=result.answer,
        source="file",
        metrics=result.to_dict()["timings_ms"],
    )
    failure = TranscriptLog(settings.log_path).append(record)
    if failure is not None:
        print(f"quicksilver converse: {failure.message} ({failure.hint})", file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
        return 0
    print(f"you: {result.transcript}")
    if settings.show_thinking and result.thinking:
        print(f"  (thinking) {result.thinking}")
    print(f"quicksilver: {result.answer}")
    t = result.timings
    print(
        f"  [vad {t.vad_ms:.0f} · transcript {t.transcript_ms:.0f} · engine {t.engine_ms:.0f} ms"
        f" / {result.steps} steps · first audio {_ms(t.first_audio_ms)} · total "
        f"{t.total_ms:.0f} ms]"
    )
    if result.output:
        seconds = result.answer_audio.size / result.sample_rate
        print(f"wrote {seconds:.1f} s of speech to {result.output}")
    return 0


def add_converse_command(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "converse",
        help="one voice turn from a WAV file: hear the question, answer it, speak the answer",
        description="Run one whole voice turn on a recorded question: voice activity, "
        "Whisper, the diffusion engine and Piper. Prints the transcript, the answer and the "
        "time each stage took; --output writes the spoken answer.",
    )
    parser.add_argument("--input", required=True, help="the question, a WAV file")
    parser.add_argument("--output", help="write the spoken answer to this WAV file")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_model_options(parser)
    parser.set_defaults(func=cmd_converse)
