"""Voice-to-voice latency of the whole conversation loop, turn-taking mode by mode.

Each question is made with espeak-ng and fed to a real session (``build_session``)
as a microphone would deliver it: 32 ms frames at real-time pace, silence before and
after. The clock starts at the true end of speech in that input (the last speech
sample's due time) and stops when the first sample of the answer's audio is handed to
the output, which plays in real time like a speaker. Five modes run side by side,
interleaved question by question: judged pauses (the default: transcription and
denoising begin after 50 ms of silence, and the answer's first piece is synthesised as
soon as the denoising has settled it; the question ends when its sound is judged
finished, after ``whole_pause_ms`` when only its words are), judged pauses with the
voice started only after the last step (``voice_ahead`` off), judged pauses with the
early start at 100 ms of silence, early start with the fixed 500 ms endpoint
(``semantic_turns`` off), and no early start at all. ``--compete`` runs a CPU-bound
process beside it all the while (the issue's "competing process"); ``--window-s N`` adds
judged pauses heard with Whisper's short window at least N s long (the default's is
``SttOptions.min_window_s``). A question counts as intact when its transcript keeps every
content word (none was cut at a pause).

    python -m benchmarks.latency [--steps 16] [--repeats 1] [--questions 12] [--compete]
        [--window-s 8]   (from the repository root)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from quicksilver.assistant.config import Settings, voice_thread_budget
from quicksilver.assistant.events import AnswerReady, Event, FinalTranscript, TurnMetrics
from quicksilver.assistant.factory import Wiring, build_session
from quicksilver.assistant.loading import (
    load_engine,
    load_transcriber_for,
    load_turn_model,
    load_voice,
)
from quicksilver.audio.devices import AudioDeviceError
from quicksilver.audio.resample import resample
from quicksilver.audio.stt import SttOptions, Transcriber
from quicksilver.audio.tts import Voice
from quicksilver.audio.turn import SmartTurn
from quicksilver.audio.vad import FRAME_SAMPLES, SAMPLE_RATE
from quicksilver.engine import Engine

from benchmarks.audio import espeak
from benchmarks.spoken_set import content_intact

QUESTIONS = [
    "Hello.",
    "What is seventeen times three?",
    "Thank you.",
    "What can you do?",
    "What is twelve plus nine?",
    "How do you spell apple?",
    "Which is bigger, seven or twelve?",
    "What is fifty minus eight?",
    "What day is it today?",
    "How many centimeters are in two meters?",
    "Who are you?",
    "What is forty divided by five?",
]
LEAD_S, TAIL_S = 0.5, 3.0
# The competing process spins until its parent is gone, however the benchmark ends
BUSY_UNTIL_ORPHANED = "import os, sys\nwhile os.getppid() == int(sys.argv[1]): pass"


class PacedSource:
    """Frames of ``speech`` (with silence around it) at real-time pace, then silence.

    ``speech_end`` is the wall time (``perf_counter``) at which the last speech sample
    was due: the true end of the user's speech.
    """

    def __init__(self, speech: np.ndarray) -> None:
        lead = np.zeros(int(LEAD_S * SAMPLE_RATE), np.float32)
        self.audio = np.concatenate([lead, speech, np.zeros(int(TAIL_S * SAMPLE_RATE))])
        self.start = time.perf_counter()
        self.speech_end = self.start + (lead.size + speech.size) / SAMPLE_RATE
        self.position = 0
        self.closed = threading.Event()

    def read(self) -> np.ndarray:
        if self.closed.is_set():
            raise AudioDeviceError("the benchmark source was closed")
        end = self.position + FRAME_SAMPLES
        delay = self.start + end / SAMPLE_RATE - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        frame = self.audio[self.position : end]
        self.position = end
        if frame.size < FRAME_SAMPLES:
            frame = np.pad(frame, (0, FRAME_SAMPLES - frame.size))
        return frame.astype(np.float32)

    def close(self) -> None:
        self.closed.set()


class ClockOutput:
    """An output that plays in real time and notes when its first sample arrived."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self.first_play: float | None = None
        self._queued_s = 0.0

    def play(self, samples: np.ndarray) -> None:
        if self.first_play is None:
            self.first_play = time.perf_counter()
        self._queued_s += samples.size / self.sample_rate

    @property
    def played_s(self) -> float:
        if self.first_play is None:
            return 0.0
        return min(self._queued_s, time.perf_counter() - self.first_play)

    def wait(self, timeout: float | None = None) -> bool:
        time.sleep(max(self._queued_s - self.played_s, 0.0))
        return True

    def stop(self) -> float:
        self._queued_s = self.played_s  # the unplayed rest is dropped
        return self._queued_s

    def close(self) -> None:
        """Nothing to release: no device."""


