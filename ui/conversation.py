"""The conversation on the command line: ``quicksilver [--text]`` and ``converse``.

Both are faces of the one session core: they build a session with
``assistant.build_session``, send it commands and print its events, one readable line
each (what was heard, the answer, the latency); on a terminal, drafts and partial
transcripts only update a status line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TextIO

from quicksilver.assistant.commands import Command, SubmitAudio, SubmitText
from quicksilver.assistant.config import Settings
from quicksilver.assistant.events import (
    AnswerReady,
    Denoise,
    Error,
    Event,
    FinalTranscript,
    Interrupted,
    PartialTranscript,
    TurnCompleted,
    TurnMetrics,
)
from quicksilver.ui.flags import add_setting_flags

# What a user of the command line can do when a component is missing.
WAYS_OUT = {
    "microphone": "; or type your questions: quicksilver --text",
    "speaker": "; or answer in text only with --mute",
    "engine": "; choose another with --model",
    "whisper": "; choose another with --whisper-model",
    "voice": "; choose another with --voice",
    "turn": "; or end questions by silence alone with --no-semantic-turns",
}


def add_conversation_options(parser: argparse.ArgumentParser) -> None:
    """Flags of the conversation; every setting flag overrides config.toml and QUICKSILVER_*."""
    parser.epilog = (
        "Examples: `quicksilver` talks through the microphone and speaker; `quicksilver "
        "--text` answers typed questions; `quicksilver converse --input question.wav` runs "
        "the turns of a recording. The defaults shown can be changed in "
        "~/.config/quicksilver/config.toml or with QUICKSILVER_<NAME> variables; "
        "`quicksilver config` shows what is in effect, `quicksilver history` the past turns."
    )
    mode = parser.add_argument_group(
        "conversation (quicksilver with no command: talk to it; Ctrl-C quits)"
    )
    mode.add_argument(
        "--no-ui",
        action="store_true",
        help="print one line per turn instead of opening the terminal app (what happens "
        "anyway when the input or output is not a terminal)",
    )
    mode.add_argument(
        "--booth",
        action="store_true",
        help="demo booth: a large canvas, example questions as hints, no settings keys, and "
        "the conversation starts afresh after booth_reset_s idle seconds",
    )
    mode.add_argument(
        "--text",
        action="store_true",
        help="type the questions instead of speaking them (no microphone needed); one per "
        "line, Ctrl-D to quit",
    )
    mode.add_argument("--mute", action="store_true", help="print the answers, do not speak them")
    add_setting_flags(mode)


# --------------------------------------------------------------------------- printing


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}"


def format_event(event: Event, show_thinking: bool = False) -> list[str]:
    """The lines an event prints as in the conversation (none for most)."""
    if isinstance(event, FinalTranscript):
        return [f"you: {event.text}" if event.text else "(no words heard)"]
    if isinstance(event, AnswerReady):
        thinking = [f"  (thinking) {event.thinking}"] if show_thinking and event.thinking else []
        withheld = [f"  (not said, too unsure: {event.withheld})"] if event.withheld else []
        return [*thinking, f"quicksilver: {event.text}", *withheld]
    if isinstance(event, Interrupted):
        heard = f'heard: "{event.spoken}"' if event.spoken else "nothing was heard yet"
        return [f"  (interrupted; {heard})"]
    if isinstance(event, TurnMetrics):
        parts = []
        if event.voice_to_voice_ms is not None:
            parts.append(f"{_ms(event.voice_to_voice_ms)} ms voice-to-voice")
        if event.endpoint_ms is not None:
            parts.append(f"endpoint {_ms(event.endpoint_ms)}")
        if event.transcript_ms is not None:
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
    """Prints events as lines; on a terminal, drafts and partials update one status line.

    ``echo_typed=False`` leaves out the typed question, which the terminal already shows.
    """

    def __init__(self, out: TextIO, show_thinking: bool = False, echo_typed: bool = True) -> None:
        self.out = out
        self.show_thinking = show_thinking
        self.echo_typed = echo_typed
        self.live = out.isatty()
        self._status = False

    def __call__(self, event: Event) -> None:
        if self.live and isinstance(event, PartialTranscript):
            self._show_status(f"… {event.text}")
        elif self.live and isinstance(event, Denoise):
            self._show_status(f"thinking {event.step}/{event.total_steps}: {event.text}")
        if isinstance(event, FinalTranscript) and event.source == "text" and not self.echo_typed:
            return
        for line in format_event(event, self.show_thinking):
            self._clear_status()
            print(line, file=self.out, flush=True)

    def close(self) -> None:
        """Leave no half-drawn status line behind (Ctrl-C mid-turn)."""
        self._clear_status()
        self.out.flush()

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


async def answer_all(session, commands: AsyncIterator[Command]) -> None:
    """Run ``session``, send it each command as it comes, and stop it once every one
    is answered (the end of typed input, or of a recording's utterances)."""
    running = asyncio.ensure_future(session.run())
    async for command in commands:
        session.send(command)
    await session.idle()
    session.stop()
    await running


async def typed_questions(lines: AsyncIterator[str]) -> AsyncIterator[Command]:
    async for line in lines:
        if line.strip():  # an empty line in a terminal is no question
            yield SubmitText(line)


async def recording(samples) -> AsyncIterator[Command]:
    yield SubmitAudio(samples)


def _fail(message: str) -> int:
    print(f"quicksilver: {message}", file=sys.stderr)
    return 2


def _startup_failure(error) -> int:
    return _fail(f"{error}{WAYS_OUT.get(error.component, '')}")


def run_conversation(args: argparse.Namespace, settings: Settings) -> int:
    """``quicksilver [--text] [--mute] [--booth] [--no-ui]``: the conversation, in the
    terminal app on a terminal, else one line per turn; until the user quits."""
    from quicksilver.assistant import StartupError, Wiring, build_session
    from quicksilver.audio.devices import AudioDeviceError

    typed = args.text
    output = "none" if args.mute else "speaker"
    wiring = Wiring(microphone=not typed, speech=not typed, output=output)
    if not args.no_ui and sys.stdin.isatty() and sys.stdout.isatty():
        from quicksilver.ui.app import run_app

        return run_app(settings, wiring, booth=args.booth)
    try:
        session = build_session(settings, wiring, progress=_note)
    except StartupError as error:
        return _startup_failure(error)
    printer = EventPrinter(sys.stdout, settings.show_thinking, echo_typed=not sys.stdin.isatty())
    session.subscribe(printer)
    try:
        if typed:
            print("Type a question and press Enter; Ctrl-D quits.", flush=True)
            asyncio.run(answer_all(session, typed_questions(stdin_lines())))
        else:
            print("Listening: ask a question; Ctrl-C quits.", flush=True)
            asyncio.run(session.run())
    except AudioDeviceError:
        return 1  # the Error event has said what happened
    finally:
        printer.close()
        session.close()
    return 0


def _note(update) -> None:
    """A part the conversation goes on without is said on stderr; the rest is silent."""
    if update.state == "fallback":
        print(f"quicksilver: {update.detail}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- converse


class TurnReport:
    """``converse``'s output: each completed turn as lines, or as one JSON object."""

    def __init__(self, as_json: bool, show_thinking: bool, output: Path | None) -> None:
        self.as_json = as_json
        self.output = output
        self.printer = EventPrinter(sys.stdout, show_thinking)
        self.turns = 0

    def __call__(self, event: Event) -> None:
        if isinstance(event, Error):
            print(format_event(event)[0], file=sys.stderr, flush=True)
        elif isinstance(event, TurnCompleted):
            self.turns += 1
            if self.as_json:
                print(json.dumps(self._turn_json(event), ensure_ascii=False), flush=True)
        elif not self.as_json:
            self.printer(event)

    def _turn_json(self, event: TurnCompleted) -> dict:
        record = event.record
        return {
            "turn": record.turn,
            "transcript": record.user,
            "answer": record.answer,
            "thinking": record.thinking,
            "steps": record.metrics.get("steps"),
            "timings_ms": {k: v for k, v in record.metrics.items() if k.endswith("_ms")},
            "output": str(self.output) if self.output else None,
        }


def cmd_converse(args: argparse.Namespace, settings: Settings) -> int:
    """The turns of a recording: every utterance in it heard, answered and spoken."""
    from quicksilver.assistant import StartupError, Wiring, build_session
    from quicksilver.audio.wavfile import read_wav

    samples = read_wav(args.input)
    output = Path(args.output) if args.output else None
    wiring = Wiring(
        microphone=False, speech=True, output="file" if output else "none", output_path=output
    )
    try:
        session = build_session(settings, wiring)
    except StartupError as error:
        return _startup_failure(error)
    report = TurnReport(args.json, settings.show_thinking, output)
    session.subscribe(report)
    try:
        asyncio.run(answer_all(session, recording(samples)))
    finally:
        session.close()
    if report.turns == 0:
        return 1
    if output is not None and not args.json:
        print(f"wrote the spoken answers to {output}")
    return 0


def add_converse_command(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "converse",
        help="the turns of a recording: hear each question, answer it, speak the answer",
        description="Run the conversation on a recorded WAV file: every utterance in it "
        "(each up to 30 s) is a turn, heard by Whisper, answered by the diffusion engine "
        "with the turns before it in memory, and spoken by Piper. Prints each turn's "
        "transcript, answer and stage times; --output writes the spoken answers.",
    )
    parser.add_argument("--input", required=True, help="the recording, a WAV file")
    parser.add_argument("--output", help="write the spoken answers to this WAV file")
    parser.add_argument("--json", action="store_true", help="print each turn as one line of JSON")
    add_setting_flags(parser)
    parser.set_defaults(func=cmd_converse)