@dataclass
class Turn:
    question: str
    heard: str
    answer: str
    voice_to_voice_ms: float
    metrics: TurnMetrics


@dataclass
class Models:
    engine: Engine
    transcriber: Transcriber
    voice: Voice
    turn: SmartTurn
    speech: dict[str, np.ndarray] = field(default_factory=dict)
    transcribers: dict[str, Transcriber] = field(default_factory=dict)  # a mode's own


def with_window(transcriber: Transcriber, seconds: float) -> Transcriber:
    """The same Whisper, threads and question model, its short window at least ``seconds``."""
    options = replace(transcriber.options, min_window_s=seconds)
    return Transcriber(
        transcriber.model_name,
        cpu_threads=transcriber.cpu_threads,
        options=options,
        questions=transcriber.questions,
    )


async def one_turn(
    models: Models, question: str, settings: Settings, transcriber: Transcriber | None = None
) -> Turn | None:
    output = ClockOutput(models.voice.sample_rate)
    source = PacedSource(models.speech[question])
    session = build_session(
        settings,
        Wiring(log=False),
        engine=models.engine,
        transcriber=transcriber or models.transcriber,
        voice=models.voice,
        microphone=source,
        output=output,
        turn_model=models.turn,
    )
    events: list[Event] = []
    done = asyncio.Event()

    def collect(event: Event) -> None:
        events.append(event)
        if isinstance(event, TurnMetrics):
            done.set()

    session.subscribe(collect)
    task = asyncio.create_task(session.run())
    try:
        await asyncio.wait_for(done.wait(), timeout=LEAD_S + TAIL_S + 60)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    metrics = next(e for e in events if isinstance(e, TurnMetrics))
    heard = next((e.text for e in events if isinstance(e, FinalTranscript)), "")
    answer = next((e.text for e in events if isinstance(e, AnswerReady)), "")
    if output.first_play is None:  # an empty answer: nothing to time
        return None
    v2v = (output.first_play - source.speech_end) * 1000
    return Turn(question, heard, answer, v2v, metrics)


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def median(turns: list[Turn], name: str) -> str:
    values = [getattr(t.metrics, name) for t in turns if getattr(t.metrics, name) is not None]
    return f"{statistics.median(values):.0f}" if values else "–"


def report(label: str, turns: list[Turn]) -> str:
    v2v = [t.voice_to_voice_ms for t in turns]
    used = sum(t.metrics.speculative for t in turns)
    intact = sum(content_intact(t.question, t.heard) for t in turns)  # none cut at a pause
    ahead = sum(t.metrics.voice_ahead for t in turns)
    return (
        f"{label:<24}{percentile(v2v, 50):>7.0f}{percentile(v2v, 90):>7.0f}"
        f"{median(turns, 'endpoint_ms'):>10}{median(turns, 'transcript_ms'):>12}"
        f"{median(turns, 'engine_ms'):>8}{median(turns, 'first_audio_ms'):>13}"
        f"{used:>7}/{len(turns)}{ahead:>6}/{len(turns)}{intact:>6}/{len(turns)}"
    )


async def run(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    threads = Settings().threads  # the budget a session gives each model
    models = Models(
        load_engine(args.model, "cpu", threads),
        load_transcriber_for(Settings(model=args.model, whisper_model=args.whisper)),
        load_voice(Settings().voice, voice_thread_budget()),
        load_turn_model(threads),
    )
    questions = QUESTIONS[: args.questions]
    with tempfile.TemporaryDirectory() as folder:
        for question in questions:
            if args.speaker == "piper":  # a voice whose phrasing the turn model can hear
                speech = resample(models.voice.speak(question), models.voice.sample_rate,
                                  SAMPLE_RATE)  # fmt: skip
                loud = np.nonzero(np.abs(speech) > 0.01)[0]  # the clock starts at its end
                models.speech[question] = speech[loud[0] : loud[-1] + 1]
            else:
                models.speech[question] = espeak(question, Path(folder))
    print(f"models and speech ready in {time.perf_counter() - started:.1f} s")
    early = {"steps": args.steps, "speculative_ms": args.speculative_ms}
    modes = {
        "judged pause": Settings(**early),
        "judged, voice after": Settings(**early, voice_ahead=False),
        "judged, start at 100": Settings(**early | {"speculative_ms": 100}),
        "early start": Settings(**early, semantic_turns=False),
        "at the endpoint": Settings(steps=args.steps, speculative_ms=0),
    }
    if args.window_s:
        label = f"judged, {args.window_s:g} s window"
        modes = {label: Settings(**early)} | modes
        models.transcribers[label] = with_window(models.transcriber, args.window_s)
    competitor = None
    if args.compete:
        competitor = subprocess.Popen([sys.executable, "-c", BUSY_UNTIL_ORPHANED, str(os.getpid())])
        print("a CPU-bound process runs beside the benchmark")
    try:
        results = await measure(models, questions, modes, args)
    finally:
        if competitor is not None:
            competitor.kill()
    print(
        f"\nvoice-to-voice latency over {len(questions)} spoken questions x {args.repeats}, "
        f"{args.steps} denoising steps (ms; stages are medians)"
    )
    print(
        f"{'mode':<24}{'p50':>7}{'p90':>7}{'endpoint':>10}{'transcript':>12}{'engine':>8}"
        f"{'first audio':>13}{'early':>9}{'ahead':>9}{'intact':>9}"
    )
    for label, turns in results.items():
        print(report(label, turns))
    base = statistics.median(t.voice_to_voice_ms for t in results["at the endpoint"])
    for label in list(modes)[:-1]:
        p50 = statistics.median(t.voice_to_voice_ms for t in results[label])
        print(f"{label}: {base - p50:.0f} ms sooner at the median than at the endpoint "
              f"({p50 / base:.2f}x)")  # fmt: skip


async def measure(
    models: Models, questions: list[str], modes: dict[str, Settings], args: argparse.Namespace
) -> dict[str, list[Turn]]:
    await one_turn(models, questions[0], modes["judged pause"])  # warm-up, not counted
    results: dict[str, list[Turn]] = {label: [] for label in modes}
    for _ in range(args.repeats):
        for question in questions:
            for label, config in modes.items():  # interleaved: both see the same load
                turn = await one_turn(models, question, config, models.transcribers.get(label))
                if turn is None:
                    print(f"  {label}: no spoken answer to {question!r}; not counted")
                    continue
                results[label].append(turn)
                if args.verbose:
                    print(
                        f"  {label:<24} {turn.voice_to_voice_ms:6.0f} ms  heard {turn.heard!r}"
                        f" → {turn.answer!r}"
                    )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bundled", help="checkpoint (default: shipped)")
    parser.add_argument(
        "--whisper", default=Settings.whisper_model,
        help=f"the Whisper model that hears (default {Settings.whisper_model})",
    )  # fmt: skip
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=1, help="passes over the questions")
    parser.add_argument(
        "--questions", type=int, default=len(QUESTIONS), help="how many of the questions to ask"
    )
    parser.add_argument("--verbose", action="store_true", help="print every turn")
    parser.add_argument(
        "--compete", action="store_true", help="run a CPU-bound process beside it all"
    )
    parser.add_argument(
        "--speculative-ms", type=int, default=Settings.speculative_ms, metavar="MS",
        help=f"silence before the early start (default {Settings.speculative_ms})",
    )  # fmt: skip
    parser.add_argument(
        "--speaker", choices=("espeak", "piper"), default="espeak",
        help="who asks: espeak-ng at 130 wpm (default) or the Piper voice",
    )  # fmt: skip
    parser.add_argument(
        "--window-s", type=float, default=0.0, metavar="S",
        help="add judged pauses heard with Whisper's short window at least S seconds long "
        f"(the default's: {SttOptions.min_window_s:g})",
    )  # fmt: skip
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
